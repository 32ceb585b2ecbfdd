package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// startCompactions starts a leader below the GC threshold (garbage 0) at
// finalized epoch 5, with config changed by opts, and waits until epoch 5
// is final in applied state.
func startCompactions(t *testing.T, gcSizeDelta uint64, opts ...func(*Config)) (*Pipeline, *ledger, *movableEpoch) {
	t.Helper()
	epochs := &movableEpoch{}
	epochs.current.Store(7)
	epochs.finalized.Store(5)
	p, l := startWith(t, paymentsByID{}, nil, epochs, func(c *Config) {
		c.VerifyPayments = false
		c.FinalizeInterval = 5 * time.Millisecond
		c.GcSizeDelta = gcSizeDelta
		for _, o := range opts {
			o(c)
		}
	})
	waitStats(t, p, "finality of epoch 5", func(Stats) bool { return l.FinalizedEpoch() == 5 })
	return p, l, epochs
}

// gcRefusal asserts that err is gc_refused for reason.
// gcRefusal checks that err is the gc_refused of reason and returns it
// (a value: the caller reads it, never returns it).
func gcRefusal(t *testing.T, err error, reason string) apierror.Error {
	t.Helper()
	e := apierror.As(err)
	if e == nil || e.Code != apierror.GcRefused || e.Details["reason"] != reason {
		t.Fatalf("got %v, want gc_refused (%s)", err, reason)
	}
	return *e
}

// TestProposeCompactsOncePerEpoch: an operator's forced run is proposed
// below the threshold and applied on the finalized epoch; a second one in
// the same epoch is refused naming the run, and the next finalized epoch
// may have its own.
func TestProposeCompactsOncePerEpoch(t *testing.T) {
	p, l, epochs := startCompactions(t, 1000)
	c := NewCompactions(p)
	got, err := c.Propose(context.Background(), 10*time.Second)
	if err != nil || got.State != api.GcProposalApplied || got.Run != 1 || got.Epoch != 5 || got.CommitIndex == 0 || got.NodeID != 1 {
		t.Fatalf("forced run: %+v %v", got, err)
	}
	e := gcRefusal(t, func() error { _, err := c.Propose(context.Background(), time.Second); return err }(), "run_exists")
	if e.Details["run"] != uint64(1) || e.Details["epoch"] != uint64(5) || e.Retryable {
		t.Fatalf("refusal names %v", e.Details)
	}
	if n := l.proposed("GcCompact"); n != 1 {
		t.Fatalf("GcCompact proposed %d times, want once for epoch 5", n)
	}
	// Without a wait the answer is the proposal, applied or not yet.
	epochs.finalized.Store(6)
	got, err = c.Propose(context.Background(), 0)
	if err != nil || got.Epoch != 6 || (got.State != api.GcProposalProposed && got.State != api.GcProposalApplied) {
		t.Fatalf("forced run of epoch 6: %+v %v", got, err)
	}
	waitStats(t, p, "the run of epoch 6", func(Stats) bool { return l.LastGcRun().GetEpoch() == 6 && l.LastGcRun().GetRun() == 2 })
}

// TestTriggerArmsOneProposalBelowThreshold: armed, the leader proposes a
// compaction at the next epoch finalization below the threshold, not on
// the epoch final when it was armed, and once only.
func TestTriggerArmsOneProposalBelowThreshold(t *testing.T) {
	p, l, epochs := startCompactions(t, 1000)
	armed, err := NewCompactions(p).Arm()
	if err != nil || !armed.Armed || armed.AfterEpoch != 5 || armed.Term != 1 || armed.NodeID != 1 {
		t.Fatalf("arm: %+v %v", armed, err)
	}
	epochs.finalized.Store(6)
	waitStats(t, p, "the armed compaction", func(Stats) bool { return l.LastGcRun() != nil })
	if run := l.LastGcRun(); run.GetEpoch() != 6 || run.GetRun() != 1 {
		t.Fatalf("run %v, want the first on epoch 6", run)
	}
	// Two more finalizations below the threshold: the shot is spent.
	for _, e := range []uint64{7, 8} {
		epochs.current.Store(e + 2)
		epochs.finalized.Store(e)
		waitStats(t, p, "finality", func(Stats) bool { return l.FinalizedEpoch() == e })
	}
	if n := l.proposed("GcCompact"); n != 1 || l.LastGcRun().GetRun() != 1 {
		t.Fatalf("GcCompact proposed %d times, want once for one arming", n)
	}
}

// TestCompactTriggerFires: the arming's rules alone: past its epoch, in
// its term, until a run past its epoch.
func TestCompactTriggerFires(t *testing.T) {
	var tr compactTrigger
	if tr.fires(1, 9, 0) {
		t.Fatal("fires unarmed")
	}
	tr.arm(3, 5)
	if tr.fires(3, 5, 0) {
		t.Fatal("fires on the epoch it was armed at")
	}
	if !tr.fires(3, 6, 5) {
		t.Fatal("does not fire past its epoch")
	}
	if !tr.fires(3, 6, 5) {
		t.Fatal("asking whether it fires used the arming up")
	}
	if tr.fires(3, 7, 6) {
		t.Fatal("fires after a run past its epoch")
	}
	tr.arm(3, 5)
	if tr.fires(4, 6, 0) || tr.fires(3, 6, 0) {
		t.Fatal("a new term inherits the arming")
	}
}

// TestCompactionRoutesOffOrEarly: GC off refuses both routes; before any
// epoch is final, a forced run is refused, retryable.
func TestCompactionRoutesOffOrEarly(t *testing.T) {
	p, _, _ := startCompactions(t, 0)
	c := NewCompactions(p)
	_, err := c.Propose(context.Background(), 0)
	gcRefusal(t, err, "gc_off")
	_, err = c.Arm()
	gcRefusal(t, err, "gc_off")

	early, _ := startWith(t, paymentsByID{}, nil, &movableEpoch{}, func(c *Config) { c.VerifyPayments = false })
	_, err = NewCompactions(early).Propose(context.Background(), 0)
	if e := gcRefusal(t, err, "no_finalized_epoch"); !e.Retryable {
		t.Fatal("no finalized epoch yet is not retryable")
	}
}
