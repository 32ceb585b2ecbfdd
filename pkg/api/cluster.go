package api

import (
	"strconv"
	"time"
)

// Contract version markers of the consensus source routes.
const (
	ConsensusLeaderVersion = "consensus.leader.v1"
	ConsensusStatusVersion = "consensus.status.v1"
	PeersVersion           = "consensus.peers.v1"
	ClusterHealthVersion   = "health.cluster.v1"
	StateHashVersion       = "consensus.state-hash.v1"
)

// StateHashAt is the body of GET /v1/consensus/state-hash?index=N: the
// validator's state hash right after it applied index N. Validators keep
// the hashes of their latest applied indexes (internal/state HashHistory).
type StateHashAt struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	Index           uint64 `json:"index"`
	StateHash       string `json:"stateHash"`
}

// Roles of a validator in raft.
const (
	RoleLeader    = "LEADER"
	RoleFollower  = "FOLLOWER"
	RoleCandidate = "CANDIDATE"
)

// NodeName is the display name of a validator id, as peers lists show it.
func NodeName(id uint64) string { return "validator-" + strconv.FormatUint(id, 10) }

// Member is one validator of the cluster.
type Member struct {
	ID       uint64 `json:"id"`
	Name     string `json:"name"`
	PeerAddr string `json:"peerAddr"`
	APIURL   string `json:"apiUrl"`
}

// LeaderInfo is the body of GET /v1/consensus/leader.
type LeaderInfo struct {
	ContractVersion string `json:"contractVersion"`
	Known           bool   `json:"known"`
	LeaderID        uint64 `json:"leaderId,omitempty"`
	LeaderName      string `json:"leaderName,omitempty"`
	LeaderURL       string `json:"leaderUrl,omitempty"`
	Term            uint64 `json:"term"`
	Self            bool   `json:"self"` // this validator is the leader
}

// ConsensusStatus is the body of GET /v1/consensus/status: one validator's
// view of itself and the cluster.
type ConsensusStatus struct {
	ContractVersion string   `json:"contractVersion"`
	ClusterID       string   `json:"clusterId"`
	NodeID          uint64   `json:"nodeId"`
	Name            string   `json:"name"`
	Role            string   `json:"role"`
	Term            uint64   `json:"term"`
	Leader          uint64   `json:"leader"` // 0 when unknown
	Peers           []string `json:"peers"`  // names of the other members
	Epoch           uint64   `json:"epoch"`
	CommitIndex     uint64   `json:"commitIndex"`
	AppliedIndex    uint64   `json:"appliedIndex"`
	StateHash       string   `json:"stateHash"`
}

// Peers is the body of GET /v1/peers.
type Peers struct {
	ContractVersion string     `json:"contractVersion"`
	Self            uint64     `json:"self"`
	Peers           []PeerView `json:"peers"`
}

// PeerView is one member as another sees it.
type PeerView struct {
	Member
	Self      bool           `json:"self"`
	IsLeader  bool           `json:"isLeader"`
	Transport *PeerTransport `json:"transport,omitempty"` // absent for self and single nodes
}

// PeerTransport is the raft transport's view of one peer.
type PeerTransport struct {
	Connected         bool       `json:"connected"`
	InboundConnected  bool       `json:"inboundConnected"`
	MsgsSent          uint64     `json:"msgsSent"`
	MsgsRecv          uint64     `json:"msgsRecv"`
	BytesSent         uint64     `json:"bytesSent"`
	BytesRecv         uint64     `json:"bytesRecv"`
	Dropped           uint64     `json:"dropped"`
	QueueDepth        int        `json:"queueDepth"`
	Reconnects        uint64     `json:"reconnects"`
	LastError         string     `json:"lastError,omitempty"`
	LastErrorAt       *time.Time `json:"lastErrorAt,omitempty"`
	SnapshotsSent     uint64     `json:"snapshotsSent"`
	SnapshotsFailed   uint64     `json:"snapshotsFailed"`
	SnapshotsReceived uint64     `json:"snapshotsReceived"`
	// Timeouts counts the connections with the peer a deadline of the
	// transport ended (dial, handshake, write, snapshot); nil from a
	// validator before it counted them.
	Timeouts *uint64 `json:"timeouts,omitempty"`
}

// ClusterHealth is the body of GET /health/cluster: every member's
// (appliedIndex, stateHash) side by side, so a disagreement is visible.
type ClusterHealth struct {
	ContractVersion string `json:"contractVersion"`
	Status          string `json:"status"` // ok, degraded, unavailable
	Quorum          int    `json:"quorum"`
	Reachable       int    `json:"reachable"`
	Leader          uint64 `json:"leader"`
	// StateHashAgreement is false when two members report different state
	// hashes for the same index. The hashes compared are those at
	// ComparedAt, the lowest applied index among the reachable members,
	// which every one of them has applied; a member that no longer holds
	// that index's hash (it is far ahead) is left out of the comparison.
	StateHashAgreement bool         `json:"stateHashAgreement"`
	ComparedAt         uint64       `json:"comparedAt,omitempty"`
	Nodes              []NodeHealth `json:"nodes"`
}

// NodeHealth is one member in ClusterHealth.
type NodeHealth struct {
	ID           uint64 `json:"id"`
	Name         string `json:"name"`
	APIURL       string `json:"apiUrl"`
	Reachable    bool   `json:"reachable"`
	Error        string `json:"error,omitempty"`
	Role         string `json:"role,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	CommitIndex  uint64 `json:"commitIndex,omitempty"`
	StateHash    string `json:"stateHash,omitempty"`
	// ComparedHash is the member's state hash at ClusterHealth.ComparedAt.
	ComparedHash string `json:"comparedHash,omitempty"`
	LatencyMs    int64  `json:"latencyMs"`
}

// Contract version markers of the messaging-layer detail routes.
const (
	LeadershipHistoryVersion   = "msgbus.leadership-history.v1"
	ValidatorIdentitiesVersion = "msgbus.validator-identities.v1"
	NodeStatusVersion          = "msgbus.node-status.v1"
	ClusterStateVersion        = "msgbus.cluster-state.v1"
)

// LeadershipChange is one change of leader, role or term as a validator saw it.
type LeadershipChange struct {
	Term   uint64    `json:"term"`
	Leader uint64    `json:"leader"` // 0: no leader known
	Role   string    `json:"role"`   // this validator's role after the change
	At     time.Time `json:"at"`
}

// LeadershipHistory is the body of GET /v1/msgbus/leadership-history.
type LeadershipHistory struct {
	ContractVersion string             `json:"contractVersion"`
	NodeID          uint64             `json:"nodeId"`
	Changes         uint64             `json:"changes"` // since start, including ones no longer listed
	History         []LeadershipChange `json:"history"`
}

// ValidatorIdentities is the body of GET /v1/msgbus/validator-identities.
type ValidatorIdentities struct {
	ContractVersion string     `json:"contractVersion"`
	Validators      []PeerView `json:"validators"`
}

// NodeStatus is the body of GET /v1/msgbus/node-status.
type NodeStatus struct {
	ConsensusStatus
	StartedAt         time.Time `json:"startedAt"`
	UptimeSeconds     int64     `json:"uptimeSeconds"`
	LeadershipChanges uint64    `json:"leadershipChanges"`
}

// ClusterState is the body of GET /v1/msgbus/cluster-state: membership as
// raft holds it, beside the configured members.
type ClusterState struct {
	ContractVersion string   `json:"contractVersion"`
	Leader          uint64   `json:"leader"`
	Term            uint64   `json:"term"`
	Voters          []uint64 `json:"voters"`
	Learners        []uint64 `json:"learners"`
	Quorum          int      `json:"quorum"`
	Members         []Member `json:"members"`
}

// Contract version markers of the raft detail routes.
const (
	RaftMetricsVersion    = "msgbus.raft-metrics.v1"
	ReplicationLagVersion = "msgbus.replication-lag.v1"
)

// RaftMetrics is the body of GET /v1/msgbus/raft-metrics.
type RaftMetrics struct {
	ContractVersion   string     `json:"contractVersion"`
	NodeID            uint64     `json:"nodeId"`
	Role              string     `json:"role"`
	Term              uint64     `json:"term"`
	Leader            uint64     `json:"leader"`
	CommitIndex       uint64     `json:"commitIndex"`
	AppliedIndex      uint64     `json:"appliedIndex"`
	FirstLogIndex     uint64     `json:"firstLogIndex"`
	LastLogIndex      uint64     `json:"lastLogIndex"`
	LastSnapshotIndex uint64     `json:"lastSnapshotIndex"`
	AppendRatePerSec  float64    `json:"appendRatePerSec"` // applied entries per second, last 10 s
	Elections         Elections  `json:"elections"`
	ProposalsDropped  uint64     `json:"proposalsDropped"` // batches proposed again after raft dropped them
	Transport         *Transport `json:"transport,omitempty"`
}

// Elections counts the leader changes this node saw.
type Elections struct {
	Count    uint64     `json:"count"`    // since start
	Count24h int        `json:"count24h"` // among the changes still listed
	LastAt   *time.Time `json:"lastAt,omitempty"`
}

// Transport is the raft transport's totals.
type Transport struct {
	Peers              int    `json:"peers"`
	MsgsSent           uint64 `json:"msgsSent"`
	MsgsRecv           uint64 `json:"msgsRecv"`
	Dropped            uint64 `json:"dropped"`
	DroppedUnknownPeer uint64 `json:"droppedUnknownPeer"`
	HandshakesRefused  uint64 `json:"handshakesRefused"`
	// Timeouts sums the peers' timeouts, past peers too, and the inbound
	// handshakes that timed out before naming their sender; nil from a
	// validator before it counted them.
	Timeouts *uint64 `json:"timeouts,omitempty"`
}

// ReplicationLag is the body of GET /v1/msgbus/replication-lag: the leader's
// view of each member. On a follower, Leader says whom to ask.
type ReplicationLag struct {
	ContractVersion string            `json:"contractVersion"`
	NodeID          uint64            `json:"nodeId"`
	IsLeader        bool              `json:"isLeader"`
	Leader          uint64            `json:"leader"`
	LastIndex       uint64            `json:"lastIndex"`
	MaxLagEntries   uint64            `json:"maxLagEntries"`
	Nodes           []ReplicationNode `json:"nodes"`
}

// ReplicationNode is one member's replication as the leader sees it.
type ReplicationNode struct {
	NodeID          uint64 `json:"nodeId"`
	Name            string `json:"name"`
	MatchIndex      uint64 `json:"matchIndex"`
	NextIndex       uint64 `json:"nextIndex"`
	LagEntries      uint64 `json:"lagEntries"`
	LagMs           int64  `json:"lagMs"` // lagEntries at the current append rate: an estimate
	State           string `json:"state"` // replicate, probe, snapshot
	RecentActive    bool   `json:"recentActive"`
	PendingSnapshot uint64 `json:"pendingSnapshot,omitempty"`
	Learner         bool   `json:"learner,omitempty"`
	// Head is the newest head the member reported to this leader
	// (POST /v1/follower/head-update), absent when none is held.
	Head *FollowerHead `json:"head,omitempty"`
}

// DeepHealth is the body of GET /health/deep: each part the validator
// depends on, asked now. Status is "ok" when every check is, else
// "unavailable" (with HTTP 503).
type DeepHealth struct {
	Status    string               `json:"status"`
	NodeID    uint64               `json:"nodeId"`
	CheckedAt time.Time            `json:"checkedAt"`
	TookMs    float64              `json:"tookMs"`
	Checks    map[string]DeepCheck `json:"checks"`
}

// DeepCheck is one check of DeepHealth: "ok" or "failing", what it found,
// and how long asking took.
type DeepCheck struct {
	Status    string  `json:"status"`
	Detail    string  `json:"detail"`
	LatencyMs float64 `json:"latencyMs"`
}

// MetricsJSON is the body of GET /api/metrics: the families /metrics
// serves in the Prometheus text format, as JSON, for consumers without a
// Prometheus parser.
type MetricsJSON struct {
	NodeID   uint64         `json:"nodeId"`
	At       time.Time      `json:"at"`
	Families []MetricFamily `json:"families"`
}

// MetricFamily is one metric: its name, type (counter, gauge, histogram,
// summary, untyped), help, and series.
type MetricFamily struct {
	Name   string         `json:"name"`
	Type   string         `json:"type"`
	Help   string         `json:"help"`
	Series []MetricSeries `json:"series"`
}

// MetricSeries is one series: its labels and its value, or for a histogram
// its count, sum and cumulative buckets.
type MetricSeries struct {
	Labels  map[string]string `json:"labels"`
	Value   *float64          `json:"value,omitempty"`
	Count   *uint64           `json:"count,omitempty"`
	Sum     *float64          `json:"sum,omitempty"`
	Buckets []MetricBucket    `json:"buckets,omitempty"`
}

// MetricBucket is a histogram bucket: observations at or below Le. The
// last bucket's bound, +Inf, is left out (Count says it).
type MetricBucket struct {
	Le    float64 `json:"le"`
	Count uint64  `json:"count"`
}
