package app

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// membership keeps this validator's view of the cluster's members and its
// transport's peers in line with the replicated address book: members join
// and leave through raft conf changes whose context carries their
// addresses (ledgerpb.Member), the state machine records them, and every
// validator, a restarted or snapshot-restored one included, dials what the
// book says. Until the book has entries (a node joining an existing cluster
// before it has caught up), the configured initial cluster stands in.
type membership struct {
	self    uint64
	machine *state.Machine
	peers   *transport.Transport
	log     *zap.Logger

	mu      sync.RWMutex
	members []api.Member // sorted by id
}

func newMembership(self uint64, initial []Member, machine *state.Machine, peers *transport.Transport, log *zap.Logger) *membership {
	m := &membership{self: self, machine: machine, peers: peers, log: log}
	for _, im := range initial {
		m.members = append(m.members, api.Member{ID: im.ID, Name: api.NodeName(im.ID), PeerAddr: im.PeerAddr, APIURL: im.APIURL})
	}
	return m
}

// memberContext is the conf change context that introduces a member.
func memberContext(m Member) []byte {
	b, err := proto.Marshal(&ledgerpb.Member{Id: m.ID, PeerAddr: m.PeerAddr, ApiUrl: m.APIURL})
	if err != nil {
		panic(fmt.Sprintf("marshalling a member: %v", err)) // cannot fail for this message
	}
	return b
}

// Members returns the current members, this one included.
func (m *membership) Members() []api.Member {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.members)
}

// run reconciles after every apply until ctx ends.
func (m *membership) run(ctx context.Context) {
	for {
		changed := m.machine.Changed()
		m.reconcile()
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// reconcile reads the address book and brings the member list and the
// transport's peers in line with it.
func (m *membership) reconcile() {
	book, err := m.machine.Members()
	if err != nil {
		m.log.Error("reading the cluster's address book", zap.Error(err))
		return
	}
	if len(book) == 0 {
		return // not caught up yet: keep the configured members
	}
	next := make([]api.Member, 0, len(book))
	for _, b := range book {
		next = append(next, api.Member{ID: b.GetId(), Name: api.NodeName(b.GetId()), PeerAddr: b.GetPeerAddr(), APIURL: b.GetApiUrl()})
	}
	m.mu.Lock()
	prev := m.members
	m.members = next
	m.mu.Unlock()
	if slices.Equal(prev, next) {
		return
	}
	m.log.Info("cluster members changed", zap.Any("members", next))
	known := m.peers.Peers()
	for _, mem := range next {
		if mem.ID == m.self {
			continue
		}
		var err error
		switch addr, ok := known[mem.ID]; {
		case !ok:
			err = m.peers.AddPeer(mem.ID, mem.PeerAddr)
		case addr != mem.PeerAddr:
			err = m.peers.UpdatePeer(mem.ID, mem.PeerAddr)
		}
		if err != nil {
			m.log.Warn("updating raft peer", zap.Uint64("peer", mem.ID), zap.Error(err))
		}
	}
	for id := range known {
		if !slices.ContainsFunc(next, func(mem api.Member) bool { return mem.ID == id }) {
			if err := m.peers.RemovePeer(id); err != nil {
				m.log.Warn("removing raft peer", zap.Uint64("peer", id), zap.Error(err))
			}
		}
	}
}

// confChangeWait bounds how long a membership route waits for raft to
// install its change.
const confChangeWait = 10 * time.Second

// AddMember proposes adding m as a voter and waits until raft installs it.
func (v *clusterView) AddMember(ctx context.Context, m api.Member) error {
	cc := &raftpb.ConfChange{
		Type:    raftpb.ConfChangeAddNode.Enum(),
		NodeId:  proto.Uint64(m.ID),
		Context: memberContext(Member{ID: m.ID, PeerAddr: m.PeerAddr, APIURL: m.APIURL}),
	}
	return v.changeMembership(ctx, cc, func(voters []uint64) bool { return slices.Contains(voters, m.ID) })
}

// RemoveMember proposes removing id and waits until raft installs it.
func (v *clusterView) RemoveMember(ctx context.Context, id uint64) error {
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)}
	return v.changeMembership(ctx, cc, func(voters []uint64) bool { return !slices.Contains(voters, id) })
}

// changeMembership proposes cc and polls the installed membership: raft
// drops a conf change while another is pending, so a change that does not
// show up in time is reported as retryable.
func (v *clusterView) changeMembership(ctx context.Context, cc *raftpb.ConfChange, installed func(voters []uint64) bool) error {
	ctx, cancel := context.WithTimeout(ctx, confChangeWait)
	defer cancel()
	if err := v.node.ProposeConfChange(ctx, cc); err != nil {
		return apierror.New(apierror.LeaderUnknown, "proposing the membership change: %v", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if installed(v.node.ConfState().GetVoters()) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return apierror.New(apierror.Timeout, "the membership change was not installed within %s (another change may be in progress); retry", confChangeWait)
		}
	}
}
