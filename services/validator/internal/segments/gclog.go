package segments

import (
	"fmt"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// The GC runs as the lifecycle routes show them (docs/adr/0033, "Lifecycle
// routes"): each validator's result of each run (/v1/gc/vote) and the
// runs' text log (/gc.log). Both read the replicated GcRun records only,
// so two validators that applied the same runs answer the same bytes.

// GcVotes is this validator's result of each of the newest limit GC runs,
// oldest first.
func (c *Catalog) GcVotes(limit int) (api.GcVotes, error) {
	out := api.GcVotes{ContractVersion: api.GcVotesVersion, NodeID: c.cfg.NodeID, Votes: []api.GcVote{}}
	var err error
	out.AppliedIndex, err = c.newestRuns(limit, func(_, run *ledgerpb.GcRun) {
		if run.GetEndIndex() == 0 {
			return // in progress: no result yet
		}
		out.Votes = append(out.Votes, api.GcVote{Run: run.GetRun(), Epoch: run.GetEpoch(), CommitIndex: run.GetIndex(),
			EndIndex: run.GetEndIndex(), State: api.GcRunStateOf(run), StateHash: hexBytes(run.GetStateHash())})
	})
	return out, err
}

// GcLog is the text log of the newest GC runs at one applied index.
type GcLog struct {
	AppliedIndex uint64
	// Lines are up to four per run, oldest run first: the compaction
	// started, the cleanup, the rewrite (so far, while it runs), and done
	// or given up once it ended.
	Lines []string
}

// GcLog renders the newest limit GC runs, a line per phase, as operators
// of TarMK read its gc.log. The start and cleanup lines are dated by the
// run's at_ms, the others by the entry that ended it (the proposing
// leader's clocks, replicated).
func (c *Catalog) GcLog(limit int) (GcLog, error) {
	var out GcLog
	var err error
	out.AppliedIndex, err = c.newestRuns(limit, func(prev, run *ledgerpb.GcRun) {
		head := func(atMs int64) string {
			return fmt.Sprintf("%s GC run %d (epoch %d, index %d)",
				time.UnixMilli(atMs).UTC().Format("2006-01-02T15:04:05.000Z"), run.GetRun(), run.GetEpoch(), run.GetIndex())
		}
		start := head(run.GetAtMs())
		out.Lines = append(out.Lines,
			fmt.Sprintf("%s compaction: generation %d started", start, run.GetGeneration()),
			fmt.Sprintf("%s cleanup: reclaimed %d segments %s, %s, %s kept",
				start, run.GetSegmentsReclaimed(), iecBytes(run.GetBytesReclaimed()), deletedGenerations(prev, run),
				generationRange(run.GetKeptFromGeneration(), run.GetGeneration())))
		rewrite := fmt.Sprintf("%d live nodes rewritten into %d segments %s in %d steps, %d written meanwhile",
			run.GetLiveNodes(), run.GetSegmentsWritten(), iecBytes(run.GetBytesWritten()), run.GetSteps(), run.GetNodesCurrent())
		if run.GetEndIndex() == 0 {
			out.Lines = append(out.Lines, fmt.Sprintf("%s compaction: running, %s so far", start, rewrite))
			return
		}
		end := head(run.GetEndAtMs())
		if run.GetDone() {
			out.Lines = append(out.Lines,
				fmt.Sprintf("%s compaction: %s, done at index %d", end, rewrite, run.GetEndIndex()),
				fmt.Sprintf("%s done: state hash %s", end, hexBytes(run.GetStateHash())))
			return
		}
		out.Lines = append(out.Lines,
			fmt.Sprintf("%s compaction: %s, stopped at index %d", end, rewrite, run.GetEndIndex()),
			fmt.Sprintf("%s gave up: %s; generation %d is incomplete, so the next cleanup keeps the complete one before it: state hash %s",
				end, run.GetAbandoned(), run.GetGeneration(), hexBytes(run.GetStateHash())))
	})
	return out, err
}

// newestRuns calls fn with each of the newest limit runs, oldest first,
// and the run before it (nil before the first run), from one read view;
// it returns the view's applied index.
func (c *Catalog) newestRuns(limit int, fn func(prev, run *ledgerpb.GcRun)) (uint64, error) {
	view, err := c.machine.ReadView()
	if err != nil {
		return 0, err
	}
	defer view.Close()
	last := view.LastGcRun().GetRun()
	if last == 0 || limit <= 0 {
		return view.AppliedIndex(), nil
	}
	first := uint64(1)
	if last > uint64(limit) {
		first = last - uint64(limit) // one before the window: the first shown needs its predecessor
	}
	var prev *ledgerpb.GcRun
	err = view.GcRunsFrom(first, func(run *ledgerpb.GcRun) error {
		if run.GetRun()+uint64(limit) > last {
			fn(prev, run)
		}
		prev = run
		return nil
	})
	return view.AppliedIndex(), err
}

// deletedGenerations says what a run's cleanup deleted: the generations
// from where the run before it kept on up to below where this one keeps.
func deletedGenerations(prev, run *ledgerpb.GcRun) string {
	if run.GetSegmentsReclaimed() == 0 || run.GetKeptFromGeneration() == 0 {
		return "no generation old enough to delete"
	}
	lo := prev.GetKeptFromGeneration()
	return generationRange(lo, run.GetKeptFromGeneration()-1) + " deleted"
}

// generationRange names generations lo to hi.
func generationRange(lo, hi uint32) string {
	if lo >= hi {
		return fmt.Sprintf("generation %d", hi)
	}
	return fmt.Sprintf("generations %d-%d", lo, hi)
}

// iecBytes writes n in binary units with one decimal: 3.1 MiB.
func iecBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
