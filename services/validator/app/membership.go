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
// transport's peers in line with raft's membership. Who is a member is
// raft's ConfState; where a member is comes from the replicated address
// book for members added at run time (their conf change carries a
// ledgerpb.Member), and from this validator's own SVC_VALIDATOR_INITIAL_CLUSTER
// for the bootstrap members. Bootstrap conf changes carry no addresses on
// purpose: every node creates them itself, so they must be identical
// everywhere, while the addresses one node dials may legitimately differ
// from another's (proxies, NAT, names).
type membership struct {
	self    uint64
	machine *state.Machine
	raft    confStater
	peers   *transport.Transport
	log     *zap.Logger
	initial map[uint64]api.Member

	mu      sync.RWMutex
	members []api.Member // sorted by id

	lastIDs []uint64 // raft membership at the last reconcile; touched by run only
}

// confStater tells raft's current membership.
type confStater interface {
	ConfState() *raftpb.ConfState
}

func newMembership(self uint64, initial []Member, machine *state.Machine, raft confStater, peers *transport.Transport, log *zap.Logger) *membership {
	m := &membership{self: self, machine: machine, raft: raft, peers: peers, log: log, initial: map[uint64]api.Member{}}
	for _, im := range initial {
		mem := api.Member{ID: im.ID, Name: api.NodeName(im.ID), PeerAddr: im.PeerAddr, APIURL: im.APIURL}
		m.initial[im.ID] = mem
		m.members = append(m.members, mem)
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

// reconcile brings the member list and the transport's peers in line with
// raft's membership and the address book.
func (m *membership) reconcile() {
	cs := m.raft.ConfState()
	ids := append(append([]uint64{}, cs.GetVoters()...), cs.GetLearners()...)
	if len(ids) == 0 {
		return // nothing installed yet: keep the configured members
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// The address book changes only with a conf change, so an apply that
	// left raft's membership alone needs no reading of it.
	if slices.Equal(ids, m.lastIDs) {
		return
	}
	book, err := m.machine.Members()
	if err != nil {
		m.log.Error("reading the cluster's address book", zap.Error(err))
		return
	}
	known := make(map[uint64]api.Member, len(book))
	for _, b := range book {
		known[b.GetId()] = api.Member{ID: b.GetId(), Name: api.NodeName(b.GetId()), PeerAddr: b.GetPeerAddr(), APIURL: b.GetApiUrl()}
	}
	next := make([]api.Member, 0, len(ids))
	complete := true
	for _, id := range ids {
		mem, ok := known[id]
		if !ok {
			mem, ok = m.initial[id]
		}
		if !ok {
			// Raft installs a member just before apply records its
			// address: look again after the next apply.
			mem, complete = api.Member{ID: id, Name: api.NodeName(id)}, false
		}
		next = append(next, mem)
	}
	if complete {
		m.lastIDs = ids
	}
	m.mu.Lock()
	prev := m.members
	m.members = next
	m.mu.Unlock()
	if slices.Equal(prev, next) {
		return
	}
	m.log.Info("cluster members changed", zap.Any("members", next))
	dialing := m.peers.Peers()
	for _, mem := range next {
		if mem.ID == m.self || mem.PeerAddr == "" {
			continue
		}
		var err error
		switch addr, ok := dialing[mem.ID]; {
		case !ok:
			err = m.peers.AddPeer(mem.ID, mem.PeerAddr)
		case addr != mem.PeerAddr:
			err = m.peers.UpdatePeer(mem.ID, mem.PeerAddr)
		}
		if err != nil {
			m.log.Warn("updating raft peer", zap.Uint64("peer", mem.ID), zap.Error(err))
		}
	}
	for id := range dialing {
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
