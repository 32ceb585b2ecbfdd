package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/sysinfo"
)

// startRuns starts a leader whose runs take steps steps, each "applied" in
// took, with config changed by opts, and forces a run at epoch 5.
func startRuns(t *testing.T, steps int, took time.Duration, opts func(*Config)) (*Pipeline, *ledger, *movableEpoch) {
	t.Helper()
	p, l, epochs := startCompactions(t, 1000, func(c *Config) {
		c.GcRetryWait = time.Millisecond
		opts(c)
	})
	l.mu.Lock()
	l.runSteps, l.stepTook = steps, took
	l.mu.Unlock()
	if _, err := NewCompactions(p).Propose(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	return p, l, epochs
}

// TestCompactionRunsInSteps: the leader proposes a run's steps one after
// the other, each of GcStepBytes, until the run is done; a forced run
// meanwhile is refused as run_in_progress.
func TestCompactionRunsInSteps(t *testing.T) {
	p, l, _ := startRuns(t, 5, time.Millisecond, func(c *Config) { c.GcStepBytes = 12345 })
	waitStats(t, p, "the run's end", func(Stats) bool { return l.LastGcRun().GetDone() })
	run := l.LastGcRun()
	l.mu.Lock()
	sizes := slices.Clone(l.stepBytes)
	l.mu.Unlock()
	if run.GetSteps() != 5 || len(sizes) != 5 || slices.ContainsFunc(sizes, func(n uint64) bool { return n != 12345 }) {
		t.Fatalf("run %v after steps of %v", run, sizes)
	}
	if s := p.Stats(); s.CompactSteps != 5 || s.CompactFailures != 0 {
		t.Fatalf("stats: %d steps, %d failures", s.CompactSteps, s.CompactFailures)
	}
	if l.proposed("GcCompactAbandon") != 0 {
		t.Fatal("a run that went well was given up")
	}
}

// TestCompactionRefusedWhileRunning: one run at a time: a forced run at
// the next epoch is refused while one is in progress, and the trigger
// proposes none.
func TestCompactionRefusedWhileRunning(t *testing.T) {
	p, l, epochs := startRuns(t, 1, 0, func(c *Config) {
		c.FreeMemory = func() (sysinfo.Memory, bool) {
			return sysinfo.Memory{Limit: 100, Free: 1, Source: sysinfo.MemoryHost}, true
		}
		c.GcRetryWait = time.Hour // the first cycle fails and waits: the run stays in progress
	})
	waitStats(t, p, "a failed cycle", func(s Stats) bool { return s.CompactFailures == 1 })
	l.addGarbage(1 << 30)
	epochs.finalized.Store(6)
	e := gcRefusal(t, func() error { _, err := NewCompactions(p).Propose(context.Background(), 0); return err }(), "run_in_progress")
	if e.Details["run"] != uint64(1) || !e.Retryable {
		t.Fatalf("refusal names %v", e.Details)
	}
	waitStats(t, p, "finality of epoch 6", func(Stats) bool { return l.FinalizedEpoch() == 6 })
	if n := l.proposed("GcCompact"); n != 1 {
		t.Fatalf("GcCompact proposed %d times while a run was in progress", n)
	}
}

// TestCompactionGivesUpOnLowMemory: below memoryThreshold no step is
// proposed; after GcRetryCount cycles in a row the run is given up, and
// the reason names the threshold.
func TestCompactionGivesUpOnLowMemory(t *testing.T) {
	p, l, _ := startRuns(t, 3, 0, func(c *Config) {
		c.GcRetryCount = 3
		c.FreeMemory = func() (sysinfo.Memory, bool) {
			return sysinfo.Memory{Limit: 1 << 30, Free: 1 << 20, Source: sysinfo.MemoryCgroup}, true
		}
	})
	waitStats(t, p, "the run given up", func(Stats) bool { return l.LastGcRun().GetAbandoned() != "" })
	run := l.LastGcRun()
	if api.GcRunStateOf(run) != api.GcRunAbandoned || run.GetSteps() != 0 || l.proposed("GcCompactStep") != 0 ||
		!strings.Contains(run.GetAbandoned(), "memoryThreshold 5.0%") || !strings.Contains(run.GetAbandoned(), "3 compaction cycles failed") {
		t.Fatalf("run %v", run)
	}
	if s := p.Stats(); s.CompactFailures != 3 {
		t.Fatalf("%d failed cycles, want 3", s.CompactFailures)
	}
}

// TestCompactionHeldToForceTimeout: a step whose apply held writes longer
// than GcForceTimeout fails its cycle and halves the next steps; after
// GcRetryCount in a row the run is given up.
func TestCompactionHeldToForceTimeout(t *testing.T) {
	p, l, _ := startRuns(t, 100, 50*time.Millisecond, func(c *Config) {
		c.GcRetryCount = 3
		c.GcForceTimeout = 10 * time.Millisecond
		c.GcStepBytes = 1 << 20
	})
	waitStats(t, p, "the run given up", func(Stats) bool { return l.LastGcRun().GetAbandoned() != "" })
	run := l.LastGcRun()
	l.mu.Lock()
	sizes := slices.Clone(l.stepBytes)
	l.mu.Unlock()
	if !slices.Equal(sizes, []uint64{1 << 20, 1 << 19, 1 << 18}) || run.GetSteps() != 3 ||
		!strings.Contains(run.GetAbandoned(), "longer than forceTimeout 10ms") {
		t.Fatalf("run %v after steps of %v", run, sizes)
	}
}
