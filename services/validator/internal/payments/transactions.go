package payments

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
)

// Transactions are the payment transactions this validator observed
// through the chain-watcher, with the state the applied proposals give
// them (ADR 0007): OBSERVED while on chain with fewer confirmations than
// the watcher waits for (its status lists them), then CONFIRMED, MATCHED
// (the proposal committed on it), FINALIZED (its epoch is final), or
// ORPHANED (a reorg took it back). A payment spent and final leaves the
// index (ADR 0031) and with it these views: its proposal's record shows it.
// In MOCK mode no payment is observed: the
// summary counts nothing and says why. It is safe for concurrent use.
type Transactions struct {
	cfg TransactionsConfig

	mu      sync.Mutex
	summary *api.TransactionSummary // the last one, kept for keptFor(took)
	took    time.Duration
}

// TransactionsConfig is what Transactions reads.
type TransactionsConfig struct {
	NodeID  uint64
	Records Records
	// Index is the payment index; nil in MOCK mode.
	Index *Index
	// Chain is the chain-watcher's status: the payments seen on chain and
	// not published yet, OBSERVED here. Nil in MOCK mode.
	Chain *ChainStatus
	Now   func() time.Time
}

// Records reads the applied proposal records.
type Records interface {
	// Record returns the record of a proposal id; ok is false when there is
	// none.
	Record(id common.Hash) (rec *ledgerpb.ProposalRecord, ok bool, err error)
	AppliedIndex() uint64
}

// NewTransactions returns the transaction view of cfg.
func NewTransactions(cfg TransactionsConfig) *Transactions {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Transactions{cfg: cfg}
}

// Summary counts every payment transaction by state.
func (t *Transactions) Summary() (*api.TransactionSummary, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.summary; s != nil && t.cfg.Now().Sub(s.ComputedAt) < rate.KeptFor(t.took) {
		return s, nil
	}
	start := t.cfg.Now()
	s := &api.TransactionSummary{ContractVersion: api.TransactionSummaryVersion, NodeID: t.cfg.NodeID,
		ByState: map[string]int{}, AppliedIndex: t.cfg.Records.AppliedIndex(), ComputedAt: start.UTC(), Gaps: []api.Gap{}}
	for _, st := range api.TransactionStates() {
		s.ByState[st] = 0
	}
	if t.cfg.Index != nil && !t.hasChainStatus() {
		s.Gaps = append(s.Gaps, api.Gap{Field: "byState.OBSERVED",
			Reason: "no status received from the chain-watcher yet: payments without their confirmations are not known"})
	}
	if t.cfg.Index == nil {
		s.Gaps = append(s.Gaps, api.Gap{Field: "total", Reason: "MOCK mode: payments are not observed"})
	} else {
		// A transaction's state is its most advanced payment's (ADR 0007).
		byTx := map[common.Hash]string{}
		var err error
		t.cfg.Index.TxLogs(func(l TxLog) {
			if err != nil {
				return
			}
			var st string
			if st, _, err = t.stateOf(l); err == nil {
				byTx[l.Payment.TxHash] = moreAdvanced(byTx[l.Payment.TxHash], st)
			}
		})
		if err != nil {
			return nil, err
		}
		// Seen on chain, not published yet: OBSERVED unless this
		// validator has the transaction confirmed already.
		for _, p := range t.pending() {
			if _, known := byTx[p.TxHash]; !known {
				byTx[p.TxHash] = api.TxObserved
			}
		}
		for _, st := range byTx {
			s.ByState[st]++
		}
		s.Total = len(byTx)
		if pruned := t.cfg.Index.Stats().Pruned; pruned > 0 {
			s.Gaps = append(s.Gaps, api.Gap{Field: "byState.FINALIZED",
				Reason: fmt.Sprintf("payments spent and final on chain leave the payment index (ADR 0031) and are not counted: %d left it since this validator started", pruned)})
		}
	}
	t.summary, t.took = s, t.cfg.Now().Sub(start)
	return s, nil
}

// Transaction is one transaction by hash: not_found when it paid for no
// proposal this validator has observed.
func (t *Transactions) Transaction(tx common.Hash) (*api.Transaction, error) {
	var logs []TxLog
	if t.cfg.Index != nil {
		logs = t.cfg.Index.Transaction(tx)
	}
	observed := t.observedOnly(tx, logs)
	if len(logs) == 0 && len(observed) == 0 {
		// A payment spent by a committed proposal and final on chain has
		// left the index (ADR 0031): its proposal's record carries it.
		return nil, apierror.New(apierror.NotFound,
			"no payment of transaction %s is observed, or its payments are spent and final (then its proposal's record shows it)", tx.Hex())
	}
	out := &api.Transaction{ContractVersion: api.TransactionVersion, NodeID: t.cfg.NodeID, TxHash: tx.Hex(), Gaps: []api.Gap{}}
	for _, l := range logs {
		st, rec, err := t.stateOf(l)
		if err != nil {
			return nil, err
		}
		p := l.Payment
		tp := api.TransactionPayment{ProposalID: p.ProposalID.Hex(), LogIndex: p.LogIndex, BlockNumber: p.BlockNumber,
			BlockHash: p.BlockHash.Hex(), Confirmations: p.Confirmations, Payer: p.Payer.Hex(), Token: p.Token.String(),
			Class: p.Class.String(), State: st, History: history(l, rec, st)}
		if p.Amount != nil {
			tp.Amount = p.Amount.String()
		}
		if rec != nil {
			status := api.StatusName(rec.GetStatus())
			tp.ProposalStatus = &status
		}
		out.Payments = append(out.Payments, tp)
		out.State = moreAdvanced(out.State, st)
	}
	for _, p := range observed {
		tp, err := t.observedPayment(p)
		if err != nil {
			return nil, err
		}
		out.Payments = append(out.Payments, tp)
		out.State = moreAdvanced(out.State, api.TxObserved)
	}
	slices.SortFunc(out.Payments, func(a, b api.TransactionPayment) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.LogIndex, b.LogIndex))
	})
	out.Gaps = append(out.Gaps, api.Gap{Field: "payments[].confirmations",
		Reason: "as the chain-watcher counted them when it published the payment, or for an OBSERVED one in its last status"})
	return out, nil
}

func (t *Transactions) hasChainStatus() bool {
	if t.cfg.Chain == nil {
		return false
	}
	_, _, ok := t.cfg.Chain.Latest()
	return ok
}

// pending is every payment the watcher's last status lists.
func (t *Transactions) pending() []payment.PendingPayment {
	if t.cfg.Chain == nil {
		return nil
	}
	return t.cfg.Chain.PendingAll()
}

// observedOnly is the payments of tx the watcher's last status lists whose
// proposal this validator has no log of from the transaction: once the
// payment is published, the published log speaks for it.
func (t *Transactions) observedOnly(tx common.Hash, logs []TxLog) []payment.PendingPayment {
	if t.cfg.Chain == nil {
		return nil
	}
	var out []payment.PendingPayment
	for _, p := range t.cfg.Chain.Pending(tx) {
		if !slices.ContainsFunc(logs, func(l TxLog) bool { return l.Payment.ProposalID == p.ProposalID }) {
			out = append(out, p)
		}
	}
	return out
}

// observedPayment is a payment seen on chain and not published yet.
func (t *Transactions) observedPayment(p payment.PendingPayment) (api.TransactionPayment, error) {
	tp := api.TransactionPayment{ProposalID: p.ProposalID.Hex(), LogIndex: p.LogIndex, BlockNumber: p.BlockNumber,
		BlockHash: p.BlockHash.Hex(), Confirmations: p.Confirmations, Payer: p.Payer.Hex(), Amount: p.Amount.String(),
		Token: p.Token.String(), Class: p.Class.String(), State: api.TxObserved,
		History: []api.TransactionStateChange{{State: api.TxObserved, AtMs: int64(p.TimestampS) * 1000}}}
	rec, ok, err := t.cfg.Records.Record(p.ProposalID)
	if err != nil {
		return tp, err
	}
	if ok {
		status := api.StatusName(rec.GetStatus())
		tp.ProposalStatus = &status
	}
	return tp, nil
}

// stateOf is the state of one payment log, and the record of its proposal
// when this validator holds one.
func (t *Transactions) stateOf(l TxLog) (string, *ledgerpb.ProposalRecord, error) {
	rec, ok, err := t.cfg.Records.Record(l.Payment.ProposalID)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		rec = nil
	}
	if l.Retracted {
		return api.TxOrphaned, rec, nil
	}
	if rec != nil && spentBy(rec.GetPayment(), l) {
		switch rec.GetStatus() {
		case ledgerpb.Status_STATUS_FINALIZED:
			return api.TxFinalized, rec, nil
		case ledgerpb.Status_STATUS_COMMITTED:
			return api.TxMatched, rec, nil
		}
	}
	return api.TxConfirmed, rec, nil
}

// spentBy reports whether the payment a record was decided with is log l:
// after a reorg the same transaction can be mined again in another block,
// as another log.
func spentBy(p *ledgerpb.Payment, l TxLog) bool {
	return p != nil && bytes.Equal(p.GetBlockHash(), l.Payment.BlockHash.Bytes()) && uint(p.GetLogIndex()) == l.Payment.LogIndex
}

// history lists the states a payment reached with when, up to st.
func history(l TxLog, rec *ledgerpb.ProposalRecord, st string) []api.TransactionStateChange {
	h := []api.TransactionStateChange{{State: api.TxObserved, AtMs: int64(l.Payment.Timestamp) * 1000}}
	if l.ObservedAt > 0 {
		h = append(h, api.TransactionStateChange{State: api.TxConfirmed, AtMs: l.ObservedAt})
	}
	if (st == api.TxMatched || st == api.TxFinalized) && rec.GetCommittedAtMs() > 0 {
		h = append(h, api.TransactionStateChange{State: api.TxMatched, AtMs: rec.GetCommittedAtMs()})
	}
	if st == api.TxFinalized && rec.GetFinalizedAtMs() > 0 {
		h = append(h, api.TransactionStateChange{State: api.TxFinalized, AtMs: rec.GetFinalizedAtMs()})
	}
	if st == api.TxOrphaned && l.RetractedAt > 0 {
		h = append(h, api.TransactionStateChange{State: api.TxOrphaned, AtMs: l.RetractedAt})
	}
	return h
}

// moreAdvanced combines the states of a transaction's payments: the most
// advanced one that is not ORPHANED, or ORPHANED when all are.
func moreAdvanced(a, b string) string {
	if txRank(b) > txRank(a) {
		return b
	}
	return a
}

func txRank(st string) int {
	switch st {
	case api.TxOrphaned:
		return 1
	case api.TxObserved:
		return 2
	case api.TxConfirmed:
		return 3
	case api.TxMatched:
		return 4
	case api.TxFinalized:
		return 5
	}
	return 0
}
