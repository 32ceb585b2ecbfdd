package api

import "time"

// ChainStatusVersion is the marker of GET /v1/chain/status.
const ChainStatusVersion = "chain.status.v1"

// ChainStatus is GET /v1/chain/status: the chain as the chain-watcher last
// reported it to this validator, and the JetStream streams it can see. It
// is observability: each validator follows the watcher's status on its
// own, and nothing replicated depends on it.
type ChainStatus struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	Mode            string `json:"mode"`
	ChainID         uint64 `json:"chainId"`
	// Watcher is null when no status was received: MOCK mode (no
	// watcher), or the watcher has not written one yet; gaps say which.
	Watcher *WatcherStatus `json:"watcher"`
	// Streams is null when this validator uses no NATS; a stream it
	// cannot read is left out and named in gaps.
	Streams []StreamState `json:"streams"`
	Gaps    []Gap         `json:"gaps"`
}

// WatcherStatus is the chain-watcher's last status.
type WatcherStatus struct {
	Head     uint64    `json:"head"`
	HeadHash string    `json:"headHash"`
	HeadTime time.Time `json:"headTime"` // the head block's timestamp
	// FinalizedBlock is null when the watcher's endpoint does not answer
	// the finalized tag.
	FinalizedBlock *uint64 `json:"finalizedBlock"`
	// SafeBlock is the newest block the watcher may publish from: head -
	// confirmations, or the finalized block when it follows finality.
	SafeBlock     uint64 `json:"safeBlock"`
	Confirmations uint64 `json:"confirmations"`
	// CursorBlock is the last block whose payments are all published;
	// null before the watcher has one.
	CursorBlock *uint64 `json:"cursorBlock"`
	CursorHash  *string `json:"cursorHash"`
	// LagBlocks is safe - cursor: blocks the watcher could have published
	// and has not (0 when caught up, whatever the confirmations).
	// HeadLagBlocks is head - cursor, confirmations included.
	LagBlocks     *uint64 `json:"lagBlocks"`
	HeadLagBlocks *uint64 `json:"headLagBlocks"`
	// PendingPayments counts the payments seen on chain above the cursor
	// (or the safe block) and not published yet: OBSERVED transactions.
	PendingPayments  int  `json:"pendingPayments"`
	PendingTruncated bool `json:"pendingTruncated"`
	// ObservedAt is when the watcher read these figures (it writes them
	// on change, and at least every 30 s), ReceivedAt when this validator
	// got them.
	ObservedAt time.Time `json:"observedAt"`
	ReceivedAt time.Time `json:"receivedAt"`
	// AgeMs is now - ObservedAt and HeadAgeMs now - HeadTime when the
	// validator answered, so that a consumer needs no clock of its own
	// (HeadAgeMs is negative for a block stamped ahead of this clock).
	AgeMs     int64 `json:"ageMs"`
	HeadAgeMs int64 `json:"headAgeMs"`
}

// StreamState is a JetStream stream as its info reports it.
type StreamState struct {
	Name      string    `json:"name"`
	Messages  uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"firstSeq"`
	LastSeq   uint64    `json:"lastSeq"`
	Consumers int       `json:"consumers"`
	ReadAt    time.Time `json:"readAt"`
}
