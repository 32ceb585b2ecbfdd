package api

import (
	"strconv"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Event names of the replicated event log (ADR 0023): the SSE event
// name, the type segment of the NATS subject ledger.events.<type>.<wallet>,
// and Event.Type.
const (
	EventContent   = "content"
	EventDelete    = "delete"
	EventBinary    = "binary"
	EventWallet    = "wallet"
	EventConsensus = "consensus"
)

// Event is one event of the replicated log as the event stream's data line
// and the LEDGER_EVENTS messages carry it. Every validator holds the same
// events under the same ids: ID is the SSE id, the Nats-Msg-Id, and what
// Last-Event-ID resumes after.
type Event struct {
	ID     string `json:"id"` // the sequence number, in decimal
	Type   string `json:"type"`
	Action string `json:"action"` // write, delete, debt_executed, leader, finalize, ...
	Path   string `json:"path"`
	Wallet string `json:"wallet"` // 0x-prefixed, lowercase
	// Organization is the wallet's organization the proposal named.
	Organization string `json:"organization"`
	// Timestamp is the leader's clock written into the entry (when it
	// sealed the batch or proposed the op), in unix milliseconds: the same
	// on every validator. 0 for a GC op of a version that did not date it.
	Timestamp int64 `json:"timestamp"`
	// CasCID is the binary's CID, on binary events only; BlobID, the
	// blob id a completed upload recorded it as, if any (docs/adr/0037).
	CasCID      string `json:"casCid,omitempty"`
	BlobID      string `json:"blobId,omitempty"`
	ProposalID  string `json:"proposalId,omitempty"`
	CommitIndex uint64 `json:"commitIndex"`
	// ContentHash is the keccak256 of the message written, 0x-prefixed.
	ContentHash string `json:"contentHash,omitempty"`
	// Epoch is the epoch now final, on consensus finalize events, and the
	// run's epoch on consensus compact, compact_done and
	// compact_abandoned events.
	Epoch uint64 `json:"epoch,omitempty"`
	// Reason says why, on consensus compact_abandoned events.
	Reason string `json:"reason,omitempty"`
}

// EventOf renders a stored event.
func EventOf(ev *ledgerpb.Event) Event {
	return Event{
		ID: strconv.FormatUint(ev.GetId(), 10), Type: ev.GetType(), Action: ev.GetAction(), Path: ev.GetPath(),
		Wallet: ev.GetWallet(), Organization: ev.GetOrganization(), Timestamp: ev.GetTimestamp(), CasCID: ev.GetCasCid(),
		BlobID: ev.GetBlobId(), ProposalID: ev.GetProposalId(), CommitIndex: ev.GetCommitIndex(), ContentHash: ev.GetContentHash(),
		Epoch: ev.GetEpoch(), Reason: ev.GetReason(),
	}
}

// Control events of the event stream: they carry no id (a reconnection
// resumes after the last real event) and tell the client what it did not
// receive, so that nothing is lost silently.
const (
	// EventGap: the resumption point is older than the history kept.
	EventGap = "gap"
	// EventDropped: the client read too slowly and the oldest queued
	// events were dropped.
	EventDropped = "dropped"
)

// StreamGap is the data of a gap event: the events after AfterID up to
// FirstID-1 are no longer kept (retention, ADR 0023).
type StreamGap struct {
	AfterID string `json:"afterId"` // where the stream resumed
	// FirstID is the first event id still available: the next event the
	// stream sends, or will send when none is kept.
	FirstID string `json:"firstId"`
	Skipped uint64 `json:"skipped"` // events of the log skipped, filters not applied
}

// StreamDropped is the data of a dropped event: Count events matching the
// stream's filters, the oldest FromID and the newest ToID, were dropped from
// its queue. The history still holds them while retention keeps them: a
// new stream resuming after FromID-1 receives them.
type StreamDropped struct {
	Count  uint64 `json:"count"`
	FromID string `json:"fromId"`
	ToID   string `json:"toId"`
}
