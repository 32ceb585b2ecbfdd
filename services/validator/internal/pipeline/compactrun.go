package pipeline

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// The leader drives a compaction run through its steps (docs/adr/0033,
// "Incremental compaction"): once a GcCompact started a run, it proposes
// GcCompactStep entries one at a time, each after the one before is
// applied, so that writes are applied between them.
//
// A cycle is one attempt at a step. It fails when
//   - the leader's free memory is below GcMemoryThreshold of its bound
//     (sysinfo.FreeMemory) before the step is proposed: the step is not
//     proposed;
//   - the step is not applied within twice CommitTimeout (raft lost it, or
//     the cluster is too slow or split);
//   - the step's apply held the writes behind it longer than
//     GcForceTimeout on the leader: the following steps take half the
//     bytes.
//
// A failed cycle waits GcRetryWait times the failures in a row, then tries
// again; after GcRetryCount in a row the leader gives the run up with a
// GcCompactAbandon naming the last failure. The count is the leader's own:
// a new leader, or a new run, starts from zero.

// compactDriver is the leader's state of the run it drives.
type compactDriver struct {
	run, term uint64
	stepBytes uint64 // of the next step
	failures  int    // cycles failed in a row
}

// minCompactStepBytes is the least forceTimeout cuts a step to (a step
// configured smaller stays as it is).
const minCompactStepBytes = 64 << 10

// driveCompactions runs on every validator; while it leads and a run is in
// progress, it drives the run.
func (p *Pipeline) driveCompactions(ctx context.Context) {
	var d compactDriver
	for {
		changed, leader := p.records.Changed(), p.raft.LeaderChanged()
		run := p.records.LastGcRun()
		if _, term, leading := p.raft.Leading(); leading && state.RunInProgress(run) {
			if d.run != run.GetRun() || d.term != term {
				d = compactDriver{run: run.GetRun(), term: term, stepBytes: p.cfg.GcStepBytes}
			}
			if !p.compactCycle(ctx, &d, run) {
				return
			}
			continue
		}
		select {
		case <-changed:
		case <-leader:
		case <-ctx.Done():
			return
		}
	}
}

// compactCycle makes one attempt at run's next step, and gives the run up
// after GcRetryCount failures in a row. It reports false once ctx ended.
func (p *Pipeline) compactCycle(ctx context.Context, d *compactDriver, run *ledgerpb.GcRun) bool {
	failure := p.compactStep(ctx, d, run)
	if ctx.Err() != nil {
		return false
	}
	if failure == "" {
		d.failures = 0
		return true
	}
	d.failures++
	p.stats.compactFailures.Add(1)
	p.log.Warn("a compaction cycle failed", zap.Uint64("run", run.GetRun()), zap.Uint64("step", run.GetSteps()+1),
		zap.Int("failures", d.failures), zap.Int("retry_count", p.cfg.GcRetryCount), zap.String("reason", failure))
	if d.failures < p.cfg.GcRetryCount {
		wait := time.NewTimer(time.Duration(d.failures) * p.cfg.GcRetryWait)
		defer wait.Stop()
		select {
		case <-wait.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	reason := fmt.Sprintf("%d compaction cycles failed in a row (retryCount %d), the last: %s", d.failures, p.cfg.GcRetryCount, failure)
	actx, cancel := context.WithTimeout(ctx, 2*p.cfg.CommitTimeout)
	defer cancel()
	err := p.await(actx, routeChange{
		entry: &ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompactAbandon{GcCompactAbandon: &ledgerpb.GcCompactAbandon{
			Run: run.GetRun(), Reason: reason, AtMs: p.cfg.Now().UnixMilli(),
		}}},
		applied: func() (bool, error) { return p.runMoved(run.GetRun(), run.GetSteps()), nil },
	})
	if err == nil {
		p.log.Warn("a compaction run was given up", zap.Uint64("run", run.GetRun()), zap.String("reason", reason))
		d.failures = 0
	}
	return ctx.Err() == nil
}

// compactStep proposes run's next step and waits for it; it says why the
// cycle failed, "" when it did not.
func (p *Pipeline) compactStep(ctx context.Context, d *compactDriver, run *ledgerpb.GcRun) string {
	if m, ok := p.cfg.FreeMemory(); ok && m.FreeFraction() < p.cfg.GcMemoryThreshold {
		return fmt.Sprintf("free memory %.1f%% of the %s bound %s is below memoryThreshold %.1f%%",
			100*m.FreeFraction(), m.Source, mib(m.Limit), 100*p.cfg.GcMemoryThreshold)
	}
	step := run.GetSteps() + 1
	timeout := 2 * p.cfg.CommitTimeout
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.await(sctx, routeChange{
		entry: &ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompactStep{GcCompactStep: &ledgerpb.GcCompactStep{
			Run: run.GetRun(), Step: step, StepBytes: d.stepBytes, AtMs: p.cfg.Now().UnixMilli(),
		}}},
		applied: func() (bool, error) { return p.runMoved(run.GetRun(), step-1), nil },
	}); err != nil {
		if ctx.Err() != nil {
			return ""
		}
		return fmt.Sprintf("step %d was not applied within %s", step, timeout)
	}
	p.stats.compactSteps.Add(1)
	if took := p.records.LastCompactStep(); took.Run == run.GetRun() && took.Step == step && took.Took > p.cfg.GcForceTimeout {
		d.stepBytes = max(d.stepBytes/2, min(minCompactStepBytes, d.stepBytes))
		return fmt.Sprintf("step %d held writes for %s, longer than forceTimeout %s (the next steps take %s)",
			step, took.Took.Round(time.Millisecond), p.cfg.GcForceTimeout, mib(d.stepBytes))
	}
	return ""
}

// runMoved reports whether applied state is past step steps of run: a
// later step, the run ended, or another run.
func (p *Pipeline) runMoved(run, steps uint64) bool {
	last := p.records.LastGcRun()
	return last.GetRun() != run || last.GetSteps() > steps || !state.RunInProgress(last)
}

// mib writes n in MiB: 4.0 MiB.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
