// Package cluster is this validator's view of its raft cluster: the member
// list and the peer transport's peers kept in line with raft's membership
// (Membership), the leader changes this node saw (LeadershipLog), and the
// consensus routes' answers built from them (View, the API's Cluster).
//
// It declares what it uses of the raft node, the state machine, the peer
// transport and the epoch clock as small interfaces; the validator's wiring
// passes the real ones. See DESIGN.md.
package cluster

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
)

// ConfStater tells raft's current membership (consensus.Node).
type ConfStater interface {
	ConfState() *raftpb.ConfState
}

// AddressBook is the replicated address book of the members added at run
// time, and the signal that it may have changed (state.Machine).
type AddressBook interface {
	Members() ([]*ledgerpb.Member, error)
	// Changed is closed after the next apply.
	Changed() <-chan struct{}
}

// Peers is the peer transport's set of raft peers (transport.Transport).
type Peers interface {
	// Peers returns the address of every peer, by raft id.
	Peers() map[uint64]string
	AddPeer(id uint64, addr string) error
	UpdatePeer(id uint64, addr string) error
	RemovePeer(id uint64) error
}

// MembershipConfig configures a Membership. Raft, AddressBook and Peers are
// required.
type MembershipConfig struct {
	// Self is this node's raft id: never a peer of its own transport.
	Self uint64
	// Initial are the bootstrap members, from this validator's own
	// configuration: where to reach the members whose conf changes carry
	// no address. Their Name is set here.
	Initial []api.Member
	// Raft tells the membership.
	Raft ConfStater
	// AddressBook tells where members added at run time are.
	AddressBook AddressBook
	// Peers is the transport whose peers follow the membership.
	Peers Peers
	// Log receives membership changes. Default zap.NewNop().
	Log *zap.Logger
}

// Membership keeps this validator's view of the cluster's members and its
// transport's peers in line with raft's membership. Who is a member is
// raft's ConfState; where a member is comes from the replicated address
// book for members added at run time (their conf change carries a
// ledgerpb.Member), and from this validator's own configuration for the
// bootstrap members. Bootstrap conf changes carry no addresses on purpose:
// every node creates them itself, so they must be identical everywhere,
// while the addresses one node dials may legitimately differ from another's
// (proxies, NAT, names).
type Membership struct {
	self    uint64
	raft    ConfStater
	book    AddressBook
	peers   Peers
	log     *zap.Logger
	initial map[uint64]api.Member

	mu      sync.RWMutex
	members []api.Member // sorted by id

	lastIDs []uint64 // raft membership at the last complete reconcile; Run's goroutine only
}

// NewMembership returns the membership of cfg's initial members; Run keeps
// it in line with raft's from then on.
func NewMembership(cfg MembershipConfig) *Membership {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	m := &Membership{self: cfg.Self, raft: cfg.Raft, book: cfg.AddressBook, peers: cfg.Peers, log: log,
		initial: map[uint64]api.Member{}}
	for _, im := range cfg.Initial {
		mem := api.Member{ID: im.ID, Name: api.NodeName(im.ID), PeerAddr: im.PeerAddr, APIURL: im.APIURL}
		m.initial[im.ID] = mem
		m.members = append(m.members, mem)
	}
	return m
}

// memberContext is the conf change context that introduces a member: what
// state records in the address book.
func memberContext(m api.Member) []byte {
	b, err := proto.Marshal(&ledgerpb.Member{Id: m.ID, PeerAddr: m.PeerAddr, ApiUrl: m.APIURL})
	if err != nil {
		panic(fmt.Sprintf("marshalling a member: %v", err)) // cannot fail for this message
	}
	return b
}

// Members returns the current members, this one included.
func (m *Membership) Members() []api.Member {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.members)
}

// Run reconciles after every apply until ctx ends. It is the membership's
// goroutine: run it once.
func (m *Membership) Run(ctx context.Context) {
	for {
		changed := m.book.Changed()
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
func (m *Membership) reconcile() {
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
	book, err := m.book.Members()
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

// confChangePoll is how often a membership route looks whether raft
// installed its change.
const confChangePoll = 20 * time.Millisecond

// AddMember proposes adding m as a voter and waits until raft installs it.
func (v *View) AddMember(ctx context.Context, m api.Member) error {
	cc := &raftpb.ConfChange{
		Type:    raftpb.ConfChangeAddNode.Enum(),
		NodeId:  proto.Uint64(m.ID),
		Context: memberContext(m),
	}
	return v.changeMembership(ctx, cc, func(voters []uint64) bool { return slices.Contains(voters, m.ID) })
}

// RemoveMember proposes removing id and waits until raft installs it.
func (v *View) RemoveMember(ctx context.Context, id uint64) error {
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)}
	return v.changeMembership(ctx, cc, func(voters []uint64) bool { return !slices.Contains(voters, id) })
}

// changeMembership proposes cc and polls the installed membership: raft
// drops a conf change while another is pending, so a change that does not
// show up in time is reported as retryable.
func (v *View) changeMembership(ctx context.Context, cc *raftpb.ConfChange, installed func(voters []uint64) bool) error {
	ctx, cancel := context.WithTimeout(ctx, confChangeWait)
	defer cancel()
	if err := v.node.ProposeConfChange(ctx, cc); err != nil {
		return apierror.New(apierror.LeaderUnknown, "proposing the membership change: %v", err)
	}
	tick := time.NewTicker(confChangePoll)
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
