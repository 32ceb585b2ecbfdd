package state

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func registerEntry(l *testLog, id string, wallet common.Address, atMs int64) *Entry {
	return l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_ClientRegister{ClientRegister: &ledgerpb.ClientRegister{
		ClientId: id, Wallet: wallet[:], Signature: bytes.Repeat([]byte{1}, 65), AtMs: atMs}}})
}

// TestClientRegister: a client id binds once, to the first wallet; the cap
// per wallet holds; malformed ops change nothing; two machines fed the same
// log end with the same state hash.
func TestClientRegister(t *testing.T) {
	alice, bob := common.Address{0xa1}, common.Address{0xb0}
	l := newLog(t)
	entries := []*Entry{
		registerEntry(l, "app-1", alice, 10),
		registerEntry(l, "app-1", alice, 11), // repeat: nothing
		registerEntry(l, "app-1", bob, 12),   // bound elsewhere: nothing
		registerEntry(l, "bad/id", alice, 13),
		l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_ClientRegister{ClientRegister: &ledgerpb.ClientRegister{ClientId: "short-wallet", Wallet: alice[:5], Signature: make([]byte, 65)}}}),
	}
	for i := range MaxClientsPerWallet + 1 { // app-1 and these: one past the cap
		entries = append(entries, registerEntry(l, fmt.Sprintf("bob-%02d", i), bob, int64(20+i)))
	}
	m, twin := newMachine(t), newMachine(t)
	mustApply(t, m, entries...)
	mustApply(t, twin, entries...)
	if m.StateHash() != twin.StateHash() {
		t.Fatal("two machines applying the same log differ")
	}
	b, err := m.ClientBinding("app-1")
	if err != nil || b == nil {
		t.Fatalf("app-1: %v, %v", b, err)
	}
	if common.Address(b.GetWallet()) != alice || b.GetIndex() != 1 || b.GetAtMs() != 10 {
		t.Errorf("app-1 bound to %x at index %d, %d ms; want alice at 1, 10", b.GetWallet(), b.GetIndex(), b.GetAtMs())
	}
	for _, id := range []string{"bad/id", "short-wallet", fmt.Sprintf("bob-%02d", MaxClientsPerWallet)} {
		if b, err := m.ClientBinding(id); err != nil || b != nil {
			t.Errorf("%s bound: %v, %v", id, b, err)
		}
	}
	if n, err := m.WalletClients(bob); err != nil || n != MaxClientsPerWallet {
		t.Errorf("bob has %d clients (%v), want the cap %d", n, err, MaxClientsPerWallet)
	}
	if n, _ := m.WalletClients(alice); n != 1 {
		t.Errorf("alice has %d clients, want 1", n)
	}
}

// TestSegmentHead: the head at an index is the newest segment at or below
// it, with the hash SegmentHash had right after it.
func TestSegmentHead(t *testing.T) {
	m := newMachine(t)
	w := common.Address{0xa1}
	l := newLog(t)
	if _, _, ok, err := m.SegmentHead(10); ok || err != nil {
		t.Fatalf("empty state has a head: %v, %v", ok, err)
	}
	mustApply(t, m, l.batch(1, writeItem(1, w, "a", `{"x":1}`)))
	first := m.SegmentHash()
	mustApply(t, m, l.empty(), l.batch(2, writeItem(2, w, "b", `{"x":2}`)))
	for _, c := range []struct {
		at, want uint64
		hash     [32]byte
	}{{1, 1, first}, {2, 1, first}, {3, 3, m.SegmentHash()}, {100, 3, m.SegmentHash()}} {
		idx, h, ok, err := m.SegmentHead(c.at)
		if err != nil || !ok || idx != c.want || h != c.hash {
			t.Errorf("head at %d: %d %x %v %v; want %d %x", c.at, idx, h, ok, err, c.want, c.hash)
		}
	}
}

// TestClientBindingsInSnapshots: a restored snapshot holds the bindings,
// and its machine goes on deciding registrations alike.
func TestClientBindingsInSnapshots(t *testing.T) {
	alice, bob := common.Address{0xa1}, common.Address{0xb0}
	l := newLog(t)
	src := newMachine(t)
	mustApply(t, src, registerEntry(l, "app-1", alice, 1), registerEntry(l, "app-2", bob, 2))
	snap := snapshotOf(t, src, 1)
	dst := newMachine(t)
	if err := snap.restore(dst); err != nil {
		t.Fatal(err)
	}
	sameState(t, dst, src)
	next := registerEntry(l, "app-1", bob, 3) // bound elsewhere: nothing
	mustApply(t, src, next)
	mustApply(t, dst, next)
	if b, err := dst.ClientBinding("app-1"); err != nil || b == nil || common.Address(b.GetWallet()) != alice {
		t.Fatalf("app-1 after the restore: %v %v", b, err)
	}
	sameState(t, dst, src)
}
