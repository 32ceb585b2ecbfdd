package state

import (
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
