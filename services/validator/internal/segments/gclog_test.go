package segments

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
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
	if err != nil || len(votes.Votes) != 3 || votes.AppliedIndex != index[2] {
		t.Fatalf("votes: %+v %v", votes, err)
	}
	last := l.machine.LastGcRun()
	for i, v := range votes.Votes {
		if v.Run != uint64(i+1) || v.Epoch != uint64(11+i) || v.CommitIndex != index[i] || len(v.StateHash) != 66 {
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
	if err != nil || len(log.Lines) != 9 {
		t.Fatalf("log: %v\n%s", err, strings.Join(log.Lines, "\n"))
	}
	text := strings.Join(log.Lines, "\n")
	for _, want := range []string{
		`^1970-01-01T00:00:11\.000Z GC run 1 \(epoch 11, index \d+\) compaction: generation 1 started, \d+ live nodes rewritten into 1 segments \d+\.\d KiB$`,
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
	if err != nil || len(newest.Lines) != 3 || newest.Lines[1] != log.Lines[7] {
		t.Fatalf("the newest run's log: %v\n%s", err, strings.Join(newest.Lines, "\n"))
	}
}

func TestIECBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3_250_586: "3.1 MiB", 10 << 30: "10.0 GiB"} {
		if got := iecBytes(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}
