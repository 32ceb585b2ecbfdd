package pipeline

import (
	"context"
	"encoding/hex"
	"sync"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// The GC proposal manager (docs/adr/0033, "Lifecycle routes"): what an
// operator may ask of the leader's COMPACT trigger (sender.go, finalize).
// A forced run proposes the compaction of the finalized epoch now, whatever
// the garbage; arming makes the trigger propose one at the next epoch
// finalization, whatever the garbage. Both still give at most one run per
// epoch: they share the trigger's background key (compactKey), and apply
// ignores an epoch at or below the last run's.

// Compactions is the GC proposal manager of a pipeline. It implements the
// API's Compactions.
type Compactions struct{ p *Pipeline }

// NewCompactions returns the GC proposal manager of p.
func NewCompactions(p *Pipeline) *Compactions { return &Compactions{p: p} }

// compactTrigger is the leader's one-shot arming of the COMPACT trigger:
// the term it was armed in and the finalized epoch it was armed at. It
// fires at a finalized epoch past that one, in that term only: a new
// leader does not inherit it (the operator arms the leader it reached).
type compactTrigger struct {
	mu    sync.Mutex
	armed bool
	term  uint64
	after uint64
}

// arm arms the trigger for finalized epochs past after in term.
func (t *compactTrigger) arm(term, after uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed, t.term, t.after = true, term, after
}

// fires reports whether the armed trigger calls for a compaction of the
// finalized epoch, leading term, with lastRun the epoch of the newest run
// applied. A run past the armed epoch (whoever proposed it) spends the
// shot; a change of term loses it.
func (t *compactTrigger) fires(term, finalized, lastRun uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.armed && (term != t.term || lastRun > t.after) {
		t.armed = false
	}
	return t.armed && finalized > t.after
}

// Propose has the leader propose the compaction of the finalized epoch now,
// whatever the garbage, and waits up to wait for the run to end. It
// answers the proposal, applied or not, and the run's state; a run of that
// epoch already applied (run_exists), or any run in progress
// (run_in_progress), is a gc_refused naming it.
func (c *Compactions) Propose(ctx context.Context, wait time.Duration) (api.GcProposal, error) {
	p := c.p
	node, _, ok := p.raft.Leading()
	if !ok {
		return api.GcProposal{}, apierror.New(apierror.LeaderUnknown, "this validator does not lead (any more); retry shortly")
	}
	if err := c.enabled(); err != nil {
		return api.GcProposal{}, err
	}
	epoch := p.epochs.Finalized()
	if epoch == 0 {
		e := apierror.New(apierror.GcRefused, "no epoch is final yet: a compaction names the finalized epoch it runs on").
			WithDetail("reason", "no_finalized_epoch")
		e.Retryable = true
		return api.GcProposal{}, e
	}
	last := p.records.LastGcRun()
	if state.RunInProgress(last) {
		e := apierror.New(apierror.GcRefused,
			"GC run %d (epoch %d) is in progress, at step %d: one run at a time; /gc.log follows it",
			last.GetRun(), last.GetEpoch(), last.GetSteps()).
			WithDetail("reason", "run_in_progress").WithDetail("run", last.GetRun()).WithDetail("epoch", last.GetEpoch())
		e.Retryable = true
		return api.GcProposal{}, e
	}
	if last.GetEpoch() >= epoch {
		return api.GcProposal{}, apierror.New(apierror.GcRefused,
			"GC run %d already compacted epoch %d (at most one run per epoch); the next can run once epoch %d is final",
			last.GetRun(), last.GetEpoch(), last.GetEpoch()+1).
			WithDetail("reason", "run_exists").WithDetail("run", last.GetRun()).WithDetail("epoch", last.GetEpoch())
	}
	// A false hand-over with ctx alive is the trigger's own proposal of
	// this epoch on its way: the same compaction.
	if !p.proposeCompaction(ctx, epoch) && ctx.Err() != nil {
		return api.GcProposal{}, ctx.Err()
	}
	out := api.GcProposal{ContractVersion: api.GcProposalVersion, NodeID: node, Epoch: epoch, State: api.GcProposalProposed}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := p.records.Changed() // before the look: an apply in between wakes it
		if run := p.records.LastGcRun(); run.GetEpoch() >= epoch {
			out.State, out.Epoch, out.Run, out.CommitIndex = api.GcProposalApplied, run.GetEpoch(), run.GetRun(), run.GetIndex()
			out.RunState, out.Steps = api.GcRunStateOf(run), run.GetSteps()
			if !state.RunInProgress(run) {
				out.StateHash = "0x" + hex.EncodeToString(run.GetStateHash())
				return out, nil
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			return out, nil
		case <-ctx.Done():
			return out, nil // proposed: the sender goes on with it
		}
	}
}

// Arm arms the leader's trigger: at the next epoch finalization it
// proposes a compaction whatever the garbage, once.
func (c *Compactions) Arm() (api.GcTrigger, error) {
	p := c.p
	node, term, ok := p.raft.Leading()
	if !ok {
		return api.GcTrigger{}, apierror.New(apierror.LeaderUnknown, "this validator does not lead (any more); retry shortly")
	}
	if err := c.enabled(); err != nil {
		return api.GcTrigger{}, err
	}
	after := p.epochs.Finalized()
	p.trigger.arm(term, after)
	return api.GcTrigger{ContractVersion: api.GcTriggerVersion, NodeID: node, Term: term, Armed: true, AfterEpoch: after}, nil
}

// enabled refuses the routes while COMPACT is off (GcSizeDelta 0,
// SVC_VALIDATOR_GC_OFF): the setting means no compaction at all.
func (c *Compactions) enabled() error {
	if c.p.cfg.GcSizeDelta == 0 {
		return apierror.New(apierror.GcRefused, "GC (COMPACT) is off on the leader (SVC_VALIDATOR_GC_OFF)").WithDetail("reason", "gc_off")
	}
	return nil
}

// proposeCompaction hands the sender the compaction of a finalized epoch
// as a background change, proposed until applied state holds a run of that
// epoch (or a newer one). It reports false when that change is already
// on its way, or ctx ended.
func (p *Pipeline) proposeCompaction(ctx context.Context, epoch uint64) bool {
	return p.background(ctx, compactKey(epoch), &ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompact{GcCompact: &ledgerpb.GcCompact{
		Epoch: epoch, AtMs: p.cfg.Now().UnixMilli(), SizeDelta: p.cfg.GcSizeDelta,
	}}}, func() (bool, error) { return p.records.LastGcRun().GetEpoch() >= epoch, nil })
}
