package state

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func (l *testLog) compact(epoch uint64, atMs int64) *Entry {
	return l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompact{GcCompact: &ledgerpb.GcCompact{Epoch: epoch, AtMs: atMs}}})
}

// chainSegment is one stored segment as a verifier reads it.
type chainSegment struct {
	index uint64
	hash  [32]byte
	seg   *ledgerpb.Segment
	raw   []byte
}

func readChain(t *testing.T, m *Machine) []chainSegment {
	t.Helper()
	var out []chainSegment
	if err := m.SegmentsFrom(0, func(index uint64, raw []byte, hash [32]byte) bool {
		seg := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, seg); err != nil {
			t.Fatalf("segment %d: %v", index, err)
		}
		out = append(out, chainSegment{index, hash, seg, append([]byte(nil), raw...)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// verifyChain checks what `ledgerctl segments verify` checks of a chain, and
// what a compaction adds: every segment links to the one before it; the
// first one kept either starts the chain (zero prev hash) or is the first
// segment of a compaction whose run names the head it links to; generations
// never go down and change only at a compaction's first segment. It returns
// the generations present.
func verifyChain(t *testing.T, m *Machine, runs map[uint32]*ledgerpb.GcRun) []uint32 {
	t.Helper()
	chain := readChain(t, m)
	var gens []uint32
	for i, c := range chain {
		if !slices.Contains(gens, c.seg.GetGeneration()) {
			gens = append(gens, c.seg.GetGeneration())
		}
		if i == 0 {
			if c.seg.GetGeneration() == 0 {
				if !bytes.Equal(c.seg.GetPrevHash(), make([]byte, 32)) {
					t.Fatalf("the first segment %d of generation 0 names prev hash %x", c.index, c.seg.GetPrevHash())
				}
				continue
			}
			run := runs[c.seg.GetGeneration()]
			if !c.seg.GetCompaction() || c.seg.GetPart() != 0 || run == nil || !bytes.Equal(c.seg.GetPrevHash(), run.GetOldHead()) {
				t.Fatalf("the oldest segment kept (%d, generation %d) is no compaction's first segment anchored at its run's old head", c.index, c.seg.GetGeneration())
			}
			continue
		}
		prev := chain[i-1]
		if !bytes.Equal(c.seg.GetPrevHash(), prev.hash[:]) {
			t.Fatalf("segment %d part %d does not link to segment %d part %d", c.index, c.seg.GetPart(), prev.index, prev.seg.GetPart())
		}
		switch g, pg := c.seg.GetGeneration(), prev.seg.GetGeneration(); {
		case g == pg:
		case g == pg+1 && c.seg.GetCompaction() && c.seg.GetPart() == 0:
			if run := runs[g]; run == nil || !bytes.Equal(run.GetOldHead(), prev.hash[:]) {
				t.Fatalf("generation %d starts at segment %d, its run does not name the head %x", g, c.index, prev.hash)
			}
		default:
			t.Fatalf("generation %d follows %d at segment %d part %d", g, pg, c.index, c.seg.GetPart())
		}
	}
	if head := m.SegmentHash(); len(chain) > 0 && head != chain[len(chain)-1].hash {
		t.Fatalf("segment hash %x, the chain's head is %x", head, chain[len(chain)-1].hash)
	}
	return gens
}

// liveNodes is every node, marshaled, in key order.
func liveNodes(t *testing.T, m *Machine) [][]byte {
	t.Helper()
	view, err := m.ReadView()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	var out [][]byte
	if err := view.Nodes(func(v []byte) error {
		out = append(out, append([]byte(nil), v...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompactGenerations: a state with writes, overwrites and deletes,
// compacted twice: generations 0 → 1 → 2; generation 0 is gone after the
// second run, the live content is what it was, the chain still verifies,
// a repeated entry changes nothing, and another machine applying the same
// log in other slices holds the same state hash.
func TestCompactGenerations(t *testing.T) {
	big := func(n int) string { return fmt.Sprintf(`{"n":%d,"data":"%s"}`, n, strings.Repeat("x", 400<<10)) }
	l := newLog(t)
	l.confChange()
	l.batch(10, writeItem(1, alice, "docs/a", nested), writeItem(2, alice, "docs/b", big(2)), writeItem(3, bob, "docs/c", big(3)))
	l.batch(20, writeItem(4, alice, "docs/a", `{"title":"again"}`), writeItem(5, bob, "docs/d", big(5)))
	l.batch(30, deleteItem(6, alice, "docs/b"), writeItem(7, bob, "docs/e", big(7)))
	l.finalize(1, 35)
	first := l.compact(1, 40)
	repeat := l.compact(1, 41)
	stale := l.compact(0, 42)
	l.batch(50, writeItem(8, alice, "docs/f", `{"k":"v"}`), deleteItem(9, bob, "docs/c"), writeItem(10, bob, "docs/d", big(10)))
	second := l.compact(2, 60)
	l.batch(70, writeItem(11, alice, "docs/g", `{"after":true}`))

	m := newMachine(t)
	runs := map[uint32]*ledgerpb.GcRun{}
	upTo := func(e *Entry) []*Entry { return l.entries[m.AppliedIndex():e.Index] }

	// Generation 0 only, then the first run.
	mustApply(t, m, upTo(l.entries[first.Index-2])...)
	if g := m.Generation(); g != 0 || m.LastGcRun() != nil || m.GarbageBytes() == 0 {
		t.Fatalf("before any run: generation %d, last run %v, garbage %d", g, m.LastGcRun(), m.GarbageBytes())
	}
	gen0 := readChain(t, m)
	var gen0Bytes uint64
	for _, c := range gen0 {
		gen0Bytes += uint64(len(c.raw))
	}
	garbage := m.GarbageBytes()
	if garbage != gen0Bytes {
		t.Fatalf("garbage %d, generation 0 holds %d segment bytes", garbage, gen0Bytes)
	}
	live := liveNodes(t, m)
	lastEvent := m.LastEventID()
	mustApply(t, m, upTo(first)...)

	run1 := m.LastGcRun()
	runs[1] = run1
	if run1.GetRun() != 1 || run1.GetEpoch() != 1 || run1.GetIndex() != first.Index || run1.GetAtMs() != 40 || run1.GetGeneration() != 1 ||
		run1.GetSegmentsReclaimed() != 0 || run1.GetBytesReclaimed() != 0 || run1.GetKeptFromGeneration() != 0 ||
		run1.GetGarbageBytes() != garbage || run1.GetLiveNodes() != uint64(len(live)) {
		t.Fatalf("run 1 = %v", run1)
	}
	if h, ok := m.StateHashAt(first.Index); !ok || !bytes.Equal(run1.GetStateHash(), h[:]) {
		t.Fatalf("run 1 names state hash %x, the state hash at %d is %x", run1.GetStateHash(), first.Index, h)
	}
	if m.Generation() != 1 || m.GarbageBytes() != 0 {
		t.Fatalf("after run 1: generation %d, garbage %d", m.Generation(), m.GarbageBytes())
	}
	if got := liveNodes(t, m); !slices.EqualFunc(got, live, bytes.Equal) {
		t.Fatal("the first compaction changed the live content")
	}
	// Over a MiB of live content: more than one segment, each bounded.
	var rewritten [][]byte
	for _, c := range readChain(t, m) {
		if c.seg.GetGeneration() != 1 {
			continue
		}
		if !c.seg.GetCompaction() || c.index != first.Index || len(c.seg.GetProposalIds()) != 0 {
			t.Fatalf("generation 1 segment %d part %d: %v", c.index, c.seg.GetPart(), c.seg)
		}
		size := 0
		for _, op := range c.seg.GetOps() {
			raw, err := marshal(op.GetPut())
			if err != nil {
				t.Fatal(err)
			}
			rewritten = append(rewritten, raw)
			size += len(raw)
		}
		if len(c.seg.GetOps()) > 1 && size > CompactSegmentBytes {
			t.Fatalf("segment %d part %d holds %d node bytes, more than %d", c.index, c.seg.GetPart(), size, CompactSegmentBytes)
		}
	}
	if run1.GetSegmentsWritten() < 2 || uint64(len(rewritten)) != run1.GetLiveNodes() || !slices.EqualFunc(rewritten, live, bytes.Equal) {
		t.Fatalf("run 1 wrote %d segments holding %d nodes, want >= 2 segments holding the %d live nodes in key order",
			run1.GetSegmentsWritten(), len(rewritten), len(live))
	}
	if gens := verifyChain(t, m, runs); !slices.Equal(gens, []uint32{0, 1}) {
		t.Fatalf("generations after run 1: %v", gens)
	}
	evs, err := m.EventsSince(lastEvent, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].GetType() != EventTypeConsensus || evs[0].GetAction() != EventActionCompact || evs[0].GetEpoch() != 1 ||
		evs[0].GetTimestamp() != 40 || evs[0].GetCommitIndex() != first.Index {
		t.Fatalf("events of run 1: %v", evs)
	}

	// A repeat of the epoch, and an older one, change nothing.
	before := m.StateHash()
	mustApply(t, m, upTo(stale)...)
	want := nextStateHash(nextStateHash(before, repeat.Index, repeat.Term, [32]byte{}), stale.Index, stale.Term, [32]byte{})
	if m.StateHash() != want || m.LastGcRun().GetRun() != 1 || m.LastEventID() != evs[0].GetId() {
		t.Fatal("a repeated or stale GcCompact changed the state")
	}

	// Generation 1 grows; the second run drops generation 0.
	mustApply(t, m, upTo(l.entries[second.Index-2])...)
	if m.GarbageBytes() == 0 {
		t.Fatal("no garbage counted after the writes of generation 1")
	}
	live = liveNodes(t, m)
	mustApply(t, m, upTo(second)...)
	run2 := m.LastGcRun()
	runs[2] = run2
	if run2.GetRun() != 2 || run2.GetGeneration() != 2 || run2.GetKeptFromGeneration() != 1 ||
		run2.GetSegmentsReclaimed() != uint64(len(gen0)) || run2.GetBytesReclaimed() != gen0Bytes {
		t.Fatalf("run 2 = %v, generation 0 had %d segments of %d bytes", run2, len(gen0), gen0Bytes)
	}
	if got := liveNodes(t, m); !slices.EqualFunc(got, live, bytes.Equal) {
		t.Fatal("the second compaction changed the live content")
	}
	if _, ok, err := m.Segment(gen0[0].index); err != nil || ok {
		t.Fatalf("generation 0's first segment is still there (%v, %v)", ok, err)
	}
	if gens := verifyChain(t, m, runs); !slices.Equal(gens, []uint32{1, 2}) {
		t.Fatalf("generations after run 2: %v", gens)
	}

	// New writes carry the new generation.
	mustApply(t, m, l.entries[m.AppliedIndex():]...)
	chain := readChain(t, m)
	if last := chain[len(chain)-1].seg; last.GetGeneration() != 2 || last.GetCompaction() {
		t.Fatalf("the newest segment: %v", last)
	}
	verifyChain(t, m, runs)

	// A third run drops generation 1. Applied with the others in one
	// batch (below), its count of what it drops reads through the range
	// deletion the second run left in that batch.
	l.batch(75, writeItem(12, bob, "docs/h", `{"h":1}`))
	third := l.compact(3, 80)
	mustApply(t, m, l.entries[m.AppliedIndex():]...)
	runs[3] = m.LastGcRun()
	if run3 := runs[3]; run3.GetRun() != 3 || run3.GetKeptFromGeneration() != 2 || run3.GetSegmentsReclaimed() == 0 || run3.GetIndex() != third.Index {
		t.Fatalf("run 3 = %v", run3)
	}
	if gens := verifyChain(t, m, runs); !slices.Equal(gens, []uint32{2, 3}) {
		t.Fatalf("generations after run 3: %v", gens)
	}

	// Another machine, the whole log in one Apply, and one entry at a time.
	for _, step := range []int{len(l.entries), 1} {
		other := newMachine(t)
		for i := 0; i < len(l.entries); i += step {
			mustApply(t, other, l.entries[i:min(i+step, len(l.entries))]...)
		}
		if other.StateHash() != m.StateHash() || other.SegmentHash() != m.SegmentHash() || !proto.Equal(other.LastGcRun(), m.LastGcRun()) {
			t.Fatalf("applied %d at a time: state hash %x, segment hash %x; want %x, %x", step, other.StateHash(), other.SegmentHash(),
				m.StateHash(), m.SegmentHash())
		}
	}
}

// TestCompactSurvivesReopen: the run, the generation and the garbage
// count are read back after a restart, and a snapshot carries them.
func TestCompactSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	m, err := Open(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := newLog(t)
	l.batch(10, writeItem(1, alice, "docs/a", `{"a":1}`))
	l.compact(3, 20)
	l.batch(30, writeItem(2, alice, "docs/b", `{"b":1}`))
	mustApply(t, m, l.entries...)
	run, gen, garbage, hash := m.LastGcRun(), m.Generation(), m.GarbageBytes(), m.StateHash()
	if run == nil || gen != 1 || garbage == 0 {
		t.Fatalf("run %v, generation %d, garbage %d", run, gen, garbage)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	m, err = Open(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m.LastGcRun(), run) || m.Generation() != gen || m.GarbageBytes() != garbage || m.StateHash() != hash {
		t.Fatalf("reopened: run %v, generation %d, garbage %d; want %v, %d, %d", m.LastGcRun(), m.Generation(), m.GarbageBytes(), run, gen, garbage)
	}
	restored := newMachine(t)
	if err := snapshotOf(t, m, 1).restore(restored); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(restored.LastGcRun(), run) || restored.Generation() != gen || restored.GarbageBytes() != garbage {
		t.Fatalf("restored: run %v, generation %d, garbage %d", restored.LastGcRun(), restored.Generation(), restored.GarbageBytes())
	}
	sameState(t, restored, m)
}
