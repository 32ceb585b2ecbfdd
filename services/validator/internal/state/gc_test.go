package state

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func TestDeleteDebtMicros(t *testing.T) {
	for _, tc := range []struct{ bytes, want uint64 }{
		{0, 100_000}, {1, 100_000}, {1_000_000, 100_000}, {2_500_000, 250_000}, {10_000_000_000, 1_000_000_000},
		{math.MaxUint64, math.MaxUint64 / 10},
	} {
		if got := DeleteDebtMicros(tc.bytes); got != tc.want {
			t.Errorf("DeleteDebtMicros(%d) = %d, want %d", tc.bytes, got, tc.want)
		}
	}
}

// TestCleanupCostBytes: the bytes dropped, plus the live content the last
// completed run rewrote per byte of the garbage (or the threshold) that
// made it due; saturating, never wrapping.
func TestCleanupCostBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deleted uint64
		run     *ledgerpb.GcRun
		want    uint64
	}{
		{"no run yet", 5_000, nil, 5_000},
		{"rewrote twice the garbage", 5_000, &ledgerpb.GcRun{Done: true, BytesWritten: 2_000_000, GarbageBytes: 1_000_000}, 15_000},
		{"forced below the threshold", 5_000, &ledgerpb.GcRun{Done: true, BytesWritten: 2_000_000, GarbageBytes: 10, SizeDelta: 4_000_000}, 7_500},
		{"garbage past the threshold", 5_000, &ledgerpb.GcRun{Done: true, BytesWritten: 2_000_000, GarbageBytes: 8_000_000, SizeDelta: 4_000_000}, 6_250},
		{"saturates", math.MaxUint64 / 2, &ledgerpb.GcRun{Done: true, BytesWritten: math.MaxUint64, GarbageBytes: 1}, math.MaxUint64},
		{"saturates at the sum", math.MaxUint64 - 1, &ledgerpb.GcRun{Done: true, BytesWritten: 1, GarbageBytes: 1}, math.MaxUint64},
	} {
		if got := CleanupCostBytes(tc.deleted, tc.run); got != tc.want {
			t.Errorf("%s: CleanupCostBytes(%d) = %d, want %d", tc.name, tc.deleted, got, tc.want)
		}
	}
}

// TestDebtPricedByTheLastRun: a delete after a completed run is charged
// for the live content that run rewrote per byte of garbage; the run in
// progress after it does not change the price, and a restart keeps it.
func TestDebtPricedByTheLastRun(t *testing.T) {
	dir := t.TempDir()
	db, m := openMachine(t, dir)
	big := `{"d":"` + strings.Repeat("z", 1_500_000) + `"}`
	l := newLog(t)
	l.batch(1, writeItem(1, alice, "keep", big), writeItem(2, alice, "gone", big), writeItem(3, alice, "gone2", big))
	l.compact(1, 1, 2)
	l.batch(3, writeItem(4, bob, "x", `{"x":1}`))
	l.compactStart(2, 4) // in progress: the price is still run 1's
	del := l.batch(5, deleteItem(5, alice, "gone"))
	mustApply(t, m, l.entries...)
	acc, err := m.Account(alice)
	if err != nil {
		t.Fatal(err)
	}
	run1 := m.meta.lastDone
	want := DeleteDebtMicros(CleanupCostBytes(acc.GetDeletedBytes(), run1))
	if run1.GetRun() != 1 || want <= DeleteDebtMicros(acc.GetDeletedBytes()) || acc.GetPendingDebtMicros() != want {
		t.Fatalf("debt %d for %d deleted bytes after run %v, want %d (more than the %d of the bytes alone)", acc.GetPendingDebtMicros(),
			acc.GetDeletedBytes(), run1, want, DeleteDebtMicros(acc.GetDeletedBytes()))
	}
	m = reopen(t, db, dir)
	if !proto.Equal(m.meta.lastDone, run1) || del.Index != m.AppliedIndex() {
		t.Fatalf("reopened: the newest completed run %v, want %v", m.meta.lastDone, run1)
	}
}

// TestGcDebt follows a wallet through GC debt (ADR 0011): deletes accrue
// pending debt, the per-epoch job executes it, a limit at or below the executed debt blocks
// writes (REJECTED write_blocked_gc_debt, nothing written), a payment
// unblocks them, and a transaction pays once.
func TestGcDebt(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	op := func(ent *ledgerpb.Entry) { mustApply(t, m, l.op(ent)) }
	account := func() *ledgerpb.GcAccount {
		acc, err := m.Account(alice)
		if err != nil || acc == nil {
			t.Fatalf("account: %v %v", acc, err)
		}
		return acc
	}
	mustApply(t, m, l.batch(1, writeItem(1, alice, "a", `{"x":1}`), writeItem(2, alice, "b", `{"y":2}`)))
	mustApply(t, m, l.batch(2, deleteItem(3, alice, "a"), deleteItem(4, alice, "missing")))
	acc := account()
	if acc.GetPendingDebtMicros() != 200_000 || acc.GetExecutedDebtMicros() != 0 || acc.GetDeletes() != 2 || acc.GetDeletedBytes() == 0 {
		t.Fatalf("after two deletes (each at least 1 MB): %v", acc)
	}

	op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Epoch: 1000}}})
	if acc = account(); acc.GetPendingDebtMicros() != 200_000 || m.GcEpoch() != 1000 {
		t.Fatalf("the first job only starts the schedule: %v (gc epoch %d)", acc, m.GcEpoch())
	}
	op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Epoch: 1001}}})
	if acc = account(); acc.GetPendingDebtMicros() != 0 || acc.GetExecutedDebtMicros() != 200_000 || m.GcEpoch() != 1001 {
		t.Fatalf("after the next epoch's job: %v (gc epoch %d)", acc, m.GcEpoch())
	}
	mustApply(t, m, l.batch(3, deleteItem(5, alice, "b")))
	op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Epoch: 1001}}}) // the same epoch again
	if acc = account(); acc.GetPendingDebtMicros() != 100_000 {
		t.Fatalf("an epoch's job ran twice: %v", acc)
	}
	if WritesBlocked(acc) {
		t.Fatal("blocked below the default limit")
	}

	op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: alice[:], LimitMicros: 200_000}}})
	if !WritesBlocked(account()) {
		t.Fatal("executed debt at the limit does not block")
	}
	mustApply(t, m, l.batch(4, writeItem(6, alice, "c", `{"z":3}`)))
	if rec := mustRecord(t, m, 6); rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED || rec.GetReason() != ReasonWriteBlocked {
		t.Fatalf("a blocked wallet's write: %v", rec)
	}
	if _, ok, _ := m.Node(path(alice, "c")); ok {
		t.Fatal("a blocked write wrote its node")
	}

	pay := &ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: &ledgerpb.GcPay{Wallet: alice[:], AmountMicros: 250_000, TxHash: pid(0xaa)}}}
	op(pay)
	if acc = account(); acc.GetExecutedDebtMicros() != 0 || acc.GetPendingDebtMicros() != 50_000 || acc.GetPaidMicros() != 250_000 || WritesBlocked(acc) {
		t.Fatalf("after paying 0.25: %v", acc)
	}
	op(pay) // the same log again
	if acc = account(); acc.GetPaidMicros() != 250_000 || acc.GetPendingDebtMicros() != 50_000 {
		t.Fatalf("a log paid twice: %v", acc)
	}
	// Another DebtPaid log of the same transaction pays on its own, once.
	second := &ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: &ledgerpb.GcPay{Wallet: alice[:], AmountMicros: 20_000, TxHash: pid(0xaa), LogIndex: 3}}}
	if spent, err := m.DebtTxSpent([32]byte(pid(0xaa)), 3); err != nil || spent {
		t.Fatalf("log 3 spent before its GcPay: %t %v", spent, err)
	}
	op(second)
	op(second)
	if acc = account(); acc.GetPaidMicros() != 270_000 || acc.GetPendingDebtMicros() != 30_000 {
		t.Fatalf("after a second log of the transaction, applied twice: %v", acc)
	}
	for _, log := range []uint32{0, 3} {
		if spent, err := m.DebtTxSpent([32]byte(pid(0xaa)), log); err != nil || !spent {
			t.Fatalf("log %d not spent: %t %v", log, spent, err)
		}
	}
	if spent, _ := m.DebtTxSpent([32]byte(pid(0xaa)), 1); spent {
		t.Fatal("a log of the transaction that paid nothing is spent")
	}
	mustApply(t, m, l.batch(5, writeItem(7, alice, "c", `{"z":3}`)))
	if rec := mustRecord(t, m, 7); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED {
		t.Fatalf("a write after paying: %v", rec)
	}
	if acc, _ := m.Account(bob); acc != nil {
		t.Fatalf("a wallet that never deleted has an account: %v", acc)
	}
}

// TestWalletStats counts a wallet's live nodes through a nested write, a
// replace that drops a nested child, and a delete, and pages its content.
func TestWalletStats(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	mustApply(t, m, l.batch(10, writeItem(1, alice, "a", `{"x":{"y":{}}}`))) // a, a/x, a/x/y
	mustApply(t, m, l.batch(20, writeItem(2, alice, "b", "text")))           // b
	ws, err := m.WalletStats(alice)
	if err != nil || ws.GetNodes() != 4 || ws.GetWrites() != 2 || ws.GetLastWriteAtMs() != 20 || ws.GetLastWritePath() != path(alice, "b") {
		t.Fatalf("after two writes: %v %v", ws, err)
	}
	mustApply(t, m, l.batch(30, writeItem(3, alice, "a", `{"x":{}}`))) // a/x/y goes
	if ws, _ = m.WalletStats(alice); ws.GetNodes() != 3 || ws.GetWrites() != 3 {
		t.Fatalf("after a replace: %v", ws)
	}
	nodes, more, err := m.WalletNodes(strings.TrimSuffix(path(alice, ""), "/"), 1, 2)
	if err != nil || len(nodes) != 2 || more || nodes[0].GetPath() != path(alice, "a/x") || nodes[1].GetPath() != path(alice, "b") {
		t.Fatalf("the last 2 of 3: %v %t %v", nodes, more, err)
	}
	if nodes, more, _ = m.WalletNodes(strings.TrimSuffix(path(alice, ""), "/"), 0, 1); len(nodes) != 1 || !more || nodes[0].GetPath() != path(alice, "a") {
		t.Fatalf("the first of 3: %v %t", nodes, more)
	}
	mustApply(t, m, l.batch(40, deleteItem(4, alice, "a")))
	if ws, _ = m.WalletStats(alice); ws.GetNodes() != 1 || ws.GetDeletes() != 1 || ws.GetWrites() != 3 {
		t.Fatalf("after deleting a: %v", ws)
	}
	if ws, _ := m.WalletStats(bob); ws != nil {
		t.Fatalf("a wallet that never wrote: %v", ws)
	}
}
