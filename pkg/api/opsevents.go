package api

import "time"

// Contract version markers of the operational event source routes.
const (
	OpsEventsRecentVersion = "events.recent.v1"
	OpsEventStatsVersion   = "events.stats.v1"
)

// Bounds of limit on /v1/events/recent. The validator allows more than the
// edge's 1 to 50: its own operators may page further back.
const (
	DefaultOpsEventsLimit = 50
	MaxOpsEventsLimit     = 1000
)

// Severities of an operational event, mildest first.
const (
	SeverityInfo     = "info"
	SeverityWarn     = "warn"
	SeverityCritical = "critical"
)

// OpsEvent is one operational event of one validator: something an
// operator wants to see happen (a leader change, backpressure, a refused
// proposal, a reorg, a wallet blocked by GC debt, a raft snapshot, a write
// stall). It is the validator's own observation, not replicated: IDs are
// that validator's, counted from 1 at its start.
type OpsEvent struct {
	ID       uint64    `json:"id"`
	At       time.Time `json:"at"`
	Type     string    `json:"type"`
	Severity string    `json:"severity"`
	Message  string    `json:"message"`
	// Count is how many occurrences the event stands for: 1, or more when
	// occurrences of the same type and reason were folded into it (a burst
	// of refusals), or counted between two looks (snapshots, stalls).
	Count      uint64             `json:"count"`
	Attributes OpsEventAttributes `json:"attributes"`
}

// OpsEventAttributes are an event's typed figures; each type sets those
// that apply to it.
type OpsEventAttributes struct {
	// Reason is a code: the refusal or rejection reason (ADR 0006),
	// before_commit or after_commit for a retracted payment, Pebble's
	// reason for a write stall.
	Reason     string `json:"reason,omitempty"`
	Wallet     string `json:"wallet,omitempty"` // 0x-prefixed, lowercase
	ProposalID string `json:"proposalId,omitempty"`
	// Term, Leader and Role are a leader change: the term, its leader
	// (0: none known) and this validator's role after it.
	Term   *uint64 `json:"term,omitempty"`
	Leader *uint64 `json:"leader,omitempty"`
	Role   string  `json:"role,omitempty"`
	// Peer is the other validator of a snapshot transfer.
	Peer *uint64 `json:"peer,omitempty"`
	// InFlight and MaxPendingMessages are the sender's figures when
	// backpressure came on or went off.
	InFlight           *int `json:"inFlight,omitempty"`
	MaxPendingMessages *int `json:"maxPendingMessages,omitempty"`
	// ExecutedDebt and Limit are a blocked wallet's GC debt figures.
	ExecutedDebt string `json:"executedDebt,omitempty"`
	Limit        string `json:"limit,omitempty"`
	// ReMined says whether the chain mined a retracted payment again.
	ReMined *bool `json:"reMined,omitempty"`
}

// OpsEventsRecent is the body of GET /v1/events/recent: the validator's
// newest events, newest first.
type OpsEventsRecent struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	Limit           int    `json:"limit"`
	// Capacity is how many events the validator keeps; Recorded how many
	// it kept since it started (the newest id), older ones are gone.
	Capacity int        `json:"capacity"`
	Recorded uint64     `json:"recorded"`
	Events   []OpsEvent `json:"events"`
}

// OpsEventStats is the body of GET /v1/events/stats: occurrences counted
// since the validator started, and over the last 24 hours, by type,
// severity and reason. Every occurrence counts, also those folded into
// another event.
type OpsEventStats struct {
	ContractVersion string    `json:"contractVersion"`
	NodeID          uint64    `json:"nodeId"`
	Since           time.Time `json:"since"` // when counting began: the validator's start
	At              time.Time `json:"at"`
	Total           uint64    `json:"total"`
	// Last24h counts in whole hours: the current hour and the 23 before.
	Last24h       uint64            `json:"last24h"`
	BySeverity    map[string]uint64 `json:"bySeverity"`
	BySeverity24h map[string]uint64 `json:"bySeverity24h"`
	// ByType has every event type, counted or not.
	ByType map[string]OpsEventTypeStats `json:"byType"`
	// Capacity, Retained and Recorded describe the events kept (see
	// OpsEventsRecent); Folded counts occurrences without an event of
	// their own.
	Capacity int    `json:"capacity"`
	Retained int    `json:"retained"`
	Recorded uint64 `json:"recorded"`
	Folded   uint64 `json:"folded"`
}

// OpsEventTypeStats are the counts of one event type.
type OpsEventTypeStats struct {
	Total   uint64 `json:"total"`
	Last24h uint64 `json:"last24h"`
	// LastAt is the latest occurrence, null when none.
	LastAt   *time.Time        `json:"lastAt"`
	ByReason map[string]uint64 `json:"byReason"`
}

// EventReset is the control event of the operational event stream
// (/v1/ops/events/stream) that a resumption point not of this validator
// process gets: the process restarted, or the client comes from another
// validator, and the events it had seen are not this process's. The stream
// starts over at the oldest event the process keeps (a gap event follows
// when it no longer keeps its first).
const EventReset = "reset"

// StreamReset is the data of a reset event.
type StreamReset struct {
	// LastEventID is the resumption point the client sent (clipped).
	LastEventID string `json:"lastEventId"`
	// BootID is this process's: its events' stream ids are BootID-N.
	BootID string `json:"bootId"`
}
