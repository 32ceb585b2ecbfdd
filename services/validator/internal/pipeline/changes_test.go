package pipeline

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// quietLoops keeps finalize's entries out of a test that counts entries:
// its first look comes after an hour.
func quietLoops(c *Config) { c.FinalizeInterval = time.Hour }

// returned runs f in a goroutine and returns the channel its error arrives on.
func returned(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// notYet fails the test if f's error has arrived.
func notYet(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) before its change was applied", what, err)
	default:
	}
}

func limitOf(t *testing.T, l *ledger, wallet common.Address) uint64 {
	t.Helper()
	acc, err := l.Account(wallet)
	if err != nil {
		t.Fatal(err)
	}
	return acc.GetLimitMicros()
}

// TestChangeWaitsAtTheCeiling: with the in-flight ceiling taken by
// proposals raft does not apply, a change waits in the sender (reported as
// backpressure) and is not proposed; once the proposals are applied it goes,
// and the route returns once it is applied.
func TestChangeWaitsAtTheCeiling(t *testing.T) {
	gate := make(chan struct{})
	events := newEventLog()
	p, l := startWith(t, paymentsByID{}, gate, nil, func(c *Config) {
		c.VerifyPayments = false
		c.MaxBatch, c.MaxPendingMessages = 3, 4
		c.CommitTimeout = time.Minute // no re-proposals while the gate is shut
		c.Events = events
		quietLoops(c)
	})
	key := payerKey()
	submit := func(i int) {
		id := common.BigToHash(big.NewInt(int64(6000 + i)))
		sub := submission(t, key, id, id, payment.Standard)
		go func() { _, _, _ = p.Submit(context.Background(), sub) }()
	}
	submit(0) // alone: nothing is in flight
	waitStats(t, p, "the first batch in flight", func(s Stats) bool { return s.InFlight == 1 })
	for i := 1; i <= 3; i++ { // a full batch: up to the ceiling
		submit(i)
	}
	waitStats(t, p, "the ceiling in flight", func(s Stats) bool { return s.InFlight == 4 && s.Queued == 0 })
	before := p.Stats()

	wallet := common.HexToAddress("0xa1")
	gc := NewGC(p, nil)
	done := returned(func() error { return gc.SetLimit(context.Background(), wallet, 5_000_000) })
	waitStats(t, p, "the change held at the ceiling", func(s Stats) bool {
		return s.QueuedChanges == 1 && s.ChangesInFlight == 0 && s.BackpressureActive
	})
	events.wait(t, "backpressure true 4 4")
	if f := p.ReleaseFlow(); f.Governor.State != "holding" {
		t.Errorf("release flow with a change held: %+v", f.Governor)
	}
	if n := l.proposed("GcSetLimit"); n != 0 {
		t.Fatalf("the change was proposed %d times above the ceiling", n)
	}
	notYet(t, "SetLimit", done)

	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := limitOf(t, l, wallet); got != 5_000_000 {
		t.Fatalf("limit %d after SetLimit returned", got)
	}
	waitStats(t, p, "drained", func(s Stats) bool {
		return s.InFlight == 0 && s.Pending == 0 && s.QueuedChanges == 0 && s.ChangesInFlight == 0 && !s.BackpressureActive
	})
	events.wait(t, "backpressure false")
	if st := p.Stats(); st.Changes != before.Changes+1 || st.Reproposed != before.Reproposed || l.proposed("GcSetLimit") != 1 {
		t.Fatalf("one change proposed once: stats %+v, %d entries", st, l.proposed("GcSetLimit"))
	}
}

// TestRefusedChangeIsRetried: a change raft refuses (no leader) is tried
// again with the sender's backoff until raft takes it; the route returns
// once it is applied.
func TestRefusedChangeIsRetried(t *testing.T) {
	p, l := startWith(t, paymentsByID{}, nil, nil, func(c *Config) { c.VerifyPayments = false; quietLoops(c) })
	before := p.Stats()
	l.refuse.Store(true)
	wallet := common.HexToAddress("0xa2")
	done := returned(func() error { return NewGC(p, nil).SetLimit(context.Background(), wallet, 7_000_000) })
	waitFor(t, "the change refused and tried again", func() bool { return l.refused.Load() >= 3 })
	notYet(t, "SetLimit", done)
	l.refuse.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := limitOf(t, l, wallet); got != 7_000_000 {
		t.Fatalf("limit %d after SetLimit returned", got)
	}
	if st := p.Stats(); st.Changes != before.Changes+1 || st.Reproposed < before.Reproposed+3 {
		t.Fatalf("stats %+v, want one change and its retries counted", st)
	}
}

// TestChangeProposedAgainWhenNotApplied: a change raft took but lost is
// proposed again after CommitTimeout, not before, and the route returns
// once it is applied.
func TestChangeProposedAgainWhenNotApplied(t *testing.T) {
	const commitTimeout = 100 * time.Millisecond
	p, l := startWith(t, paymentsByID{}, nil, nil, func(c *Config) {
		c.VerifyPayments, c.CommitTimeout = false, commitTimeout
		quietLoops(c)
	})
	wallet := common.HexToAddress("0xa3")
	l.mu.Lock()
	l.accounts[wallet] = &ledgerpb.GcAccount{Wallet: wallet[:], PendingDebtMicros: 300_000}
	l.mu.Unlock()
	before := p.Stats()
	l.lose.Store(1)
	start := time.Now()
	if err := NewGC(p, nil).ExecutePending(context.Background(), wallet); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < commitTimeout {
		t.Errorf("returned after %s, before CommitTimeout: the lost entry was not proposed again", waited)
	}
	if acc, _ := l.Account(wallet); acc.GetPendingDebtMicros() != 0 || acc.GetExecutedDebtMicros() != 300_000 {
		t.Fatalf("account %v after ExecutePending returned", acc)
	}
	if n := l.proposed("GcExecute"); n != 2 {
		t.Errorf("GcExecute proposed %d times, want the lost one and one more", n)
	}
	if st := p.Stats(); st.Changes != before.Changes+1 || st.Reproposed != before.Reproposed+1 {
		t.Errorf("stats %+v, want one change proposed once more", st)
	}
}

// testKey names the background changes of these tests.
type testKey string

// setLimit is a GcSetLimit entry and the test of its being applied.
func setLimit(l *ledger, wallet common.Address, micros uint64) (*ledgerpb.Entry, func() (bool, error)) {
	return &ledgerpb.Entry{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: wallet[:], LimitMicros: micros}}},
		func() (bool, error) {
			acc, err := l.Account(wallet)
			return acc.GetLimitMicros() == micros, err
		}
}

// TestBackgroundChangeNotHandedOverTwice: while a background change is
// queued or in flight, another of the same key is refused (the loop looks
// again later) and nothing more is proposed; once it is applied, its key is
// free again. Another key goes meanwhile.
func TestBackgroundChangeNotHandedOverTwice(t *testing.T) {
	p, l := startWith(t, paymentsByID{}, nil, nil, func(c *Config) {
		c.VerifyPayments, c.CommitTimeout = false, 200*time.Millisecond
		quietLoops(c)
	})
	ctx := context.Background()
	a, b := common.HexToAddress("0xa4"), common.HexToAddress("0xb4")
	l.lose.Store(1)
	ent, applied := setLimit(l, a, 1_000_000)
	if !p.background(ctx, testKey("a"), ent, applied) {
		t.Fatal("the first change was refused")
	}
	waitFor(t, "the first change proposed (and lost)", func() bool { return l.proposed("GcSetLimit") == 1 })
	for range 3 {
		if p.background(ctx, testKey("a"), ent, applied) {
			t.Fatal("the same change was handed over again while in flight")
		}
	}
	other, otherApplied := setLimit(l, b, 2_000_000)
	if !p.background(ctx, testKey("b"), other, otherApplied) {
		t.Fatal("another key's change was refused")
	}
	waitFor(t, "both applied", func() bool { return limitOf(t, l, a) == 1_000_000 && limitOf(t, l, b) == 2_000_000 })
	waitStats(t, p, "nothing in flight", func(s Stats) bool { return s.ChangesInFlight == 0 && s.QueuedChanges == 0 })
	if n := l.proposed("GcSetLimit"); n != 3 {
		t.Fatalf("GcSetLimit proposed %d times, want 3: the lost one again after CommitTimeout, and the other key's", n)
	}
	if !p.background(ctx, testKey("a"), ent, applied) {
		t.Fatal("a key was not freed once its change was applied")
	}
}

// TestChangesAtLeaderChange: when this node stops leading, a background
// change in flight is given up (not proposed again, its key freed), while a
// route's change is kept and proposed again until applied.
func TestChangesAtLeaderChange(t *testing.T) {
	cfg := DefaultConfig()
	cfg.VerifyPayments, cfg.CommitTimeout = false, 200*time.Millisecond
	quietLoops(&cfg)
	l := &termLedger{ledger: newLedger(), term: 1, leading: true, changed: make(chan struct{})}
	p, err := New(cfg, zap.NewNop(), l, l, nil, fixedEpoch(7))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = p.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	waitStats(t, p, "the term announced", func(s Stats) bool { return l.LeaderTerm() == 1 && s.ChangesInFlight == 0 })

	a, b := common.HexToAddress("0xa5"), common.HexToAddress("0xb5")
	l.lose.Store(2)
	ent, applied := setLimit(l.ledger, a, 1_000_000)
	if !p.background(ctx, testKey("a"), ent, applied) {
		t.Fatal("the background change was refused")
	}
	waitFor(t, "the background change proposed (and lost)", func() bool { return l.proposed("GcSetLimit") == 1 })
	done := returned(func() error { return NewGC(p, nil).SetLimit(context.Background(), b, 2_000_000) })
	waitFor(t, "the route's change proposed (and lost)", func() bool { return l.proposed("GcSetLimit") == 2 })

	l.set(2, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitStats(t, p, "nothing in flight", func(s Stats) bool { return s.ChangesInFlight == 0 && s.QueuedChanges == 0 })
	if got := limitOf(t, l.ledger, b); got != 2_000_000 {
		t.Fatalf("the route's limit %d after SetLimit returned", got)
	}
	if got := limitOf(t, l.ledger, a); got != 0 {
		t.Fatalf("the given-up change was applied after all: limit %d", got)
	}
	if n := l.proposed("GcSetLimit"); n != 3 {
		t.Fatalf("GcSetLimit proposed %d times, want 3: the background one once, the route's twice", n)
	}
	if !p.background(ctx, testKey("a"), ent, applied) {
		t.Fatal("the given-up change's key was not freed")
	}
}
