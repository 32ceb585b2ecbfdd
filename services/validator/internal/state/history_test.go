package state

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

func TestHashHistoryRing(t *testing.T) {
	h := newHashHistory(4)
	hash := func(i uint64) [32]byte { return [32]byte{byte(i)} }
	if _, ok := h.at(1); ok {
		t.Fatal("an empty history holds index 1")
	}
	for i := uint64(10); i <= 15; i++ {
		h.add(i, hash(i))
	}
	for i := uint64(9); i <= 16; i++ {
		got, ok := h.at(i)
		want := i >= 12 && i <= 15 // the last four
		if ok != want || (ok && got != hash(i)) {
			t.Errorf("at(%d) = %x, %t; want held=%t", i, got[:1], ok, want)
		}
	}
	// A gap (a snapshot restore) starts over.
	h.add(20, hash(20))
	if _, ok := h.at(15); ok {
		t.Error("index 15 survived a jump to 20")
	}
	if got, ok := h.at(20); !ok || got != hash(20) {
		t.Errorf("at(20) = %x, %t", got[:1], ok)
	}
	// So does the same index again (a restore at the applied index).
	h.add(21, hash(21))
	h.add(21, [32]byte{0xff})
	if got, ok := h.at(21); !ok || got != [32]byte{0xff} {
		t.Errorf("at(21) after a repeat = %x, %t", got[:1], ok)
	}
	if _, ok := h.at(20); ok {
		t.Error("index 20 survived a repeat of 21")
	}
}

// TestStateHashAt checks that the history holds, for every index applied,
// the hash StateHash reported right after it, also for indexes applied
// together in one Apply, and that a restart keeps only the applied index.
func TestStateHashAt(t *testing.T) {
	dir := t.TempDir()
	db, m := openMachine(t, dir)
	entries := scenario(t).entries
	ref := newMachine(t)
	want := map[uint64][32]byte{}
	for _, e := range entries {
		mustApply(t, ref, e)
		want[e.Index] = ref.StateHash()
	}
	mustApply(t, m, entries[:3]...) // several indexes in one Apply
	for _, e := range entries[3:] {
		mustApply(t, m, e)
	}
	for _, e := range entries {
		if got, ok := m.StateHashAt(e.Index); !ok || got != want[e.Index] {
			w := want[e.Index]
			t.Errorf("StateHashAt(%d) = %x, %t; want %x", e.Index, got[:4], ok, w[:4])
		}
	}
	last := entries[len(entries)-1].Index
	if _, ok := m.StateHashAt(last + 1); ok {
		t.Error("StateHashAt answers for an index not applied yet")
	}
	m = reopen(t, db, dir)
	if got, ok := m.StateHashAt(last); !ok || got != want[last] {
		t.Errorf("after a restart, StateHashAt(%d) = %x, %t", last, got[:4], ok)
	}
	if _, ok := m.StateHashAt(last - 1); ok {
		t.Error("after a restart, the history holds an index from before it")
	}
	l := newLog(t)
	l.next = last + 1
	next := l.add(nil)
	mustApply(t, m, next)
	if got, ok := m.StateHashAt(last); !ok || got != want[last] {
		t.Errorf("the history lost index %d when %d was applied", last, next.Index)
	}
	if got, ok := m.StateHashAt(next.Index); !ok || got != m.StateHash() {
		t.Errorf("StateHashAt(%d) = %x, %t", next.Index, got[:4], ok)
	}
}

// TestFinalize follows the scenario through its FinalizeEpochs entries.
func TestFinalize(t *testing.T) {
	entries := scenario(t).entries
	var fin int // index in entries of the first FinalizeEpochs
	for i, e := range entries {
		var ent ledgerpb.Entry
		if proto.Unmarshal(e.Data, &ent) == nil && ent.GetFinalize() != nil {
			fin = i
			break
		}
	}
	m := newMachine(t)
	mustApply(t, m, entries[:fin]...)
	if got := mustRecord(t, m, 1).GetStatus(); got != ledgerpb.Status_STATUS_COMMITTED {
		t.Fatalf("before finality: %v", got)
	}
	// Committed: 1, 2, 4, 5 (the delete) and 6; 3 was rejected.
	if n, oldest, err := m.Unfinalized(); err != nil || n != 5 || oldest == nil || oldest.GetStatus() != ledgerpb.Status_STATUS_COMMITTED {
		t.Fatalf("unfinalized before finality: %d %v %v", n, oldest, err)
	}
	if m.FinalizedEpoch() != 0 {
		t.Fatalf("finalized epoch %d before any FinalizeEpochs", m.FinalizedEpoch())
	}
	if c, _ := m.Counts(); c.GetLastCommitAtMs() != 3 {
		t.Fatalf("last commit at %d before finality, want 3 (the batch sealed at 3)", c.GetLastCommitAtMs())
	}
	mustApply(t, m, entries[fin:]...)
	for n, want := range map[int]ledgerpb.Status{
		1: ledgerpb.Status_STATUS_FINALIZED, 2: ledgerpb.Status_STATUS_FINALIZED, 3: ledgerpb.Status_STATUS_REJECTED,
		4: ledgerpb.Status_STATUS_FINALIZED, 5: ledgerpb.Status_STATUS_FINALIZED, 6: ledgerpb.Status_STATUS_FINALIZED,
		7: ledgerpb.Status_STATUS_FINALIZED,
	} {
		rec := mustRecord(t, m, n)
		if rec.GetStatus() != want {
			t.Errorf("proposal %d: %v, want %v", n, rec.GetStatus(), want)
		}
		if want == ledgerpb.Status_STATUS_FINALIZED {
			wantAt := int64(4) // from the FinalizeEpochs entry
			if n == 7 {
				wantAt = 5 // committed in a final epoch: at its commit
			}
			if rec.GetFinalizedAtMs() != wantAt || rec.GetCommittedAtMs() == 0 {
				t.Errorf("proposal %d: committed at %d, finalized at %d, want %d", n, rec.GetCommittedAtMs(), rec.GetFinalizedAtMs(), wantAt)
			}
		}
	}
	if m.FinalizedEpoch() != 5 {
		t.Fatalf("finalized epoch %d, want 5 (a later, lower one changes nothing)", m.FinalizedEpoch())
	}
	if n, oldest, err := m.Unfinalized(); err != nil || n != 0 || oldest != nil {
		t.Fatalf("unfinalized after finality: %d %v %v", n, oldest, err)
	}
	// 8 is committed (its payment orphaned, then re-mined), 9 rejected
	// payment_orphaned (reorg.go). The last commit is 8's, in the batch
	// sealed at 6: 9's rejection, sealed at 11, does not move it.
	want := &ledgerpb.ProposalCounts{Committed: 7, Finalized: 7, Rejected: 2, Writes: 6, Deletes: 1,
		RejectedByReason: map[string]uint64{"payment_insufficient": 1, "payment_orphaned": 1}, LastCommitAtMs: 6}
	if got, _ := m.Counts(); !proto.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	lower, upper := storage.UnfinalizedThrough(^uint64(0))
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Fatalf("an unfinalized mark is left: %x", it.Key())
	}
}
