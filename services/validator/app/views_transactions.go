package app

import (
	"bytes"
	"cmp"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// txViews serves the transaction source routes (DECISIONS D6): payment
// transactions as this validator observed them through the chain-watcher,
// with the state the applied proposals give them. In MOCK mode no payment
// is observed: the summary counts nothing and says why.
type txViews struct {
	cfg      Config
	machine  *state.Machine
	payments *payments.Index // nil in MOCK mode
	// chain is the chain-watcher's status: the payments seen on chain
	// and not published yet, OBSERVED here (nil in MOCK mode).
	chain *payments.ChainStatus
	now   func() time.Time

	mu      sync.Mutex
	summary *api.TransactionSummary // the last one, kept like the live scan (minRescan)
	took    time.Duration
}

func (v *txViews) register(e *echo.Echo) {
	e.GET("/v1/transactions/summary", v.serveSummary)
	e.GET("/v1/transactions/:txHash", v.serveTransaction)
}

// serveSummary counts every payment transaction by state. It reads the
// record of every observed payment's proposal, so the answer is kept
// (keptFor).
func (v *txViews) serveSummary(c echo.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.summary; s != nil && v.now().Sub(s.ComputedAt) < keptFor(v.took) {
		return c.JSON(http.StatusOK, s)
	}
	start := v.now()
	s := &api.TransactionSummary{ContractVersion: api.TransactionSummaryVersion, NodeID: v.cfg.NodeID,
		ByState: map[string]int{}, AppliedIndex: v.machine.AppliedIndex(), ComputedAt: start.UTC(), Gaps: []api.Gap{}}
	for _, st := range api.TransactionStates() {
		s.ByState[st] = 0
	}
	if v.payments != nil && !v.hasChainStatus() {
		s.Gaps = append(s.Gaps, api.Gap{Field: "byState.OBSERVED",
			Reason: "no status received from the chain-watcher yet: payments without their confirmations are not known"})
	}
	if v.payments == nil {
		s.Gaps = append(s.Gaps, api.Gap{Field: "total", Reason: "MOCK mode: payments are not observed"})
	} else {
		// A transaction's state is its most advanced payment's (D6).
		byTx := map[common.Hash]string{}
		var err error
		v.payments.TxLogs(func(l payments.TxLog) {
			if err != nil {
				return
			}
			var st string
			if st, _, err = v.stateOf(l); err == nil {
				byTx[l.Payment.TxHash] = moreAdvanced(byTx[l.Payment.TxHash], st)
			}
		})
		if err != nil {
			return err
		}
		// Seen on chain, not published yet: OBSERVED unless this
		// validator has the transaction confirmed already.
		for _, p := range v.pending() {
			if _, known := byTx[p.TxHash]; !known {
				byTx[p.TxHash] = api.TxObserved
			}
		}
		for _, st := range byTx {
			s.ByState[st]++
		}
		s.Total = len(byTx)
	}
	v.summary, v.took = s, v.now().Sub(start)
	return c.JSON(http.StatusOK, s)
}

// serveTransaction answers one transaction by hash: 404 when it paid for no
// proposal this validator has observed.
func (v *txViews) serveTransaction(c echo.Context) error {
	tx, ok := proposal.ParseHash(c.Param("txHash"))
	if !ok {
		return apierror.Field("transactionId", "must be 0x followed by 64 hex digits")
	}
	var logs []payments.TxLog
	if v.payments != nil {
		logs = v.payments.Transaction(tx)
	}
	observed := v.observedOnly(tx, logs)
	if len(logs) == 0 && len(observed) == 0 {
		return apierror.New(apierror.NotFound, "no payment of transaction %s is observed", tx.Hex())
	}
	out := api.Transaction{ContractVersion: api.TransactionVersion, NodeID: v.cfg.NodeID, TxHash: tx.Hex(), Gaps: []api.Gap{}}
	for _, l := range logs {
		st, rec, err := v.stateOf(l)
		if err != nil {
			return err
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
		tp, err := v.observedPayment(p)
		if err != nil {
			return err
		}
		out.Payments = append(out.Payments, tp)
		out.State = moreAdvanced(out.State, api.TxObserved)
	}
	slices.SortFunc(out.Payments, func(a, b api.TransactionPayment) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.LogIndex, b.LogIndex))
	})
	out.Gaps = append(out.Gaps, api.Gap{Field: "payments[].confirmations",
		Reason: "as the chain-watcher counted them when it published the payment, or for an OBSERVED one in its last status"})
	return c.JSON(http.StatusOK, out)
}

func (v *txViews) hasChainStatus() bool {
	if v.chain == nil {
		return false
	}
	_, _, ok := v.chain.Latest()
	return ok
}

// pending is every payment the watcher's last status lists.
func (v *txViews) pending() []payment.PendingPayment {
	if v.chain == nil {
		return nil
	}
	return v.chain.PendingAll()
}

// observedOnly is the payments of tx the watcher's last status lists whose
// proposal this validator has no log of from the transaction: once the
// payment is published, the published log speaks for it.
func (v *txViews) observedOnly(tx common.Hash, logs []payments.TxLog) []payment.PendingPayment {
	if v.chain == nil {
		return nil
	}
	var out []payment.PendingPayment
	for _, p := range v.chain.Pending(tx) {
		if !slices.ContainsFunc(logs, func(l payments.TxLog) bool { return l.Payment.ProposalID == p.ProposalID }) {
			out = append(out, p)
		}
	}
	return out
}

// observedPayment is a payment seen on chain and not published yet.
func (v *txViews) observedPayment(p payment.PendingPayment) (api.TransactionPayment, error) {
	tp := api.TransactionPayment{ProposalID: p.ProposalID.Hex(), LogIndex: p.LogIndex, BlockNumber: p.BlockNumber,
		BlockHash: p.BlockHash.Hex(), Confirmations: p.Confirmations, Payer: p.Payer.Hex(), Amount: p.Amount.String(),
		Token: p.Token.String(), Class: p.Class.String(), State: api.TxObserved,
		History: []api.TransactionStateChange{{State: api.TxObserved, AtMs: int64(p.TimestampS) * 1000}}}
	rec, err := v.machine.Proposal(p.ProposalID)
	switch {
	case errors.Is(err, state.ErrNotFound):
	case err != nil:
		return tp, err
	default:
		status := api.StatusName(rec.GetStatus())
		tp.ProposalStatus = &status
	}
	return tp, nil
}

// stateOf is the state of one payment log, and the record of its proposal
// when this validator holds one.
func (v *txViews) stateOf(l payments.TxLog) (string, *ledgerpb.ProposalRecord, error) {
	rec, err := v.machine.Proposal(l.Payment.ProposalID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		rec = nil
	case err != nil:
		return "", nil, err
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
func spentBy(p *ledgerpb.Payment, l payments.TxLog) bool {
	return p != nil && bytes.Equal(p.GetBlockHash(), l.Payment.BlockHash.Bytes()) && uint(p.GetLogIndex()) == l.Payment.LogIndex
}

// history lists the states a payment reached with when, up to st.
func history(l payments.TxLog, rec *ledgerpb.ProposalRecord, st string) []api.TransactionStateChange {
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
