package transport

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// PeerStats is a point-in-time view of one peer, for the ops views.
// Counters start at zero when the peer is added.
type PeerStats struct {
	Addr string

	// Connected: the outbound stream to the peer is established.
	Connected bool
	// InboundConnected: the peer's stream to this node is established.
	InboundConnected bool

	MsgsSent  uint64 // messages written to the outbound stream
	BytesSent uint64 // bytes of those frames
	MsgsRecv  uint64 // messages received from the peer's stream
	BytesRecv uint64 // bytes of those frames

	// Dropped counts messages that never reached the connection: the queue
	// was full, the peer was unreachable, or the message was too large.
	Dropped uint64
	// QueueDepth is the number of messages waiting in the send queue.
	QueueDepth int
	// Reconnects counts outbound connections established after the first.
	Reconnects uint64

	// LastError is the newest connection or protocol error with this peer,
	// in either direction ("" if none), and LastErrorAt when it happened.
	LastError   string
	LastErrorAt time.Time

	SnapshotsSent     uint64 // acknowledged by the peer
	SnapshotsFailed   uint64 // not delivered, or refused by the peer
	SnapshotsReceived uint64 // from the peer, handed to raft

	// Timeouts counts the connections with the peer that a deadline of
	// the transport ended: a dial or handshake past DialTimeout, a write
	// past WriteTimeout, a snapshot's acknowledgement or payload that
	// did not come in time. Each is also a failure counted elsewhere
	// (LastError, a reconnect, a failed snapshot): this tells a slow or
	// stalled peer from one that refuses or resets.
	Timeouts uint64
}

// Totals are transport-wide counters. They survive RemovePeer and count
// what cannot be attributed to a registered peer.
type Totals struct {
	Peers int

	// DroppedUnknownPeer counts messages Send had no peer for.
	DroppedUnknownPeer uint64
	// ConnsAccepted counts inbound TCP connections.
	ConnsAccepted uint64
	// HandshakesRefused counts inbound connections refused before any
	// message was read: TLS failures, wrong magic or version, cluster,
	// receiver or unknown sender, a certificate of
	// another node.
	HandshakesRefused uint64
	// IdentityRefused counts the handshakes among those whose client
	// certificate named another node than the hello's sender.
	IdentityRefused uint64
	// ProtocolErrors counts inbound connections closed on a malformed or
	// oversized frame or message.
	ProtocolErrors uint64
	// StepErrors counts received messages raft did not take (timeout, node
	// stopped).
	StepErrors uint64
	// MsgsSent, MsgsRecv, Dropped: the sums over all peers, past ones too.
	MsgsSent uint64
	MsgsRecv uint64
	Dropped  uint64
	// Timeouts is the sum of the peers' Timeouts, past peers too, and the
	// inbound handshakes that timed out before the sender was known.
	Timeouts uint64
}

// totals is the live form of Totals.
type totals struct {
	droppedUnknown    atomic.Uint64
	connsAccepted     atomic.Uint64
	handshakesRefused atomic.Uint64
	identityRefused   atomic.Uint64
	protocolErrors    atomic.Uint64
	stepErrors        atomic.Uint64
	msgsSent          atomic.Uint64
	msgsRecv          atomic.Uint64
	dropped           atomic.Uint64
	timeouts          atomic.Uint64
}

// isTimeout reports an error of a deadline: the transport's own (socket
// deadlines, the dial context's), as the net and tls packages return it.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
