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
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
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
// installed its change, and how often the leader's progress is sampled
// for reachable voters.
const confChangePoll = 20 * time.Millisecond

// AddMember adds m as a learner, when the rules allow (CheckAdd), and waits
// until raft installs it. The leader promotes it once it is caught up
// (RunPromotions), or an operator does (PromoteMember).
func (v *View) AddMember(ctx context.Context, m api.Member) error {
	cc := &raftpb.ConfChange{
		Type:    raftpb.ConfChangeAddLearnerNode.Enum(),
		NodeId:  proto.Uint64(m.ID),
		Context: memberContext(m),
	}
	return v.changeMembership(ctx, func(f Facts) error { return CheckAdd(f, v.limits, m.ID) }, cc,
		func(cs *raftpb.ConfState) bool { return slices.Contains(cs.GetLearners(), m.ID) })
}

// PromoteMember makes the learner id a voter, when the rules allow
// (CheckPromote: it is caught up and the larger configuration has a
// reachable quorum), and waits until raft installs it.
func (v *View) PromoteMember(ctx context.Context, id uint64) error {
	// No context: the address book keeps what the learner's addition
	// recorded.
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(id)}
	return v.changeMembership(ctx, func(f Facts) error { return CheckPromote(f, v.limits, id) }, cc,
		func(cs *raftpb.ConfState) bool { return slices.Contains(cs.GetVoters(), id) })
}

// RemoveMember removes id, when the rules allow (CheckRemove), and waits
// until raft installs it.
func (v *View) RemoveMember(ctx context.Context, id uint64) error {
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)}
	return v.changeMembership(ctx, func(f Facts) error { return CheckRemove(f, id) }, cc, func(cs *raftpb.ConfState) bool {
		return !slices.Contains(cs.GetVoters(), id) && !slices.Contains(cs.GetLearners(), id)
	})
}

// RunPromotions promotes, on the leader, every learner that is caught up
// and whose promotion the rules allow, every ViewConfig.PromoteEvery until
// ctx ends. Run it once.
func (v *View) RunPromotions(ctx context.Context) {
	tick := time.NewTicker(v.promoteEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if st := v.node.Status(); st.Role != consensus.RoleLeader {
			continue
		}
		for _, id := range v.node.ConfState().GetLearners() {
			f, err := v.facts()
			if err != nil || CheckPromote(f, v.limits, id) != nil {
				continue
			}
			if err := v.PromoteMember(ctx, id); err != nil {
				v.log.Warn("promoting a caught-up learner", zap.Uint64("learner", id), zap.Error(err))
				continue
			}
			v.log.Info("promoted a caught-up learner to voter", zap.Uint64("member", id))
		}
	}
}

// facts gathers what the rules decide on. Only the leader has them: raft's
// progress of the members is the leader's.
func (v *View) facts() (Facts, error) {
	notLeader := apierror.New(apierror.LeaderUnknown, "this validator is not the leader; membership changes are made on the leader")
	if st := v.node.Status(); st.Role != consensus.RoleLeader {
		return Facts{}, notLeader
	}
	progress := v.node.Progress()
	if progress == nil {
		return Facts{}, notLeader
	}
	pending, err := v.node.PendingConfChange()
	if err != nil {
		return Facts{}, apierror.New(apierror.Internal, "reading the raft log for a pending membership change: %v", err)
	}
	removed, err := v.removed.RemovedMembers()
	if err != nil {
		return Facts{}, apierror.New(apierror.Internal, "reading the removed members: %v", err)
	}
	cs := v.node.ConfState()
	return Facts{Leader: v.nodeID, Voters: cs.GetVoters(), Learners: cs.GetLearners(), Removed: removed,
		// A joint configuration is a change still under way.
		Pending:  pending || len(cs.GetVotersOutgoing()) > 0,
		Progress: progress}, nil
}

// decide applies check to the facts. Raft clears every follower's recent
// activity once per election timeout and sets it again at its next answer,
// so a refusal for want of reachable voters is looked at again with the
// activity seen over ViewConfig.ActivityWindow: a voter counts when it
// answered at any time within it.
func (v *View) decide(ctx context.Context, check func(Facts) error) error {
	f, err := v.facts()
	if err != nil {
		return err
	}
	err = check(f)
	if e := apierror.As(err); e == nil || e.Details["reason"] != ReasonNoQuorum {
		return err
	}
	deadline := time.Now().Add(v.activityWindow)
	for time.Now().Before(deadline) {
		select {
		case <-time.After(confChangePoll):
		case <-ctx.Done():
			return err
		}
		for _, p := range v.node.Progress() {
			if i := slices.IndexFunc(f.Progress, func(q consensus.FollowerProgress) bool { return q.ID == p.ID }); i >= 0 && p.RecentActive {
				f.Progress[i].RecentActive = true
			}
		}
		if err = check(f); err == nil {
			return nil
		}
	}
	return err
}

// changeMembership decides on, proposes and waits for one membership
// change. Changes made through this validator are serialized, so that each
// is decided on a membership that the previous one no longer changes; raft
// itself drops a conf change proposed while another is not applied, which
// covers changes proposed elsewhere.
func (v *View) changeMembership(ctx context.Context, check func(Facts) error, cc *raftpb.ConfChange, installed func(*raftpb.ConfState) bool) error {
	ctx, cancel := context.WithTimeout(ctx, confChangeWait)
	defer cancel()
	select {
	case v.changing <- struct{}{}:
		defer func() { <-v.changing }()
	case <-ctx.Done():
		return apierror.New(apierror.Timeout, "another membership change through this validator did not finish within %s; retry", confChangeWait)
	}
	if err := v.decide(ctx, check); err != nil {
		return err
	}
	if err := v.node.ProposeConfChange(ctx, cc); err != nil {
		return apierror.New(apierror.LeaderUnknown, "proposing the membership change: %v", err)
	}
	tick := time.NewTicker(confChangePoll)
	defer tick.Stop()
	for {
		if installed(v.node.ConfState()) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return apierror.New(apierror.Timeout, "the membership change was not installed within %s (another change may be in progress); retry", confChangeWait)
		}
	}
}
