package segments

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// TestGcVotesAndLog: after three runs the votes name each run with the
// state hash its record holds, the log has a line per phase of each run
// with what cleanup deleted, and ?runs= keeps the newest.
func TestGcVotesAndLog(t *testing.T) {
	l := newLedger(t)
	cat := l.catalog(2000, newClock())
	votes, err := cat.GcVotes(10)
	if err != nil || len(votes.Votes) != 0 {
		t.Fatalf("before any run: %+v %v", votes, err)
	}
	if log, err := cat.GcLog(10); err != nil || len(log.Lines) != 0 {
		t.Fatalf("before any run: %+v %v", log, err)
	}
	var index []uint64
	for r := 1; r <= 3; r++ {
		for i := range 3 {
			l.apply(l.write(alice, fmt.Sprintf("page/%d", i), page(fmt.Sprint(r), 600)))
		}
		index = append(index, l.compact(uint64(10+r)))
	}
	votes, err = cat.GcVotes(10)
	if err != nil || len(votes.Votes) != 3 || votes.AppliedIndex != l.next-1 {
		t.Fatalf("votes: %+v %v", votes, err)
	}
	last := l.machine.LastGcRun()
	for i, v := range votes.Votes {
		if v.Run != uint64(i+1) || v.Epoch != uint64(11+i) || v.CommitIndex != index[i] || v.EndIndex <= index[i] || v.State != "done" ||
			len(v.StateHash) != 66 {
			t.Fatalf("vote %d: %+v", i, v)
		}
	}
	if votes.Votes[2].StateHash != hexBytes(last.GetStateHash()) || votes.Votes[0].StateHash == votes.Votes[2].StateHash {
		t.Fatalf("votes' hashes %+v, the last run's %x", votes.Votes, last.GetStateHash())
	}
	if newest, _ := cat.GcVotes(1); len(newest.Votes) != 1 || newest.Votes[0].Run != 3 {
		t.Fatalf("the newest vote: %+v", newest)
	}

	log, err := cat.GcLog(10)
	if err != nil || len(log.Lines) != 12 {
		t.Fatalf("log: %v\n%s", err, strings.Join(log.Lines, "\n"))
	}
	text := strings.Join(log.Lines, "\n")
	for _, want := range []string{
		`^1970-01-01T00:00:11\.000Z GC run 1 \(epoch 11, index \d+\) compaction: generation 1 started$`,
		`^1970-01-01T00:00:11\.500Z GC run 1 \(epoch 11, index \d+\) compaction: \d+ live nodes rewritten into 2 segments \d+\.\d KiB in 1 steps, 0 written meanwhile, done at index \d+$`,
		`GC run 1 \(epoch 11, index \d+\) cleanup: reclaimed 0 segments 0 B, no generation old enough to delete, generations 0-1 kept$`,
		`GC run 2 \(epoch 12, index \d+\) cleanup: reclaimed [1-9]\d* segments \d+\.\d KiB, generation 0 deleted, generations 1-2 kept$`,
		`GC run 3 \(epoch 13, index \d+\) cleanup: reclaimed [1-9]\d* segments \d+\.\d KiB, generation 1 deleted, generations 2-3 kept$`,
		`GC run 3 \(epoch 13, index \d+\) done: state hash ` + hexBytes(last.GetStateHash()) + `$`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(text) {
			t.Errorf("no line %s in\n%s", want, text)
		}
	}
	// The window's first run still names what its cleanup deleted.
	newest, err := cat.GcLog(1)
	if err != nil || len(newest.Lines) != 4 || newest.Lines[1] != log.Lines[9] {
		t.Fatalf("the newest run's log: %v\n%s", err, strings.Join(newest.Lines, "\n"))
	}
}

// TestGcLogOfRunningAndAbandonedRuns: a run in progress has no vote and
// says how far it got; a run given up has a vote, and its log says why and
// that its generation is incomplete.
func TestGcLogOfRunningAndAbandonedRuns(t *testing.T) {
	l := newLedger(t)
	clk := newClock()
	cat := l.catalog(2000, clk)
	// Every live node is in a TAR file kept, whether the newest run
	// copied it yet or not.
	liveHeld := func(when string) {
		t.Helper()
		clk.advance(time.Hour) // the kept scan is not reused
		est, err := cat.GcEstimate()
		var live uint64
		for i := range 3 {
			_, size := l.node(alice, fmt.Sprintf("page/%d", i))
			live += size
		}
		if err != nil || est.LiveBytes != live {
			t.Fatalf("%s: the estimate holds %d live bytes, the live nodes are %d (%v)", when, est.LiveBytes, live, err)
		}
	}
	for i := range 3 {
		l.apply(l.write(alice, fmt.Sprintf("page/%d", i), page("a", 600)))
	}
	l.compact(11)
	start := l.applyOp(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompact{GcCompact: &ledgerpb.GcCompact{Epoch: 12, AtMs: 12_000}}})
	l.compactStep(1)
	liveHeld("run 2 at step 1")
	if votes, err := cat.GcVotes(10); err != nil || len(votes.Votes) != 1 {
		t.Fatalf("votes with run 2 in progress: %+v %v", votes, err)
	}
	log, err := cat.GcLog(1)
	if err != nil || len(log.Lines) != 3 ||
		!regexp.MustCompile(fmt.Sprintf(`GC run 2 \(epoch 12, index %d\) compaction: running, 1 live nodes rewritten into 2 segments .* in 1 steps, 0 written meanwhile so far$`, start)).MatchString(log.Lines[2]) {
		t.Fatalf("log of a running run: %v\n%s", err, strings.Join(log.Lines, "\n"))
	}
	end := l.applyOp(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompactAbandon{GcCompactAbandon: &ledgerpb.GcCompactAbandon{
		Run: 2, Reason: "5 compaction cycles failed in a row", AtMs: 13_000}}})
	liveHeld("run 2 given up")
	votes, err := cat.GcVotes(10)
	if err != nil || len(votes.Votes) != 2 || votes.Votes[1].State != "abandoned" || votes.Votes[1].EndIndex != end {
		t.Fatalf("votes after run 2 was given up: %+v %v", votes, err)
	}
	log, err = cat.GcLog(1)
	if err != nil || len(log.Lines) != 4 || !strings.HasPrefix(log.Lines[3], "1970-01-01T00:00:13.000Z GC run 2") ||
		!strings.Contains(log.Lines[3], "gave up: 5 compaction cycles failed in a row; generation 2 is incomplete") {
		t.Fatalf("log of an abandoned run: %v\n%s", err, strings.Join(log.Lines, "\n"))
	}
	status, err := cat.GcStatus()
	if err != nil || status.LastRun == nil || status.LastRun.State != "abandoned" || status.LastRun.Abandoned == "" || status.LastRun.EndAt == nil {
		t.Fatalf("gc status: %+v %v", status.LastRun, err)
	}
}

func TestIECBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3_250_586: "3.1 MiB", 10 << 30: "10.0 GiB"} {
		if got := iecBytes(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}
