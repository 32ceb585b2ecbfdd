package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// eventLine renders what an event says, its id first.
func eventLine(ev *ledgerpb.Event) string {
	return fmt.Sprintf("%d %s/%s wallet=%s path=%s ts=%d epoch=%d index=%d",
		ev.GetId(), ev.GetType(), ev.GetAction(), ev.GetWallet(), ev.GetPath(), ev.GetTimestamp(), ev.GetEpoch(), ev.GetCommitIndex())
}

// eventsAfter lists the events after id, rendered.
func eventsAfter(t testing.TB, m *Machine, id uint64) []string {
	t.Helper()
	evs, err := m.EventsSince(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = eventLine(ev)
	}
	return out
}

func wantEvents(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: events\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const (
	aliceHex = "0x1234567890abcdef1234567890abcdef12345678"
	bobHex   = "0xabcdef0123456789abcdef0123456789abcdef01"
)

// TestScenarioEvents: the wallet and consensus events of the scenario take
// their ids in the one sequence of the log, between the content events,
// dated by the leader's clock in their entries.
func TestScenarioEvents(t *testing.T) {
	entries := scenario(t).entries
	a, b := newMachine(t), newMachine(t)
	mustApply(t, a, entries...)
	for _, e := range entries {
		mustApply(t, b, e)
	}
	got := eventsAfter(t, a, 0)
	if other := eventsAfter(t, b, 0); !slices.Equal(got, other) {
		t.Fatalf("two machines hold different events:\n%s\n%s", strings.Join(got, "\n"), strings.Join(other, "\n"))
	}
	var kinds []string
	for _, line := range got {
		f := strings.Fields(line)
		kinds = append(kinds, f[0]+" "+f[1])
	}
	if want := []string{
		"1 content/write", "2 content/write", "3 content/write", "4 delete/delete", "5 content/write", "6 binary/write",
		"7 consensus/finalize", "8 content/write",
		"9 wallet/debt_executed", "10 wallet/limit_set", "11 wallet/writes_blocked", "12 wallet/debt_paid",
		"13 content/write", "14 consensus/leader",
	}; !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	wantEvents(t, "the scenario's wallet and consensus events", slices.Concat(got[6:7], got[8:12], got[13:]),
		"7 consensus/finalize wallet= path= ts=4 epoch=5 index=8",
		"9 wallet/debt_executed wallet="+bobHex+" path= ts=6 epoch=0 index=12",
		"10 wallet/limit_set wallet="+bobHex+" path= ts=6 epoch=0 index=13",
		"11 wallet/writes_blocked wallet="+bobHex+" path= ts=6 epoch=0 index=13",
		"12 wallet/debt_paid wallet="+bobHex+" path= ts=6 epoch=0 index=14",
		"14 consensus/leader wallet= path= ts=12 epoch=0 index=22",
	)
	if a.LeaderTerm() != 3 || b.LeaderTerm() != 3 {
		t.Fatalf("announced term %d and %d, want 3", a.LeaderTerm(), b.LeaderTerm())
	}
}

// TestWalletEvents: each change of a GC debt account says what changed, and
// writes_blocked / writes_unblocked whenever WritesBlocked flips; what
// changes nothing says nothing.
func TestWalletEvents(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	op := func(ent *ledgerpb.Entry) []string {
		t.Helper()
		last := m.LastEventID()
		mustApply(t, m, l.op(ent))
		return eventsAfter(t, m, last)
	}
	execute := func(wallet []byte, epoch uint64, at int64) []string {
		return op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Wallet: wallet, Epoch: epoch, AtMs: at}}})
	}
	setLimit := func(micros uint64, at int64) []string {
		return op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: alice[:], LimitMicros: micros, AtMs: at}}})
	}
	pay := func(micros uint64, tx int, at int64) []string {
		return op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: &ledgerpb.GcPay{Wallet: alice[:], AmountMicros: micros, TxHash: pid(tx), AtMs: at}}})
	}

	// A delete accrues pending debt only: its delete event, no wallet event.
	mustApply(t, m, l.batch(10, writeItem(1, alice, "a", `{}`), writeItem(2, alice, "b", `{}`)))
	mustApply(t, m, l.batch(11, deleteItem(3, alice, "a")))
	wantEvents(t, "a delete", eventsAfter(t, m, 2), "3 delete/delete wallet="+aliceHex+" path="+path(alice, "a")+" ts=11 epoch=0 index=2")

	wantEvents(t, "the first per-epoch job", execute(nil, 1, 20))
	wantEvents(t, "the second job", execute(nil, 2, 21), "4 wallet/debt_executed wallet="+aliceHex+" path= ts=21 epoch=0 index=4")
	wantEvents(t, "the same epoch's job again", execute(nil, 2, 22))
	wantEvents(t, "a lower limit", setLimit(100_000, 23),
		"5 wallet/limit_set wallet="+aliceHex+" path= ts=23 epoch=0 index=6",
		"6 wallet/writes_blocked wallet="+aliceHex+" path= ts=23 epoch=0 index=6")
	wantEvents(t, "the same limit again", setLimit(100_000, 24))
	wantEvents(t, "a payment below the limit", pay(40_000, 0xa1, 25),
		"7 wallet/debt_paid wallet="+aliceHex+" path= ts=25 epoch=0 index=8",
		"8 wallet/writes_unblocked wallet="+aliceHex+" path= ts=25 epoch=0 index=8")
	wantEvents(t, "the same log again", pay(40_000, 0xa1, 26))
	wantEvents(t, "nothing to pay with", pay(0, 0xa2, 27))

	// The wallet's own execute-pending: blocked again by the debt of a
	// new delete (0.06 + 0.10 ≥ 0.10).
	mustApply(t, m, l.batch(28, deleteItem(4, alice, "b")))
	last := m.LastEventID()
	wantEvents(t, "execute-pending", execute(alice[:], 0, 29),
		fmt.Sprintf("%d wallet/debt_executed wallet=%s path= ts=29 epoch=0 index=%d", last+1, aliceHex, l.next-1),
		fmt.Sprintf("%d wallet/writes_blocked wallet=%s path= ts=29 epoch=0 index=%d", last+2, aliceHex, l.next-1))
	wantEvents(t, "execute-pending with nothing pending", execute(alice[:], 0, 30))
	// A limit raised above the executed debt unblocks. An op of a version
	// that did not date it is dated 0.
	wantEvents(t, "an undated higher limit", setLimit(1_000_000, 0),
		fmt.Sprintf("%d wallet/limit_set wallet=%s path= ts=0 epoch=0 index=%d", last+3, aliceHex, l.next-1),
		fmt.Sprintf("%d wallet/writes_unblocked wallet=%s path= ts=0 epoch=0 index=%d", last+4, aliceHex, l.next-1))

	// A new account: limit_set; 0 executed debt is below any limit.
	last = m.LastEventID()
	mustApply(t, m, l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: bob[:], AtMs: 31}}}))
	wantEvents(t, "a new account", eventsAfter(t, m, last),
		fmt.Sprintf("%d wallet/limit_set wallet=%s path= ts=31 epoch=0 index=%d", last+1, bobHex, l.next-1))

	ids := eventIDs(t, m)
	for i, id := range ids {
		if id != uint64(i+1) {
			t.Fatalf("event ids %v are not consecutive", ids)
		}
	}
}

// TestConsensusEvents: finality that moves emits finalize with the epoch;
// the first announcement of a newer term, in that term's entry, emits
// leader. Raft's empty entries say nothing.
func TestConsensusEvents(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	apply := func(e *Entry) []string {
		t.Helper()
		last := m.LastEventID()
		mustApply(t, m, e)
		return eventsAfter(t, m, last)
	}
	wantEvents(t, "an empty entry", apply(l.empty()))
	wantEvents(t, "term 1's leader", apply(l.leader(3, 1, 100)), "1 consensus/leader wallet= path= ts=100 epoch=0 index=2")
	wantEvents(t, "term 1 again", apply(l.leader(3, 1, 101)))
	wantEvents(t, "finality", apply(l.finalize(7, 102)), "2 consensus/finalize wallet= path= ts=102 epoch=7 index=4")
	wantEvents(t, "finality that does not move", apply(l.finalize(7, 103)))
	l.term = 2
	wantEvents(t, "a new term's empty entry", apply(l.empty()))
	wantEvents(t, "an announcement of another term than its entry's", apply(l.leader(1, 3, 104)))
	wantEvents(t, "node 0", apply(l.leader(0, 2, 105)))
	wantEvents(t, "term 2's leader", apply(l.leader(1, 2, 106)), "3 consensus/leader wallet= path= ts=106 epoch=0 index=9")
	if m.LeaderTerm() != 2 {
		t.Fatalf("LeaderTerm %d, want 2", m.LeaderTerm())
	}
}

// TestLeaderTermSurvivesRestartAndRestore: the last announced term is
// state, so a repeat of its announcement is a no-op after a restart and on a
// validator restored from a snapshot, as on one that applied everything.
func TestLeaderTermSurvivesRestartAndRestore(t *testing.T) {
	l := newLog(t)
	l.term = 4
	l.empty()
	l.leader(2, 4, 50)
	l.batch(51, writeItem(1, alice, "a", `{}`))
	repeat := l.leader(2, 4, 52) // proposed again: raft lost nothing after all

	dir := t.TempDir()
	db, m := openMachine(t, dir)
	mustApply(t, m, l.entries[:3]...)
	m = reopen(t, db, dir)
	if m.LeaderTerm() != 4 {
		t.Fatalf("LeaderTerm after a restart %d, want 4", m.LeaderTerm())
	}
	restored := newMachine(t)
	if err := snapshotOf(t, m, 4).restore(restored); err != nil {
		t.Fatal(err)
	}
	if restored.LeaderTerm() != 4 {
		t.Fatalf("LeaderTerm after a restore %d, want 4", restored.LeaderTerm())
	}
	ref := newMachine(t)
	mustApply(t, ref, l.entries...)
	for name, mm := range map[string]*Machine{"restarted": m, "restored": restored} {
		last := mm.LastEventID()
		mustApply(t, mm, repeat)
		if got := eventsAfter(t, mm, last); len(got) != 0 {
			t.Fatalf("%s: the repeated announcement emitted %v", name, got)
		}
		if mm.StateHash() != ref.StateHash() || mm.LastEventID() != ref.LastEventID() || ref.LastEventID() != 2 {
			t.Fatalf("%s: state differs from an uninterrupted run", name)
		}
	}
	// Both go on alike: the next term is announced.
	l.term = 5
	next := l.leader(1, 5, 60)
	for _, mm := range []*Machine{m, restored, ref} {
		mustApply(t, mm, next)
	}
	if !proto.Equal(lastEvent(t, m), lastEvent(t, ref)) || !proto.Equal(lastEvent(t, restored), lastEvent(t, ref)) ||
		lastEvent(t, ref).GetAction() != EventActionLeader || m.StateHash() != ref.StateHash() || restored.StateHash() != ref.StateHash() {
		t.Fatal("the next term's announcement differs after a restart or a restore")
	}
}

func lastEvent(t testing.TB, m *Machine) *ledgerpb.Event {
	t.Helper()
	evs, err := m.EventsSince(m.LastEventID()-1, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("last event: %v %v", evs, err)
	}
	return evs[0]
}
