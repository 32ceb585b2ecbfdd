package state

import (
	"math"
	"testing"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// TestReadViewIsOneState: a view keeps seeing the state it was opened on
// while later entries are applied, across segments, nodes and accounts.
func TestReadViewIsOneState(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	mustApply(t, m, l.batch(1000, writeItem(1, alice, "page/a", `{"title":"a"}`), writeItem(2, bob, "page/b", `{"title":"b"}`)))
	mustApply(t, m, l.batch(2000, deleteItem(3, alice, "page/a")))

	count := func(v *ReadView) (segments, nodes, accounts int) {
		t.Helper()
		if err := v.SegmentsFrom(0, func(uint64, []byte, [32]byte) error { segments++; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := v.Nodes(func([]byte) error { nodes++; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := v.Accounts(func(*ledgerpb.GcAccount) error { accounts++; return nil }); err != nil {
			t.Fatal(err)
		}
		return segments, nodes, accounts
	}
	v, err := m.ReadView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.AppliedIndex() != m.AppliedIndex() {
		t.Fatalf("view at %d, state at %d", v.AppliedIndex(), m.AppliedIndex())
	}
	before := [3]int{}
	before[0], before[1], before[2] = count(v)
	if before != [3]int{2, 1, 1} {
		t.Fatalf("segments, nodes, accounts %v; want 2 segments, bob's node, alice's account", before)
	}

	mustApply(t, m, l.batch(3000, writeItem(4, alice, "page/c", `{"title":"c"}`), deleteItem(5, bob, "page/b")))
	after := [3]int{}
	after[0], after[1], after[2] = count(v)
	if after != before || v.AppliedIndex() == m.AppliedIndex() {
		t.Fatalf("the view moved with the state: %v, was %v", after, before)
	}
	fresh, err := m.ReadView()
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	now := [3]int{}
	now[0], now[1], now[2] = count(fresh)
	if now != [3]int{3, 1, 2} || fresh.AppliedIndex() != m.AppliedIndex() {
		t.Fatalf("a new view: %v at %d", now, fresh.AppliedIndex())
	}
	var from []uint64
	if err := fresh.SegmentsFrom(2, func(i uint64, _ []byte, _ [32]byte) error { from = append(from, i); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(from) != 2 || from[0] != 2 {
		t.Fatalf("segments from index 2: %v", from)
	}
}

// TestSegmentRangeAndNewest: ranges are inclusive at both ends, and the
// newest-first read stops where its caller says.
func TestSegmentRangeAndNewest(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	for i := range 4 {
		mustApply(t, m, l.batch(int64(1000*(i+1)), writeItem(i+1, alice, "page/"+string(rune('a'+i)), `{"title":"x"}`)))
	}
	v, err := m.ReadView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var all []uint64
	if err := v.SegmentsFrom(0, func(i uint64, _ []byte, _ [32]byte) error { all = append(all, i); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("segments %v", all)
	}
	rangeOf := func(first, last uint64) (got []uint64) {
		t.Helper()
		if err := v.SegmentRange(first, last, func(i uint64, _ uint32, raw []byte) error {
			if len(raw) == 0 {
				t.Fatalf("segment %d without bytes", i)
			}
			got = append(got, i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := rangeOf(all[1], all[2]); len(got) != 2 || got[0] != all[1] || got[1] != all[2] {
		t.Fatalf("range %d-%d: %v", all[1], all[2], got)
	}
	if got := rangeOf(0, math.MaxUint64); len(got) != 4 {
		t.Fatalf("whole range: %v", got)
	}
	if got := rangeOf(all[2], all[1]); len(got) != 0 {
		t.Fatalf("an empty range: %v", got)
	}
	var newest []uint64
	if err := v.NewestSegments(func(i uint64, _ []byte) (bool, error) { newest = append(newest, i); return len(newest) < 3, nil }); err != nil {
		t.Fatal(err)
	}
	if len(newest) != 3 || newest[0] != all[3] || newest[2] != all[1] {
		t.Fatalf("newest three %v of %v", newest, all)
	}
}
