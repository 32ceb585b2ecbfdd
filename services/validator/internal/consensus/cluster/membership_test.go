package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// describeMembers renders members as "id name peer api" strings.
func describeMembers(ms []api.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%d %s %s %s", m.ID, m.Name, m.PeerAddr, m.APIURL)
	}
	return out
}

func checkMembers(t *testing.T, m *Membership, want ...string) {
	t.Helper()
	if got := describeMembers(m.Members()); !slices.Equal(got, want) {
		t.Fatalf("members %q, want %q", got, want)
	}
}

func checkCalls(t *testing.T, tr *fakeTransport, want ...string) {
	t.Helper()
	if got := tr.takeCalls(); !slices.Equal(got, want) {
		t.Fatalf("transport calls %q, want %q", got, want)
	}
}

// TestMembershipReconcile walks a membership through its cases against a
// fake transport: the bootstrap members from the configuration, a member
// added at run time, a member whose address is not applied yet, an address
// that changed, and removals.
func TestMembershipReconcile(t *testing.T) {
	node := newFakeNode()
	book := newFakeBook()
	// The wiring registered the bootstrap peers before raft started.
	tr := newFakeTransport(map[uint64]string{2: "10.0.0.2:7090"})
	m := NewMembership(MembershipConfig{Self: 1, Raft: node, AddressBook: book, Peers: tr, Initial: []api.Member{
		{ID: 1, PeerAddr: "10.0.0.1:7090", APIURL: "http://v1"},
		{ID: 2, PeerAddr: "10.0.0.2:7090", APIURL: "http://v2"},
	}})
	initial := []string{"1 validator-1 10.0.0.1:7090 http://v1", "2 validator-2 10.0.0.2:7090 http://v2"}
	checkMembers(t, m, initial...)

	// Nothing installed yet: the configured members stay.
	m.reconcile()
	checkMembers(t, m, initial...)
	checkCalls(t, tr)

	// The bootstrap conf changes, without addresses: the configuration
	// tells where the members are, and the transport already dials them.
	node.setConfState([]uint64{1, 2}, nil)
	m.reconcile()
	checkMembers(t, m, initial...)
	checkCalls(t, tr)

	// Raft installs member 3 just before apply records its address: it is
	// listed without one, and not dialled...
	node.setConfState([]uint64{1, 2, 3}, nil)
	m.reconcile()
	checkMembers(t, m, append(initial, "3 validator-3  ")...)
	checkCalls(t, tr)
	// ...until the next apply brings the address, although raft's
	// membership did not change in between.
	book.set(3, "10.0.0.3:7090", "http://v3")
	m.reconcile()
	withThree := append(slices.Clone(initial), "3 validator-3 10.0.0.3:7090 http://v3")
	checkMembers(t, m, withThree...)
	checkCalls(t, tr, "add 3 10.0.0.3:7090")

	// An apply that leaves raft's membership alone reads nothing.
	reads := book.reads
	m.reconcile()
	if book.reads != reads {
		t.Fatal("the address book was read again for an unchanged membership")
	}
	checkCalls(t, tr)

	// Member 3 is replaced at another address (removed, then added with
	// its new context); meanwhile member 2 was added again at run time,
	// so the address book overrides this node's configuration for it.
	node.setConfState([]uint64{1, 2}, nil)
	book.set(3, "", "")
	m.reconcile()
	checkMembers(t, m, initial...)
	checkCalls(t, tr, "remove 3")
	book.set(2, "10.9.9.2:7090", "http://v2b")
	book.set(3, "10.9.9.3:7090", "http://v3b")
	node.setConfState([]uint64{1, 2}, []uint64{3}) // 3 comes back as a learner
	m.reconcile()
	checkMembers(t, m, "1 validator-1 10.0.0.1:7090 http://v1", "2 validator-2 10.9.9.2:7090 http://v2b",
		"3 validator-3 10.9.9.3:7090 http://v3b")
	checkCalls(t, tr, "update 2 10.9.9.2:7090", "add 3 10.9.9.3:7090")

	// Removing member 2 stops dialling it; this node is never dialled.
	node.setConfState([]uint64{1}, []uint64{3})
	m.reconcile()
	checkMembers(t, m, "1 validator-1 10.0.0.1:7090 http://v1", "3 validator-3 10.9.9.3:7090 http://v3b")
	checkCalls(t, tr, "remove 2")
}

// TestMembershipRun: Run reconciles after each apply and returns when its
// context ends.
func TestMembershipRun(t *testing.T) {
	node := newFakeNode(1)
	book := newFakeBook()
	tr := newFakeTransport(nil)
	m := NewMembership(MembershipConfig{Self: 1, Raft: node, AddressBook: book, Peers: tr,
		Initial: []api.Member{{ID: 1, PeerAddr: "10.0.0.1:7090", APIURL: "http://v1"}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	node.setConfState([]uint64{1, 4}, nil)
	book.set(4, "10.0.0.4:7090", "http://v4")
	waitFor(t, "member 4 listed", func() bool { return len(m.Members()) == 2 && m.Members()[1].PeerAddr == "10.0.0.4:7090" })
	cancel()
	<-done
	if got := tr.Peers(); len(got) != 1 || got[4] != "10.0.0.4:7090" {
		t.Fatalf("transport peers %v", got)
	}
}

func TestMemberContext(t *testing.T) {
	var got ledgerpb.Member
	if err := proto.Unmarshal(memberContext(api.Member{ID: 5, Name: "ignored", PeerAddr: "h:1", APIURL: "http://h"}), &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, &ledgerpb.Member{Id: 5, PeerAddr: "h:1", ApiUrl: "http://h"}) {
		t.Fatalf("context %v", &got)
	}
}
