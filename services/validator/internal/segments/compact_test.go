package segments

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/segarchive"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// compact runs a compaction on epoch: its GcCompact, then its steps of
// 1 MiB until the run is done. It returns the GcCompact's index.
func (l *ledger) compact(epoch uint64) uint64 {
	l.t.Helper()
	index := l.applyOp(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompact{GcCompact: &ledgerpb.GcCompact{Epoch: epoch, AtMs: int64(epoch) * 1000}}})
	for state.RunInProgress(l.machine.LastGcRun()) {
		l.compactStep(1 << 20)
	}
	return index
}

// compactStep applies the next step of the run in progress.
func (l *ledger) compactStep(stepBytes uint64) {
	l.t.Helper()
	run := l.machine.LastGcRun()
	l.applyOp(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompactStep{GcCompactStep: &ledgerpb.GcCompactStep{
		Run: run.GetRun(), Step: run.GetSteps() + 1, StepBytes: stepBytes, AtMs: run.GetAtMs() + 500}}})
}

// applyOp applies one entry of ent at the next index.
func (l *ledger) applyOp(ent *ledgerpb.Entry) uint64 {
	l.t.Helper()
	data, err := proto.Marshal(ent)
	if err != nil {
		l.t.Fatal(err)
	}
	index := l.next
	l.next++
	if err := l.machine.Apply([]state.Entry{{Index: index, Term: 1, Data: data}}); err != nil {
		l.t.Fatal(err)
	}
	return index
}

// TestViewsAcrossCompactions: after each compaction the views read the
// generations kept (the index is read again after cleanup), gc status
// names the last run, the compaction proposals list every run, and the
// TAR files' archives verify as one chain that says where the compactions
// happened.
func TestViewsAcrossCompactions(t *testing.T) {
	l := newLedger(t)
	clk := newClock()
	cat := l.catalog(2000, clk)
	st, err := cat.GcStatus()
	if err != nil || st.LastRun != nil || len(st.Gaps) != 1 {
		t.Fatalf("before any run: %+v %v", st, err)
	}
	round := func(r int) {
		for i := range 4 {
			l.apply(l.write(alice, fmt.Sprintf("page/%d", i), page(fmt.Sprint(r), 600)))
		}
		l.apply(l.delete(alice, "page/3"))
	}
	var runs []uint64
	for r := 1; r <= 3; r++ {
		round(r)
		l.apply(l.write(bob, fmt.Sprintf("keep/%d", r), page("k", 300))) // live from now on, never written again
		// The index reads the generation before the run.
		if _, err := cat.Tars(); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, l.compact(uint64(r)))
		round(r)

		st, err := cat.GcStatus()
		if err != nil {
			t.Fatal(err)
		}
		run := l.machine.LastGcRun()
		want := []uint32{uint32(r - 1), uint32(r)}
		if st.LastRun == nil || st.LastRun.Run != uint64(r) || st.LastRun.CommitIndex != runs[r-1] || st.LastRun.Generation != uint32(r) ||
			st.LastRun.ReclaimedBytes != run.GetBytesReclaimed() || st.LastRun.StateHash != hexBytes(run.GetStateHash()) ||
			len(st.Gaps) != 0 || st.Generations.Current != uint32(r) || !slices.Equal(st.Generations.Present, want) {
			t.Fatalf("gc status after run %d: %+v, last run %+v", r, st, st.LastRun)
		}
		if r >= 2 && st.LastRun.ReclaimedBytes == 0 {
			t.Fatalf("run %d reclaimed nothing", r)
		}
		props, err := cat.CompactionProposals()
		if err != nil || len(props.Proposals) != r || props.Proposals[r-1].CommitIndex != runs[r-1] ||
			props.Proposals[r-1].State != CompactionStateApplied || len(props.Gaps) != 0 {
			t.Fatalf("compaction proposals after run %d: %+v %v", r, props, err)
		}

		// Every live node is held by a TAR file kept: the compaction's, or
		// the one of the segment that wrote it since.
		clk.advance(time.Hour) // the kept scan is not reused
		est, err := cat.GcEstimate()
		if err != nil {
			t.Fatal(err)
		}
		var liveBytes uint64
		for _, sub := range []string{"page/0", "page/1", "page/2"} {
			_, size := l.node(alice, sub)
			liveBytes += size
		}
		for k := 1; k <= r; k++ {
			_, size := l.node(bob, fmt.Sprintf("keep/%d", k))
			liveBytes += size
		}
		// Deletes are priced by the run just done: a MB deleted costs the
		// MB plus the live bytes it rewrote per byte of its garbage.
		last := l.machine.LastGcRun()
		wantCost := 1 + float64(last.GetBytesWritten())/float64(max(last.GetGarbageBytes(), last.GetSizeDelta()))
		if cc := est.CleanupCost; cc.Run != uint64(r) || math.Abs(cc.CostBytesPerDeletedByte-wantCost) > 1e-6 ||
			cc.DebtPerDeletedMBMicros != state.DeleteDebtMicros(state.CleanupCostBytes(1_000_000, last)) || cc.DebtPerDeletedMBMicros <= 100_000 {
			t.Fatalf("after run %d: cleanup cost %+v, want %f bytes per byte deleted", r, cc, wantCost)
		}
		if est.AppliedIndex != l.machine.AppliedIndex() || est.LiveBytes != liveBytes {
			t.Fatalf("after run %d: the estimate at %d holds %d live bytes, the live nodes at %d are %d", r, est.AppliedIndex,
				est.LiveBytes, l.machine.AppliedIndex(), liveBytes)
		}

		// The journal names the compaction's segments by part.
		j, err := cat.OpenJournal(runs[r-1])
		if err != nil {
			t.Fatal(err)
		}
		var journal bytes.Buffer
		err = j.Write(&journal, nil)
		if cerr := j.Close(); err != nil || cerr != nil {
			t.Fatal(err, cerr)
		}
		if first := fmt.Sprintf("index=%d compaction=0 term=1 epoch=%d generation=%d proposals=0 hash=", runs[r-1], r, r); !strings.HasPrefix(journal.String(), first) {
			t.Fatalf("journal from run %d: %q", r, journal.String())
		}

		tars, err := cat.Tars()
		if err != nil {
			t.Fatal(err)
		}
		var chain segarchive.Chain
		var compactions []uint64
		for _, f := range tars.Tars {
			a, err := cat.OpenArchive(f.Name)
			if err != nil {
				t.Fatal(err)
			}
			var out countingWriter
			err = a.Write(&out, nil)
			if cerr := a.Close(); err != nil || cerr != nil {
				t.Fatal(err, cerr)
			}
			s, err := chain.Verify(&out.Buffer)
			if err != nil {
				t.Fatalf("after run %d, archive of %s: %v", r, f.Name, err)
			}
			if s.Segments != f.Segments || s.Bytes != f.Bytes {
				t.Fatalf("archive %+v, TAR file %+v", s, f)
			}
			compactions = append(compactions, s.Compactions...)
		}
		// The oldest generation kept starts at the run before (its first
		// segment anchors the chain); the last run is seen as a compaction.
		if r >= 2 && tars.Tars[0].FirstIndex != runs[r-2] || !slices.Equal(compactions, runs[r-1:]) {
			t.Fatalf("after run %d: first TAR file %+v, compactions at %v, runs at %v", r, tars.Tars[0], compactions, runs)
		}
	}
}

// TestIndexIsIncrementalAcrossCompactions: an index that forgets what each
// cleanup dropped and reads on holds what an index read from scratch holds,
// whether it read after every entry or was behind by whole runs (segments
// it never read were dropped).
func TestIndexIsIncrementalAcrossCompactions(t *testing.T) {
	l := newLedger(t)
	clk := newClock()
	eager, behind := l.catalog(3000, clk), l.catalog(3000, clk)
	index := func(c *Catalog) *segmentIndex {
		t.Helper()
		var got *segmentIndex
		if err := c.readIndex(func(_ uint64, x *segmentIndex) { got = x }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for r := 1; r <= 5; r++ {
		for i := range 6 {
			wallet := alice
			if i%2 == 1 {
				wallet = bob
			}
			l.apply(l.write(wallet, fmt.Sprintf("page/%d", (r+i)%5), page(fmt.Sprint(r, i), 300+100*i)))
			index(eager)
		}
		l.apply(l.delete(alice, fmt.Sprintf("page/%d", r%5)))
		l.applyOp(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompact{GcCompact: &ledgerpb.GcCompact{Epoch: uint64(r), AtMs: int64(r) * 1000}}})
		for state.RunInProgress(l.machine.LastGcRun()) {
			index(eager)
			l.compactStep(1 << 10)
		}
		if r%2 == 0 {
			index(behind) // two runs behind at the next read
		}
		fresh := index(l.catalog(3000, clk))
		for name, c := range map[string]*Catalog{"read after every entry": eager, "read every other run": behind} {
			if r%2 == 1 && c == behind {
				continue
			}
			if got := index(c); !reflect.DeepEqual(got, fresh) {
				t.Fatalf("after run %d, the index %s:\n%+v\nread from scratch:\n%+v", r, name, got, fresh)
			}
		}
		if fresh.breaks != 0 || len(fresh.generations) != 2 {
			t.Fatalf("after run %d: %d chain breaks, generations %v", r, fresh.breaks, fresh.generations)
		}
	}
}
