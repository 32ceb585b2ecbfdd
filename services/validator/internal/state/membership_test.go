package state

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// TestMembershipAddressBook: a member added with its ledgerpb.Member as the
// context is recorded, whether voter or learner, and dropped when removed,
// its id then marked removed for good (adding it again records nothing);
// a context naming another member, one that does not decode, a bootstrap
// change without one and an update record nothing. The state hash of the
// log is pinned like TestStateHashGolden's.
func TestMembershipAddressBook(t *testing.T) {
	const want = "bd67f9ef7a8872d5f680ffb08465c673deecaf04607d1de1d019de0010188a21"
	member := func(id uint64, peer, api string) []byte {
		b, err := proto.Marshal(&ledgerpb.Member{Id: id, PeerAddr: peer, ApiUrl: api})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	change := func(typ MemberChangeType, id uint64) MemberChange { return MemberChange{Type: typ, NodeID: id} }
	l := newLog(t)
	l.membership(nil, change(AddVoter, 1))
	l.membership(member(2, "10.0.0.2:7090", "http://10.0.0.2:8090"), change(AddVoter, 2))
	l.membership(member(3, "10.0.0.3:7090", "http://10.0.0.3:8090"), change(AddLearner, 3))
	l.membership(member(5, "10.0.0.5:7090", "http://x"), change(AddVoter, 4)) // names another member
	l.membership([]byte{0xff, 0x01}, change(AddVoter, 6))                     // does not decode
	l.empty()
	l.membership(member(7, "10.0.0.7:7090", "http://10.0.0.7:8090"), change(AddVoter, 7), change(RemoveMember, 2))
	l.membership(nil) // leaves a joint configuration
	l.membership(member(3, "10.9.9.3:7090", "http://other"), change(UpdateMember, 3))
	l.membership(nil, change(RemoveMember, 3))
	l.membership(member(3, "10.0.0.33:7090", "http://10.0.0.33:8090"), change(AddVoter, 3)) // removed: refused
	l.membership(nil, change(RemoveMember, 3))                                              // marked once

	m := newMachine(t)
	// One entry per call, and all in one call, write the same state.
	for _, e := range l.entries {
		mustApply(t, m, e)
	}
	all := newMachine(t)
	mustApply(t, all, l.entries...)
	sameState(t, all, m)

	book, err := m.Members()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range book {
		got = append(got, fmt.Sprintf("%d %s %s", b.GetId(), b.GetPeerAddr(), b.GetApiUrl()))
	}
	if fmt.Sprint(got) != "[7 10.0.0.7:7090 http://10.0.0.7:8090]" {
		t.Fatalf("address book %q", got)
	}
	removed, err := m.RemovedMembers()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(removed) != "[2 3]" {
		t.Fatalf("removed members %v, want [2 3]", removed)
	}
	for id, want := range map[uint64]bool{1: false, 2: true, 3: true, 7: false} {
		if got, err := m.WasRemoved(id); err != nil || got != want {
			t.Fatalf("WasRemoved(%d) = %v, %v; want %v", id, got, err, want)
		}
	}
	if h := m.StateHash(); bytesHex(h[:]) != want {
		t.Fatalf("state hash of the membership log = %x, pinned %s", h, want)
	}
}
