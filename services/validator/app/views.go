package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/epoch"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// raftView adapts the raft node to what the pipeline asks of it.
type raftView struct{ *consensus.Node }

func (r raftView) IsLeader() bool { return r.Status().Role == consensus.RoleLeader }

// Leading reads the id, the term and the role from one status, so that the
// term is the one this node leads.
func (r raftView) Leading() (nodeID, term uint64, ok bool) {
	st := r.Status()
	return st.ID, st.Term, st.Role == consensus.RoleLeader
}

// stateView adapts the state machine to the pipeline and the API, turning
// state.ErrNotFound into ok=false.
type stateView struct{ *state.Machine }

func (s stateView) Record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	rec, err := s.Proposal(id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	return rec, err == nil, err
}

func (s stateView) Node(path string) (*ledgerpb.Node, bool, error) {
	n, err := s.Machine.Node(path)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	return n, err == nil, err
}

// healthView answers /health from the node's own parts.
type healthView struct {
	cfg     Config
	version string // the software version (pkg/buildinfo)
	node    *consensus.Node
	machine *state.Machine
	nats    *nats.Conn
	// eventsNATS is the connection the event publisher opened for itself
	// when the validator uses no other (MOCK with NATS_EVENTS=on).
	eventsNATS *nats.Conn
	index      *payments.Index
}

func check(ok bool, detail string) map[string]any {
	status := "ok"
	if !ok {
		status = "failing"
	}
	return map[string]any{"status": status, "detail": detail}
}

func (h *healthView) Health() map[string]any {
	st := h.node.Status()
	hash := h.machine.StateHash()
	checks := map[string]any{
		"storage": check(true, "pebble open at "+h.cfg.DataDir),
		"raft":    check(st.Leader != 0, fmt.Sprintf("role %s, term %d, leader %d", st.Role, st.Term, st.Leader)),
	}
	if h.nats != nil {
		connected := h.nats.IsConnected()
		checks["nats"] = check(connected, "connection "+h.nats.Status().String())
		s := h.index.Stats()
		checks["chain"] = check(connected, fmt.Sprintf("%d payments and %d debt payments indexed from %d messages; %d payments retracted by reorgs",
			s.Indexed, s.Debts, s.Observed, s.Retracted))
	} else {
		checks["nats"] = check(true, "not used in MOCK mode")
		if h.eventsNATS != nil { // MOCK with NATS_EVENTS=on: events only
			checks["nats"] = check(h.eventsNATS.IsConnected(), "event publication connection "+h.eventsNATS.Status().String())
		}
		checks["chain"] = check(true, "payments not verified in MOCK mode")
	}
	status := "ok"
	for _, c := range checks {
		if c.(map[string]any)["status"] != "ok" {
			status = "unavailable"
		}
	}
	return map[string]any{
		"status":       status,
		"nodeId":       h.cfg.NodeID,
		"clusterId":    h.cfg.ClusterID,
		"mode":         h.cfg.Mode,
		"version":      h.version,
		"role":         st.Role,
		"term":         st.Term,
		"leader":       st.Leader,
		"commitIndex":  st.CommitIndex,
		"appliedIndex": h.machine.AppliedIndex(),
		"stateHash":    common.Hash(hash).Hex(),
		"checks":       checks,
	}
}

// clusterView answers the consensus routes from the raft node, the state
// machine and the member list.
type clusterView struct {
	cfg        Config
	node       *consensus.Node
	machine    *state.Machine
	epochs     *epoch.Clock
	membership *membership
	leadership *leadershipLog
	startedAt  time.Time
	peers      *transport.Transport
	pipe       *pipeline.Pipeline
	applied    *rate.Meter
}

func (v *clusterView) RaftMetrics() api.RaftMetrics {
	st := v.node.Status()
	first, last, snap := v.node.LogBounds()
	history, changes := v.leadership.History()
	m := api.RaftMetrics{
		ContractVersion: api.RaftMetricsVersion, NodeID: v.cfg.NodeID, Role: string(st.Role), Term: st.Term, Leader: st.Leader,
		CommitIndex: st.CommitIndex, AppliedIndex: v.machine.AppliedIndex(), FirstLogIndex: first, LastLogIndex: last,
		LastSnapshotIndex: snap, AppendRatePerSec: v.applied.PerSecond(), ProposalsDropped: v.pipe.Stats().Reproposed,
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

func (v *clusterView) StateHashAt(index uint64) (string, bool) {
	h, ok := v.machine.StateHashAt(index)
	if !ok {
		return "", false
	}
	return common.Hash(h).Hex(), true
}

func (v *clusterView) Replication() api.ReplicationLag {
	st := v.node.Status()
	_, last, _ := v.node.LogBounds()
	out := api.ReplicationLag{ContractVersion: api.ReplicationLagVersion, NodeID: v.cfg.NodeID, Leader: st.Leader,
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

func (v *clusterView) PeerTransport(id uint64) *api.PeerTransport {
	if id == v.cfg.NodeID {
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

func (v *clusterView) Members() []api.Member { return v.membership.Members() }

func (v *clusterView) StartedAt() time.Time { return v.startedAt }

func (v *clusterView) LeadershipHistory() ([]api.LeadershipChange, uint64) {
	return v.leadership.History()
}

func (v *clusterView) Membership() (voters, learners []uint64) {
	cs := v.node.ConfState()
	return append([]uint64{}, cs.GetVoters()...), append([]uint64{}, cs.GetLearners()...)
}

func (v *clusterView) Status() api.ConsensusStatus {
	st := v.node.Status()
	peers := []string{}
	for _, m := range v.membership.Members() {
		if m.ID != v.cfg.NodeID {
			peers = append(peers, m.Name)
		}
	}
	return api.ConsensusStatus{
		ContractVersion: api.ConsensusStatusVersion,
		ClusterID:       v.cfg.ClusterID,
		NodeID:          v.cfg.NodeID,
		Name:            api.NodeName(v.cfg.NodeID),
		Role:            string(st.Role),
		Term:            st.Term,
		Leader:          st.Leader,
		Peers:           peers,
		Epoch:           v.epochs.Current(),
		CommitIndex:     st.CommitIndex,
		AppliedIndex:    v.machine.AppliedIndex(),
		StateHash:       common.Hash(v.machine.StateHash()).Hex(),
	}
}

// proposalsView is the pipeline as the API serves it, with the intake and
// commit rates added to its queue statistics.
type proposalsView struct {
	*pipeline.Pipeline
	ingress, commits *rate.Meter
}

func (v proposalsView) QueueStats() api.QueueStats {
	q := v.Pipeline.QueueStats()
	q.IngressPerSec, q.CommitPerSec = v.ingress.PerSecond(), v.commits.PerSecond()
	return q
}
