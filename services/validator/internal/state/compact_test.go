package state

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

func (l *testLog) compactStart(epoch uint64, atMs int64) *Entry {
	return l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompact{GcCompact: &ledgerpb.GcCompact{Epoch: epoch, AtMs: atMs}}})
}

func (l *testLog) compactStep(run, step, stepBytes uint64, atMs int64) *Entry {
	return l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompactStep{GcCompactStep: &ledgerpb.GcCompactStep{
		Run: run, Step: step, StepBytes: stepBytes, AtMs: atMs}}})
}

func (l *testLog) compactAbandon(run uint64, reason string, atMs int64) *Entry {
	return l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcCompactAbandon{GcCompactAbandon: &ledgerpb.GcCompactAbandon{
		Run: run, Reason: reason, AtMs: atMs}}})
}

// testRunSteps is how many steps compact appends: more than the tests'
// live content needs at testStepBytes (the steps past the run's end change
// nothing).
const (
	testRunSteps  = 16
	testStepBytes = 1 << 20
)

// compact appends run number run: its start on epoch and its steps, and
// returns the start.
func (l *testLog) compact(run, epoch uint64, atMs int64) *Entry {
	start := l.compactStart(epoch, atMs)
	for step := range uint64(testRunSteps) {
		l.compactStep(run, step+1, testStepBytes, atMs+1)
	}
	return start
}

// replayGeneration replays the segments of generation gen alone, in chain
// order, as a holder of its TAR files only would: the content tree it
// gives, each node marshaled, in key order.
func replayGeneration(t *testing.T, m *Machine, gen uint32) [][]byte {
	t.Helper()
	tree := map[string][]byte{}
	for _, c := range readChain(t, m) {
		if c.seg.GetGeneration() != gen {
			continue
		}
		for _, op := range c.seg.GetOps() {
			if put := op.GetPut(); put != nil {
				raw, err := marshal(put)
				if err != nil {
					t.Fatal(err)
				}
				tree[put.GetPath()] = raw
				continue
			}
			// A delete removes the path and what is below it, as apply's
			// does (which lists every removed node anyway).
			delete(tree, op.GetDeletePath())
		}
	}
	paths := slices.SortedFunc(maps.Keys(tree), func(a, b string) int {
		return bytes.Compare(storage.NodeKey(a), storage.NodeKey(b))
	})
	out := make([][]byte, len(paths))
	for i, p := range paths {
		out[i] = tree[p]
	}
	return out
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
// compacted in steps while writes go on, three times: generations 0 → 1 →
// 2 → 3; each run's generation replays alone to the live content, the
// generation before the kept two is gone after each cleanup, the chain
// still verifies, repeated entries change nothing, and another machine
// applying the same log in other slices holds the same state hash.
func TestCompactGenerations(t *testing.T) {
	big := func(n int) string { return fmt.Sprintf(`{"n":%d,"data":"%s"}`, n, strings.Repeat("x", 400<<10)) }
	l := newLog(t)
	l.confChange()
	l.batch(10, writeItem(1, alice, "docs/a", nested), writeItem(2, alice, "docs/b", big(2)), writeItem(3, bob, "docs/c", big(3)))
	l.batch(20, writeItem(4, alice, "docs/a", `{"title":"again"}`), writeItem(5, bob, "docs/d", big(5)))
	l.batch(30, deleteItem(6, alice, "docs/b"), writeItem(7, bob, "docs/e", big(7)))
	l.finalize(1, 35)
	first := l.compactStart(1, 40)
	repeat := l.compactStart(1, 41) // while run 1 is in progress
	stale := l.compactStart(0, 42)
	step1 := l.compactStep(1, 1, 500<<10, 43) // docs/a and its children, docs/c
	// Writes between the steps: an overwrite and a delete of nodes the
	// run has not reached, a node it will never see, and one it copied.
	during := l.batch(44, writeItem(13, bob, "docs/e", big(13)), deleteItem(14, bob, "docs/d"), writeItem(15, alice, "docs/z", `{"z":1}`),
		writeItem(16, alice, "docs/a", `{"title":"third"}`))
	repeatStep := l.compactStep(1, 1, 500<<10, 45)
	var last *Entry
	for step := uint64(2); step <= 4; step++ {
		last = l.compactStep(1, step, 500<<10, 46)
	}
	l.batch(50, writeItem(8, alice, "docs/f", `{"k":"v"}`), deleteItem(9, bob, "docs/c"), writeItem(10, bob, "docs/d", big(10)))
	second := l.compact(2, 2, 60)

	m := newMachine(t)
	runs := map[uint32]*ledgerpb.GcRun{}
	upTo := func(e *Entry) []*Entry { return l.entries[m.AppliedIndex():e.Index] }

	// Generation 0 only, then the first run starts.
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
	lastEvent := m.LastEventID()
	mustApply(t, m, upTo(first)...)
	run1 := m.LastGcRun()
	runs[1] = run1
	if run1.GetRun() != 1 || run1.GetEpoch() != 1 || run1.GetIndex() != first.Index || run1.GetAtMs() != 40 || run1.GetGeneration() != 1 ||
		run1.GetSegmentsReclaimed() != 0 || run1.GetBytesReclaimed() != 0 || run1.GetKeptFromGeneration() != 0 ||
		run1.GetGarbageBytes() != garbage || run1.GetLiveNodes() != 0 || run1.GetSteps() != 0 || !RunInProgress(run1) ||
		len(run1.GetStateHash()) != 0 {
		t.Fatalf("run 1 started = %v", run1)
	}
	if m.Generation() != 1 || m.GarbageBytes() != 0 {
		t.Fatalf("after run 1 started: generation %d, garbage %d", m.Generation(), m.GarbageBytes())
	}

	// A start while the run is in progress, and an older epoch, change
	// nothing.
	before := m.StateHash()
	mustApply(t, m, upTo(stale)...)
	want := nextStateHash(nextStateHash(before, repeat.Index, repeat.Term, [32]byte{}), stale.Index, stale.Term, [32]byte{})
	if m.StateHash() != want || !proto.Equal(m.LastGcRun(), run1) {
		t.Fatal("a GcCompact during a run, or a stale one, changed the state")
	}

	// The first step rewrites a bounded part, in key order.
	mustApply(t, m, upTo(step1)...)
	if run := m.LastGcRun(); run.GetSteps() != 1 || len(run.GetResumeKey()) == 0 || run.GetLiveNodes() == 0 || !RunInProgress(run) {
		t.Fatalf("after step 1: %v", run)
	}
	// A repeat of step 1 after the writes changes nothing.
	mustApply(t, m, upTo(during)...)
	before = m.StateHash()
	steps1 := m.LastGcRun()
	mustApply(t, m, upTo(repeatStep)...)
	if m.StateHash() != nextStateHash(before, repeatStep.Index, repeatStep.Term, [32]byte{}) || !proto.Equal(m.LastGcRun(), steps1) {
		t.Fatal("a repeated step changed the state")
	}
	mustApply(t, m, upTo(last)...)
	run1 = m.LastGcRun()
	runs[1] = run1
	live := liveNodes(t, m)
	if !run1.GetDone() || run1.GetEndIndex() == 0 || run1.GetEndIndex() > last.Index || len(run1.GetResumeKey()) != 0 ||
		run1.GetNodesCurrent() == 0 || run1.GetLiveNodes()+run1.GetNodesCurrent() < uint64(len(live)) {
		t.Fatalf("run 1 at its end = %v (%d live nodes)", run1, len(live))
	}
	if h, ok := m.StateHashAt(run1.GetEndIndex()); !ok || !bytes.Equal(run1.GetStateHash(), h[:]) {
		t.Fatalf("run 1 names state hash %x, the state hash at %d is %x", run1.GetStateHash(), run1.GetEndIndex(), h)
	}
	// Generation 1 alone gives the live content.
	if got := replayGeneration(t, m, 1); !slices.EqualFunc(got, live, bytes.Equal) {
		t.Fatalf("generation 1 replays to %d nodes, the live content is %d", len(got), len(live))
	}
	// The marker and the steps' segments, each bounded, none holding
	// proposals.
	compactions := 0
	for _, c := range readChain(t, m) {
		if c.seg.GetGeneration() != 1 || !c.seg.GetCompaction() {
			continue
		}
		compactions++
		if len(c.seg.GetProposalIds()) != 0 {
			t.Fatalf("compaction segment %d part %d names proposals", c.index, c.seg.GetPart())
		}
		size := 0
		for _, op := range c.seg.GetOps() {
			raw, err := marshal(op.GetPut())
			if err != nil {
				t.Fatal(err)
			}
			size += len(raw)
		}
		if len(c.seg.GetOps()) > 1 && size > CompactSegmentBytes {
			t.Fatalf("segment %d part %d holds %d node bytes, more than %d", c.index, c.seg.GetPart(), size, CompactSegmentBytes)
		}
	}
	if uint64(compactions) != run1.GetSegmentsWritten() || compactions < 2 {
		t.Fatalf("generation 1 has %d compaction segments, run 1 counts %d", compactions, run1.GetSegmentsWritten())
	}
	if gens := verifyChain(t, m, runs); !slices.Equal(gens, []uint32{0, 1}) {
		t.Fatalf("generations after run 1: %v", gens)
	}
	evs, err := m.EventsSince(lastEvent, 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, ev := range evs {
		if ev.GetType() == EventTypeConsensus {
			actions = append(actions, ev.GetAction())
			if ev.GetEpoch() != 1 {
				t.Fatalf("event %v: want epoch 1", ev)
			}
		}
	}
	if !slices.Equal(actions, []string{EventActionCompact, EventActionCompactDone}) {
		t.Fatalf("consensus events of run 1: %v", actions)
	}

	// Generation 1 grows; the second run drops generation 0.
	mustApply(t, m, upTo(l.entries[second.Index-2])...)
	if m.GarbageBytes() == 0 {
		t.Fatal("no garbage counted after the writes of generation 1")
	}
	live = liveNodes(t, m)
	mustApply(t, m, l.entries[m.AppliedIndex():]...)
	run2 := m.LastGcRun()
	runs[2] = run2
	if run2.GetRun() != 2 || run2.GetGeneration() != 2 || run2.GetKeptFromGeneration() != 1 || !run2.GetDone() ||
		run2.GetSegmentsReclaimed() != uint64(len(gen0)) || run2.GetBytesReclaimed() != gen0Bytes {
		t.Fatalf("run 2 = %v, generation 0 had %d segments of %d bytes", run2, len(gen0), gen0Bytes)
	}
	if got := liveNodes(t, m); !slices.EqualFunc(got, live, bytes.Equal) {
		t.Fatal("the second compaction changed the live content")
	}
	if got := replayGeneration(t, m, 2); !slices.EqualFunc(got, live, bytes.Equal) {
		t.Fatal("generation 2 does not replay to the live content")
	}
	if _, ok, err := m.Segment(gen0[0].index); err != nil || ok {
		t.Fatalf("generation 0's first segment is still there (%v, %v)", ok, err)
	}
	if gens := verifyChain(t, m, runs); !slices.Equal(gens, []uint32{1, 2}) {
		t.Fatalf("generations after run 2: %v", gens)
	}

	// New writes carry the new generation.
	l.batch(70, writeItem(11, alice, "docs/g", `{"after":true}`))
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
	third := l.compact(3, 3, 80)
	mustApply(t, m, l.entries[m.AppliedIndex():]...)
	runs[3] = m.LastGcRun()
	if run3 := runs[3]; run3.GetRun() != 3 || run3.GetKeptFromGeneration() != 2 || run3.GetSegmentsReclaimed() == 0 || run3.GetIndex() != third.Index ||
		!run3.GetDone() {
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

// TestCompactAbandoned: a run the leader gives up ends undone, with its
// reason in the record and an event; its steps and a repeat of the
// abandonment change nothing after; the next run's cleanup keeps the
// newest complete generation (the one before the abandoned run's), so the
// kept segments still replay to the live content.
func TestCompactAbandoned(t *testing.T) {
	big := func(n int) string { return fmt.Sprintf(`{"n":%d,"data":"%s"}`, n, strings.Repeat("y", 300<<10)) }
	l := newLog(t)
	l.confChange()
	l.batch(10, writeItem(1, alice, "docs/a", big(1)), writeItem(2, alice, "docs/b", big(2)), writeItem(3, bob, "docs/c", big(3)))
	l.compact(1, 1, 20)
	l.batch(30, writeItem(4, alice, "docs/a", big(4)))
	l.compactStart(2, 40)
	l.compactStep(2, 1, 100<<10, 41)
	abandon := l.compactAbandon(2, "free memory 3.0% of the host bound is below memoryThreshold 5.0%", 42)
	late := l.compactStep(2, 2, 100<<10, 43)
	again := l.compactAbandon(2, "again", 44)
	l.batch(50, writeItem(5, bob, "docs/d", big(5)))
	third := l.compact(3, 3, 60)

	m := newMachine(t)
	mustApply(t, m, l.entries[:abandon.Index]...)
	run2 := m.LastGcRun()
	if run2.GetRun() != 2 || run2.GetAbandoned() == "" || RunInProgress(run2) || run2.GetDone() || run2.GetEndIndex() != abandon.Index ||
		run2.GetEndAtMs() != 42 || run2.GetSteps() != 1 {
		t.Fatalf("run 2 after its abandonment = %v", run2)
	}
	if h, ok := m.StateHashAt(abandon.Index); !ok || !bytes.Equal(run2.GetStateHash(), h[:]) {
		t.Fatal("the abandoned run does not name the state hash of its end")
	}
	evs, err := m.EventsSince(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := evs[len(evs)-1]; ev.GetAction() != EventActionCompactAbandoned || ev.GetReason() != run2.GetAbandoned() || ev.GetEpoch() != 2 {
		t.Fatalf("the last event: %v", ev)
	}
	before := m.StateHash()
	mustApply(t, m, l.entries[abandon.Index:again.Index]...)
	want := nextStateHash(nextStateHash(before, late.Index, late.Term, [32]byte{}), again.Index, again.Term, [32]byte{})
	if m.StateHash() != want || !proto.Equal(m.LastGcRun(), run2) {
		t.Fatal("a step or an abandonment after the run ended changed the state")
	}

	mustApply(t, m, l.entries[again.Index:third.Index]...)
	run3 := m.LastGcRun()
	// Generation 2 is incomplete: cleanup keeps generation 1 (run 1's,
	// complete), and has nothing older than it to drop.
	if run3.GetRun() != 3 || run3.GetGeneration() != 3 || run3.GetKeptFromGeneration() != 1 {
		t.Fatalf("run 3 = %v", run3)
	}
	mustApply(t, m, l.entries[third.Index:]...)
	live := liveNodes(t, m)
	if got := replayGeneration(t, m, 3); !m.LastGcRun().GetDone() || !slices.EqualFunc(got, live, bytes.Equal) {
		t.Fatalf("run 3 %v: generation 3 replays to %d nodes, %d live", m.LastGcRun(), len(got), len(live))
	}
	verifyChain(t, m, runsByGeneration(t, m))
}

// runsByGeneration is every run the state records, by the generation it
// started.
func runsByGeneration(t *testing.T, m *Machine) map[uint32]*ledgerpb.GcRun {
	t.Helper()
	view, err := m.ReadView()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	runs := map[uint32]*ledgerpb.GcRun{}
	if err := view.GcRuns(func(run *ledgerpb.GcRun) error {
		runs[run.GetGeneration()] = run
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestCompactSurvivesReopen: the run, the generation and the garbage
// count are read back after a restart, and a snapshot carries them.
func TestCompactSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db, m := openMachine(t, dir)
	l := newLog(t)
	l.batch(10, writeItem(1, alice, "docs/a", `{"a":1}`))
	l.compact(1, 3, 20)
	l.batch(30, writeItem(2, alice, "docs/b", `{"b":1}`))
	mustApply(t, m, l.entries...)
	run, gen, garbage, hash := m.LastGcRun(), m.Generation(), m.GarbageBytes(), m.StateHash()
	if run == nil || gen != 1 || garbage == 0 {
		t.Fatalf("run %v, generation %d, garbage %d", run, gen, garbage)
	}
	m = reopen(t, db, dir)
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

// FuzzApplyCompaction: any entry bytes after a state with content and a
// run in progress (a compaction op with any run, step, bytes or reason,
// or anything else) apply without error, and alike on two machines: apply
// stays a pure function of state and entry whatever a leader proposes.
func FuzzApplyCompaction(f *testing.F) {
	seed := newLog(f)
	for _, e := range []*Entry{
		seed.compactStart(2, 1), seed.compactStep(1, 2, 0, 1), seed.compactStep(1, 2, 1<<62, 1), seed.compactStep(1, 3, 10, 1),
		seed.compactStep(7, 2, 10, 1), seed.compactAbandon(1, "", 1), seed.compactAbandon(1, strings.Repeat("r", 300), 1),
	} {
		f.Add(e.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := newLog(t)
		l.batch(10, writeItem(1, alice, "docs/a", nested), writeItem(2, bob, "docs/b", `{"b":1}`), writeItem(3, bob, "docs/c", `{"c":1}`))
		l.compactStart(1, 20)
		l.compactStep(1, 1, 1, 21)
		l.add(data)
		l.compactStep(1, 2, 1<<20, 22) // ends the run, if still in progress
		var hashes [][32]byte
		for range 2 {
			m := newMachine(t)
			mustApply(t, m, l.entries...)
			if run := m.LastGcRun(); run == nil {
				t.Fatal("no run recorded")
			}
			hashes = append(hashes, m.StateHash())
		}
		if hashes[0] != hashes[1] {
			t.Fatalf("two machines applied the same entries to %x and %x", hashes[0], hashes[1])
		}
	})
}
