package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/epoch"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// The validator's real parts are what the interfaces declare.
var (
	_ Node           = (*consensus.Node)(nil)
	_ RaftStatus     = (*consensus.Node)(nil)
	_ AddressBook    = (*state.Machine)(nil)
	_ RemovedIDs     = (*state.Machine)(nil)
	_ StateHashes    = (*state.Machine)(nil)
	_ Peers          = (*transport.Transport)(nil)
	_ TransportStats = (*transport.Transport)(nil)
	_ Epochs         = (*epoch.Clock)(nil)
	_ Rate           = (*rate.Meter)(nil)
	_ LeaderEvents   = (*opsevents.Recorder)(nil)
)

// fakeNode is a raft node whose membership and status the test sets. A
// proposed conf change is recorded and, when install is set, installed at
// once.
type fakeNode struct {
	mu         sync.Mutex
	cs         *raftpb.ConfState
	status     consensus.Status
	reads      int // of the status
	leaderSig  chan struct{}
	proposed   []raftpb.ConfChangeI
	proposeErr error
	install    bool
	first      uint64
	last       uint64
	snapshot   uint64
	progress   []consensus.FollowerProgress
	pending    bool
}

func (n *fakeNode) PendingConfChange() (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pending, nil
}

func (n *fakeNode) setProgress(p ...consensus.FollowerProgress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.progress = p
}

func newFakeNode(voters ...uint64) *fakeNode {
	return &fakeNode{cs: &raftpb.ConfState{Voters: voters}, leaderSig: make(chan struct{}),
		status: consensus.Status{ID: 1, Role: consensus.RoleFollower}}
}

func (n *fakeNode) ConfState() *raftpb.ConfState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return proto.Clone(n.cs).(*raftpb.ConfState)
}

func (n *fakeNode) setConfState(voters, learners []uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cs = &raftpb.ConfState{Voters: voters, Learners: learners}
}

func (n *fakeNode) Status() consensus.Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads++
	return n.status
}

func (n *fakeNode) statusReads() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reads
}

func (n *fakeNode) LeaderChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leaderSig
}

// setStatus changes the status and signals LeaderChanged, as the node does
// for a change of leader or role.
func (n *fakeNode) setStatus(st consensus.Status) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.status = st
	close(n.leaderSig)
	n.leaderSig = make(chan struct{})
}

func (n *fakeNode) LogBounds() (first, last, snapshot uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.first, n.last, n.snapshot
}

func (n *fakeNode) Progress() []consensus.FollowerProgress {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.progress)
}

func (n *fakeNode) ProposeConfChange(_ context.Context, cc raftpb.ConfChangeI) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proposeErr != nil {
		return n.proposeErr
	}
	n.proposed = append(n.proposed, cc)
	if !n.install {
		return nil
	}
	c, _ := cc.AsV1()
	switch c.GetType() {
	case raftpb.ConfChangeAddNode:
		n.cs.Learners = slices.DeleteFunc(n.cs.Learners, func(id uint64) bool { return id == c.GetNodeId() })
		if !slices.Contains(n.cs.Voters, c.GetNodeId()) {
			n.cs.Voters = append(n.cs.Voters, c.GetNodeId())
		}
	case raftpb.ConfChangeAddLearnerNode:
		if !slices.Contains(n.cs.Learners, c.GetNodeId()) {
			n.cs.Learners = append(n.cs.Learners, c.GetNodeId())
		}
	case raftpb.ConfChangeRemoveNode:
		n.cs.Voters = slices.DeleteFunc(n.cs.Voters, func(id uint64) bool { return id == c.GetNodeId() })
		n.cs.Learners = slices.DeleteFunc(n.cs.Learners, func(id uint64) bool { return id == c.GetNodeId() })
	}
	return nil
}

// fakeBook is the replicated address book.
type fakeBook struct {
	mu      sync.Mutex
	members map[uint64]*ledgerpb.Member
	changed chan struct{}
	reads   int
}

func newFakeBook() *fakeBook {
	return &fakeBook{members: map[uint64]*ledgerpb.Member{}, changed: make(chan struct{})}
}

func (b *fakeBook) Members() ([]*ledgerpb.Member, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	var out []*ledgerpb.Member
	for _, id := range slices.Sorted(maps.Keys(b.members)) {
		out = append(out, proto.Clone(b.members[id]).(*ledgerpb.Member))
	}
	return out, nil
}

func (b *fakeBook) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// set records a member's address (peer "" removes it) and signals an
// apply.
func (b *fakeBook) set(id uint64, peer, api string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if peer == "" {
		delete(b.members, id)
	} else {
		b.members[id] = &ledgerpb.Member{Id: id, PeerAddr: peer, ApiUrl: api}
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// fakeTransport records what the membership asks of the transport.
type fakeTransport struct {
	mu    sync.Mutex
	peers map[uint64]string
	calls []string
	stats map[uint64]transport.PeerStats
}

func newFakeTransport(peers map[uint64]string) *fakeTransport {
	if peers == nil {
		peers = map[uint64]string{}
	}
	return &fakeTransport{peers: peers}
}

func (t *fakeTransport) Peers() map[uint64]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.peers)
}

func (t *fakeTransport) AddPeer(id uint64, addr string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, fmt.Sprintf("add %d %s", id, addr))
	t.peers[id] = addr
	return nil
}

func (t *fakeTransport) UpdatePeer(id uint64, addr string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, fmt.Sprintf("update %d %s", id, addr))
	t.peers[id] = addr
	return nil
}

func (t *fakeTransport) RemovePeer(id uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, fmt.Sprintf("remove %d", id))
	delete(t.peers, id)
	return nil
}

// takeCalls returns the calls since the last take.
func (t *fakeTransport) takeCalls() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.calls
	t.calls = nil
	return out
}

func (t *fakeTransport) Stats() map[uint64]transport.PeerStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.stats)
}

func (t *fakeTransport) Totals() transport.Totals {
	t.mu.Lock()
	defer t.mu.Unlock()
	return transport.Totals{Peers: len(t.peers), MsgsSent: 7}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
