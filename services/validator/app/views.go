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
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// raftView adapts the raft node to what the pipeline asks of it.
type raftView struct{ *consensus.Node }

func (r raftView) IsLeader() bool { return r.Status().Role == consensus.RoleLeader }

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
	node    *consensus.Node
	machine *state.Machine
	nats    *nats.Conn
	index   *payments.Index
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
		checks["chain"] = check(connected, fmt.Sprintf("%d payments indexed from %d messages", s.Indexed, s.Observed))
	} else {
		checks["nats"] = check(true, "not used in MOCK mode")
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
	members    []api.Member
	leadership *leadershipLog
	startedAt  time.Time
	peers      *transport.Transport // nil for a single node
}

func (v *clusterView) PeerTransport(id uint64) *api.PeerTransport {
	if v.peers == nil || id == v.cfg.NodeID {
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
		SnapshotsFailed: st.SnapshotsFailed, SnapshotsReceived: st.SnapshotsReceived,
	}
	if !st.LastErrorAt.IsZero() {
		at := st.LastErrorAt.UTC()
		out.LastErrorAt = &at
	}
	return out
}

func (v *clusterView) Members() []api.Member { return v.members }

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
	for _, m := range v.members {
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

// members turns the configured cluster into API members; a single node with
// no configured cluster is its own only member, reachable at its HTTP address.
func members(cfg Config, httpAddr string) []api.Member {
	parsed, _ := ParseCluster(cfg.InitialCluster) // validated by Config.Validate
	if len(parsed) == 0 {
		parsed = []Member{{ID: cfg.NodeID, PeerAddr: cfg.PeerAddr, APIURL: "http://" + httpAddr}}
	}
	out := make([]api.Member, len(parsed))
	for i, m := range parsed {
		out[i] = api.Member{ID: m.ID, Name: api.NodeName(m.ID), PeerAddr: m.PeerAddr, APIURL: m.APIURL}
	}
	return out
}
