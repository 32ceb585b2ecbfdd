package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// eventIDs lists the ids of every event kept.
func eventIDs(t testing.TB, m *Machine) []uint64 {
	t.Helper()
	evs, err := m.EventsSince(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(evs))
	for i, ev := range evs {
		ids[i] = ev.GetId()
	}
	return ids
}

func idRange(from, to uint64) []uint64 {
	var out []uint64
	for id := from; id <= to; id++ {
		out = append(out, id)
	}
	return out
}

func sameIDs(a, b []uint64) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func TestEventRetentionByCount(t *testing.T) {
	m := newMachine(t)
	if m.FirstEventID() != 1 {
		t.Fatalf("FirstEventID of an empty state = %d, want 1", m.FirstEventID())
	}
	l := newLog(t)
	l.retention = EventRetention{MaxEvents: 3}
	l.batch(1, writeItem(1, alice, "a", `{}`), writeItem(2, alice, "b", `{}`))
	l.batch(2, writeItem(3, alice, "c", `{}`), writeItem(4, alice, "d", `{}`), writeItem(5, alice, "e", `{}`))
	mustApply(t, m, l.entries...)
	if got := eventIDs(t, m); !sameIDs(got, idRange(3, 5)) || m.FirstEventID() != 3 || m.LastEventID() != 5 {
		t.Fatalf("kept %v, first %d, last %d; want 3..5", got, m.FirstEventID(), m.LastEventID())
	}
}

func TestEventRetentionByTime(t *testing.T) {
	hour := time.Hour.Milliseconds()
	m := newMachine(t)
	l := newLog(t)
	l.retention = EventRetention{Window: time.Hour}
	l.batch(10, writeItem(1, alice, "a", `{}`), writeItem(2, alice, "b", `{}`))
	l.batch(10+hour/2, writeItem(3, alice, "c", `{}`))
	mustApply(t, m, l.entries...)
	if got := eventIDs(t, m); !sameIDs(got, idRange(1, 3)) {
		t.Fatalf("inside the window: kept %v", got)
	}
	// Exactly one window after the first batch: still kept.
	mustApply(t, m, l.batch(10+hour, writeItem(4, alice, "d", `{}`)))
	if got := eventIDs(t, m); !sameIDs(got, idRange(1, 4)) {
		t.Fatalf("at the window's edge: kept %v", got)
	}
	// A batch without events moves the window too.
	accept := writeItem(5, alice, "e", `{}`)
	accept.Accept = true
	mustApply(t, m, l.batch(11+hour, accept))
	if got := eventIDs(t, m); !sameIDs(got, idRange(3, 4)) || m.FirstEventID() != 3 {
		t.Fatalf("past the window: kept %v, first %d", got, m.FirstEventID())
	}
	// Everything old: nothing kept, the next id is where history resumes.
	mustApply(t, m, l.batch(10+3*hour, accept))
	if got := eventIDs(t, m); len(got) != 0 || m.FirstEventID() != 5 || m.LastEventID() != 4 {
		t.Fatalf("all old: kept %v, first %d, last %d", got, m.FirstEventID(), m.LastEventID())
	}
}

// TestEventRetentionIsReplicated: the same entries give the same events,
// the same oldest id and the same state hash, also across a restart, and
// pruning changes the state hash (it is replicated state). The retention
// comes from the entries: no validator setting is involved.
func TestEventRetentionIsReplicated(t *testing.T) {
	r := EventRetention{Window: 5 * time.Millisecond, MaxEvents: 4}
	entries := scenarioWith(t, r).entries
	a, b := newMachine(t), newMachine(t)
	mustApply(t, a, entries...)
	for _, e := range entries {
		mustApply(t, b, e)
	}
	if a.StateHash() != b.StateHash() || a.FirstEventID() != b.FirstEventID() || !sameIDs(eventIDs(t, a), eventIDs(t, b)) {
		t.Fatal("two validators pruned differently")
	}
	if a.FirstEventID() == 1 {
		t.Fatal("the scenario pruned nothing")
	}
	if plain := newMachine(t); func() bool { mustApply(t, plain, scenario(t).entries...); return plain.StateHash() == a.StateHash() }() {
		t.Fatal("pruning did not change the state hash")
	}

	dir := t.TempDir()
	db, m := openMachine(t, dir)
	mustApply(t, m, entries...)
	first := m.FirstEventID()
	m = reopen(t, db, dir)
	if m.FirstEventID() != first || m.FirstEventID() != eventIDs(t, m)[0] {
		t.Fatalf("after a restart FirstEventID = %d, was %d; kept %v", m.FirstEventID(), first, eventIDs(t, m))
	}
}

// TestEventRetentionBoundedPerEntry: lowering the retention on a long
// history prunes it over the following batches, maxPrunePerEntry at a time.
func TestEventRetentionBoundedPerEntry(t *testing.T) {
	dir := t.TempDir()
	db, m := openMachine(t, dir)
	l := newLog(t)
	const total = maxPrunePerEntry + 100
	for n := 0; n < total; n += 500 {
		var items []*ledgerpb.BatchItem
		for i := n; i < min(n+500, total); i++ {
			items = append(items, writeItem(i+1, alice, fmt.Sprintf("n%d", i), `{}`))
		}
		mustApply(t, m, l.batch(1, items...))
	}
	m = reopen(t, db, dir)
	l.retention = EventRetention{MaxEvents: 10}
	mustApply(t, m, l.batch(2, writeItem(total+1, alice, "last", `{}`)))
	if m.FirstEventID() != maxPrunePerEntry+1 {
		t.Fatalf("one entry pruned up to %d, want %d", m.FirstEventID()-1, maxPrunePerEntry)
	}
	mustApply(t, m, l.batch(3, writeItem(total+2, alice, "later", `{}`)))
	if got := eventIDs(t, m); !sameIDs(got, idRange(total-7, total+2)) || m.FirstEventID() != total-7 {
		t.Fatalf("kept %v (first %d), want the newest 10", got, m.FirstEventID())
	}
}

// TestStateHashGoldenRetention pins the state hash of the scenario under a
// retention that prunes by time and by count: the deletes are replicated
// state like the writes (see TestStateHashGolden).
func TestStateHashGoldenRetention(t *testing.T) {
	const want = "e585666767c03f6225765707241c640d97bddcd5f29b8d5077e95b023c865db7"
	m := newMachine(t)
	mustApply(t, m, scenarioWith(t, EventRetention{Window: 5 * time.Millisecond, MaxEvents: 4}).entries...)
	got := m.StateHash()
	if bytesHex(got[:]) != want {
		t.Fatalf("state hash of the scenario with retention = %x, pinned %s", got, want)
	}
}

// TestEventRetentionAfterRestore: a restored snapshot brings its oldest
// event with it, and pruning continues from there.
func TestEventRetentionAfterRestore(t *testing.T) {
	r := EventRetention{Window: 5 * time.Millisecond, MaxEvents: 4}
	src, dst := newMachine(t), newMachine(t)
	entries := scenarioWith(t, r).entries
	mustApply(t, src, entries...)
	if err := snapshotOf(t, src, 2).restore(dst); err != nil {
		t.Fatal(err)
	}
	if dst.FirstEventID() != src.FirstEventID() || dst.LastEventID() != src.LastEventID() {
		t.Fatalf("restored first %d last %d, source %d %d", dst.FirstEventID(), dst.LastEventID(), src.FirstEventID(), src.LastEventID())
	}
	l := newLog(t)
	l.next, l.term, l.retention = src.AppliedIndex()+1, 2, r
	next := l.batch(20, writeItem(40, alice, "after", `{}`))
	mustApply(t, src, next)
	mustApply(t, dst, next)
	if src.StateHash() != dst.StateHash() || !sameIDs(eventIDs(t, dst), []uint64{src.LastEventID()}) {
		t.Fatalf("after the restore: kept %v, hashes agree %v", eventIDs(t, dst), src.StateHash() == dst.StateHash())
	}
}
