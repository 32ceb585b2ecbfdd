package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// eventLog is an Events that writes down every call, in order, and wakes
// the tests waiting for one.
type eventLog struct {
	mu      sync.Mutex
	calls   []string
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *eventLog) Refused(reason string, wallet common.Address, id common.Hash) {
	l.add("refused %s %s %s", reason, wallet.Hex(), id.Hex())
}

func (l *eventLog) Rejected(reason string, wallet common.Address, id common.Hash) {
	l.add("rejected %s %s %s", reason, wallet.Hex(), id.Hex())
}

func (l *eventLog) Backpressure(on bool, inFlight, ceiling int) {
	l.add("backpressure %v %d %d", on, inFlight, ceiling)
}

func (l *eventLog) WritesBlocked(wallet common.Address, debt, limit uint64) {
	l.add("blocked %s %d %d", wallet.Hex(), debt, limit)
}

func (l *eventLog) WritesAllowed(wallet common.Address) { l.add("allowed %s", wallet.Hex()) }

func (l *eventLog) Retracted(id common.Hash, wallet common.Address, committed, reMined bool) {
	l.add("retracted %s %s committed=%v reMined=%v", id.Hex(), wallet.Hex(), committed, reMined)
}

// matching returns the calls that start with prefix.
func (l *eventLog) matching(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// wait returns once a call starting with prefix was made, and fails the
// test if none is made within 10 s.
func (l *eventLog) wait(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if got := l.matching(prefix); len(got) > 0 {
			return got[0]
		}
		select {
		case <-changed:
		case <-deadline.C:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("no call %q in %d s; calls: %v", prefix, 10, l.calls)
		}
	}
}

// TestRefusalsAndRejectionsAreEvents: every refusal at intake is told with
// its code, every REJECTED decision with its reason (at intake, or by the
// parker at the end of the wait), and a wallet blocked by GC debt with its
// figures, then allowed once its debt is paid.
func TestRefusalsAndRejectionsAreEvents(t *testing.T) {
	events := newEventLog()
	tierID, unpaidID, forgedID := common.HexToHash("0x21"), common.HexToHash("0x22"), common.HexToHash("0x23")
	tx := common.HexToHash("0xaa")
	blockedID := common.HexToHash("0x24")
	paid := paymentsByID{tierID: {Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: tierID, TxHash: tx, Class: payment.Standard,
		Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)},
		blockedID: {Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: blockedID, TxHash: blockedID, Class: payment.Standard,
			Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)}}
	p, l := startWith(t, paid, nil, nil, func(c *Config) { c.Events = events })
	author := payerKey()
	forger, _ := crypto.GenerateKey()
	wallet := crypto.PubkeyToAddress(author.PublicKey)

	forged := submission(t, forger, forgedID, forgedID, payment.Standard)
	forged.Wallet = wallet
	if _, _, err := p.Submit(context.Background(), forged); apierror.CodeOf(err) != apierror.InvalidSignature {
		t.Fatalf("forged: %v", err)
	}
	events.wait(t, fmt.Sprintf("refused invalid_signature %s %s", wallet.Hex(), forgedID.Hex()))

	// A payment observed that does not match is refused at intake, and
	// the id stays free for the proposal the payment is for (ADR 0028).
	if _, _, err := p.Submit(context.Background(), submission(t, author, tierID, tx, payment.Priority)); apierror.CodeOf(err) != apierror.PaymentTierMismatch {
		t.Fatalf("tier mismatch: %v", err)
	}
	events.wait(t, fmt.Sprintf("refused payment_tier_mismatch %s %s", wallet.Hex(), tierID.Hex()))
	if _, _, err := p.Submit(context.Background(), submission(t, author, tierID, tx, payment.Standard)); err != nil {
		t.Fatalf("the matching proposal after a refused one: %v", err)
	}

	// Nothing unpaid is replicated: after its wait, an unpaid proposal is
	// refused at intake (hold.go).
	if _, _, err := p.Submit(context.Background(), submission(t, author, unpaidID, unpaidID, payment.Standard)); apierror.CodeOf(err) != apierror.PaymentNotFound {
		t.Fatalf("unpaid: %v", err)
	}
	events.wait(t, fmt.Sprintf("refused payment_not_found %s %s", wallet.Hex(), unpaidID.Hex()))

	l.mu.Lock()
	l.accounts = map[[20]byte]*ledgerpb.GcAccount{wallet: {Wallet: wallet[:], ExecutedDebtMicros: 120_000_000}}
	l.mu.Unlock()
	if _, _, err := p.Submit(context.Background(), submission(t, author, blockedID, blockedID, payment.Standard)); apierror.CodeOf(err) != apierror.WriteBlockedGCDebt {
		t.Fatalf("blocked: %v", err)
	}
	events.wait(t, fmt.Sprintf("blocked %s 120000000 100000000", wallet.Hex()))
	events.wait(t, "refused write_blocked_gc_debt "+wallet.Hex())
	if got := events.matching("allowed"); len(got) != 0 {
		t.Fatalf("allowed before the debt was paid: %v", got)
	}
	l.mu.Lock()
	l.accounts = map[[20]byte]*ledgerpb.GcAccount{wallet: {Wallet: wallet[:], PaidMicros: 120_000_000}}
	l.mu.Unlock()
	if _, _, err := p.Submit(context.Background(), submission(t, author, blockedID, blockedID, payment.Standard)); err != nil {
		t.Fatalf("after the debt was paid: %v", err)
	}
	events.wait(t, "allowed "+wallet.Hex())

	// Nothing else was refused or rejected: the accepted proposals are not
	// events.
	if got := append(events.matching("refused"), events.matching("rejected")...); len(got) != 4 {
		t.Fatalf("refusals and rejections %v", got)
	}
	if got := events.matching("backpressure"); len(got) != 0 {
		t.Fatalf("backpressure without load: %v", got)
	}
}

// backpressureCalls are the backpressure calls of the log, their figures
// left out where the test cannot know them.
func backpressureCalls(l *eventLog) []string {
	out := l.matching("backpressure")
	for i, c := range out {
		if strings.HasPrefix(c, "backpressure false") {
			out[i] = "backpressure false"
		}
	}
	return slices.Clip(out)
}
