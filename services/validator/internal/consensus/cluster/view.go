package cluster

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// Node is what the view uses of the raft node (consensus.Node).
type Node interface {
	ConfStater
	Status() consensus.Status
	// LogBounds returns the first and last index of the stored log and the
	// index of the newest snapshot.
	LogBounds() (first, last, snapshot uint64)
	// Progress is the leader's view of every member, nil on a follower.
	Progress() []consensus.FollowerProgress
	ProposeConfChange(ctx context.Context, cc raftpb.ConfChangeI) error
	// PendingConfChange reports whether the log holds a conf change not
	// applied yet.
	PendingConfChange() (bool, error)
}

// RemovedIDs are the ids of the members a committed change removed
// (state.Machine).
type RemovedIDs interface {
	RemovedMembers() ([]uint64, error)
}

// StateHashes are the state machine's applied index and hashes
// (state.Machine).
type StateHashes interface {
	AppliedIndex() uint64
	StateHash() [32]byte
	StateHashAt(index uint64) ([32]byte, bool)
}

// TransportStats are the peer transport's figures (transport.Transport).
type TransportStats interface {
	Stats() map[uint64]transport.PeerStats
	Totals() transport.Totals
}

// Epochs tells the current epoch (epoch.Clock).
type Epochs interface {
	Current() uint64
}

// Rate is a measured rate per second (rate.Meter).
type Rate interface {
	PerSecond() float64
}

// DefaultActivityWindow is how long the leader watches its members'
// activity before it refuses a change for want of reachable voters: longer
// than a heartbeat interval and the answer to it.
const DefaultActivityWindow = 500 * time.Millisecond

// DefaultPromoteEvery is how often the leader looks for caught-up learners
// to promote.
const DefaultPromoteEvery = time.Second

// ViewConfig configures a View. Every field but StartedAt, Limits,
// ActivityWindow, PromoteEvery and Log is required.
type ViewConfig struct {
	NodeID    uint64
	ClusterID string
	// StartedAt is when this validator started. Default: now.
	StartedAt time.Time

	Node       Node
	State      StateHashes
	Epochs     Epochs
	Peers      TransportStats
	Membership *Membership
	Leadership *LeadershipLog
	// AppliedRate is the rate at which this node applies entries: it
	// turns the replication lag in entries into an estimate in time.
	AppliedRate Rate
	// Reproposed counts the proposals the pipeline had to propose again
	// (pipeline.Stats().Reproposed): raft dropped them.
	Reproposed func() uint64
	// Removed are the ids removed from the cluster, which never return.
	Removed RemovedIDs
	// Limits bound the membership rules. Zero fields default to
	// DefaultPromoteMargin and DefaultMaxLearners.
	Limits Limits
	// ActivityWindow: see DefaultActivityWindow (the default).
	ActivityWindow time.Duration
	// PromoteEvery: see DefaultPromoteEvery (the default).
	PromoteEvery time.Duration
	// Log receives the promotions. Default zap.NewNop().
	Log *zap.Logger
}

// View answers the consensus routes (the API's Cluster) from the raft node,
// the state machine, the transport and the member list. It has no goroutine
// of its own; every method may be called from any goroutine.
type View struct {
	nodeID     uint64
	clusterID  string
	startedAt  time.Time
	node       Node
	state      StateHashes
	epochs     Epochs
	peers      TransportStats
	membership *Membership
	leadership *LeadershipLog
	applied    Rate
	reproposed func() uint64

	removed        RemovedIDs
	limits         Limits
	activityWindow time.Duration
	promoteEvery   time.Duration
	log            *zap.Logger
	// changing holds a token while a membership change made through this
	// validator is decided, proposed and installed.
	changing chan struct{}
}

// NewView returns the view of cfg's parts.
func NewView(cfg ViewConfig) *View {
	if cfg.StartedAt.IsZero() {
		cfg.StartedAt = time.Now()
	}
	if cfg.Limits.PromoteMargin == 0 {
		cfg.Limits.PromoteMargin = DefaultPromoteMargin
	}
	if cfg.Limits.MaxLearners == 0 {
		cfg.Limits.MaxLearners = DefaultMaxLearners
	}
	if cfg.ActivityWindow == 0 {
		cfg.ActivityWindow = DefaultActivityWindow
	}
	if cfg.PromoteEvery == 0 {
		cfg.PromoteEvery = DefaultPromoteEvery
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &View{nodeID: cfg.NodeID, clusterID: cfg.ClusterID, startedAt: cfg.StartedAt, node: cfg.Node, state: cfg.State,
		epochs: cfg.Epochs, peers: cfg.Peers, membership: cfg.Membership, leadership: cfg.Leadership,
		applied: cfg.AppliedRate, reproposed: cfg.Reproposed, removed: cfg.Removed, limits: cfg.Limits,
		activityWindow: cfg.ActivityWindow, promoteEvery: cfg.PromoteEvery, log: cfg.Log, changing: make(chan struct{}, 1)}
}

// RaftMetrics are this node's raft figures.
func (v *View) RaftMetrics() api.RaftMetrics {
	st := v.node.Status()
	first, last, snap := v.node.LogBounds()
	history, changes := v.leadership.History()
	m := api.RaftMetrics{
		ContractVersion: api.RaftMetricsVersion, NodeID: v.nodeID, Role: string(st.Role), Term: st.Term, Leader: st.Leader,
		CommitIndex: st.CommitIndex, AppliedIndex: v.state.AppliedIndex(), FirstLogIndex: first, LastLogIndex: last,
		LastSnapshotIndex: snap, AppendRatePerSec: v.applied.PerSecond(), ProposalsDropped: v.reproposed(),
	}
	// An election is a change of leader; role changes of this node alone
	// are not counted.
	var prevLeader uint64
	dayAgo := time.Now().Add(-24 * time.Hour)
	for i, h := range history {
		if h.Leader != 0 && (i == 0 || h.Leader != prevLeader) {
			if h.At.After(dayAgo) {
				m.Elections.Count24h++
			}
			at := h.At
			m.Elections.LastAt = &at
		}
		if h.Leader != 0 {
			prevLeader = h.Leader
		}
	}
	m.Elections.Count = changes
	t := v.peers.Totals()
	m.Transport = &api.Transport{Peers: t.Peers, MsgsSent: t.MsgsSent, MsgsRecv: t.MsgsRecv, Dropped: t.Dropped,
		DroppedUnknownPeer: t.DroppedUnknownPeer, HandshakesRefused: t.HandshakesRefused, Timeouts: &t.Timeouts}
	return m
}

// StateHashAt is this node's state hash right after it applied index,
// while it still holds it.
func (v *View) StateHashAt(index uint64) (string, bool) {
	h, ok := v.state.StateHashAt(index)
	if !ok {
		return "", false
	}
	return common.Hash(h).Hex(), true
}

// Replication is the leader's view of every member's log.
func (v *View) Replication() api.ReplicationLag {
	st := v.node.Status()
	_, last, _ := v.node.LogBounds()
	out := api.ReplicationLag{ContractVersion: api.ReplicationLagVersion, NodeID: v.nodeID, Leader: st.Leader,
		IsLeader: st.Role == consensus.RoleLeader, LastIndex: last, Nodes: []api.ReplicationNode{}}
	rate := v.applied.PerSecond()
	for _, p := range v.node.Progress() {
		n := api.ReplicationNode{NodeID: p.ID, Name: api.NodeName(p.ID), MatchIndex: p.Match, NextIndex: p.Next, State: p.State,
			RecentActive: p.RecentActive, PendingSnapshot: p.PendingSnapshot, Learner: p.IsLearner}
		if last > p.Match {
			n.LagEntries = last - p.Match
			if rate > 0 {
				n.LagMs = int64(float64(n.LagEntries) / rate * 1000)
			}
		}
		out.MaxLagEntries = max(out.MaxLagEntries, n.LagEntries)
		out.Nodes = append(out.Nodes, n)
	}
	return out
}

// PeerTransport is the transport's view of a peer, nil for this node and
// for a node that is not a peer.
func (v *View) PeerTransport(id uint64) *api.PeerTransport {
	if id == v.nodeID {
		return nil
	}
	st, ok := v.peers.Stats()[id]
	if !ok {
		return nil
	}
	out := &api.PeerTransport{
		Connected: st.Connected, InboundConnected: st.InboundConnected, MsgsSent: st.MsgsSent, MsgsRecv: st.MsgsRecv,
		BytesSent: st.BytesSent, BytesRecv: st.BytesRecv, Dropped: st.Dropped, QueueDepth: st.QueueDepth,
		Reconnects: st.Reconnects, LastError: st.LastError, SnapshotsSent: st.SnapshotsSent,
		SnapshotsFailed: st.SnapshotsFailed, SnapshotsReceived: st.SnapshotsReceived, Timeouts: &st.Timeouts,
	}
	if !st.LastErrorAt.IsZero() {
		at := st.LastErrorAt.UTC()
		out.LastErrorAt = &at
	}
	return out
}

// Members lists the cluster's validators, this one included.
func (v *View) Members() []api.Member { return v.membership.Members() }

// StartedAt is when this validator started.
func (v *View) StartedAt() time.Time { return v.startedAt }

// LeadershipHistory lists the leader changes this node saw, and their count.
func (v *View) LeadershipHistory() ([]api.LeadershipChange, uint64) {
	return v.leadership.History()
}

// Membership is the voters and learners raft holds.
func (v *View) Membership() (voters, learners []uint64) {
	cs := v.node.ConfState()
	return append([]uint64{}, cs.GetVoters()...), append([]uint64{}, cs.GetLearners()...)
}

// Status is this node's consensus status.
func (v *View) Status() api.ConsensusStatus {
	st := v.node.Status()
	peers := []string{}
	for _, m := range v.membership.Members() {
		if m.ID != v.nodeID {
			peers = append(peers, m.Name)
		}
	}
	return api.ConsensusStatus{
		ContractVersion: api.ConsensusStatusVersion,
		ClusterID:       v.clusterID,
		NodeID:          v.nodeID,
		Name:            api.NodeName(v.nodeID),
		Role:            string(st.Role),
		Term:            st.Term,
		Leader:          st.Leader,
		Peers:           peers,
		Epoch:           v.epochs.Current(),
		CommitIndex:     st.CommitIndex,
		AppliedIndex:    v.state.AppliedIndex(),
		StateHash:       common.Hash(v.state.StateHash()).Hex(),
	}
}
