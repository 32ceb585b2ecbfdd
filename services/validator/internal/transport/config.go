package transport

import (
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
)

// Defaults of Config.
const (
	// DefaultListenAddr is the raft peer port of a validator.
	DefaultListenAddr = ":7090"
	// DefaultQueueLen is the number of messages waiting for one peer's
	// connection before Send starts dropping (raft retransmits). At 1 MiB per
	// append (consensus.DefaultMaxSizePerMsg) a full queue would be 4 GiB, but
	// raft's MaxInflightMsgs (256) keeps appends far below that; the rest are
	// small heartbeats and responses.
	DefaultQueueLen = 4096
	// DefaultDialTimeout bounds connecting to a peer: TCP connect, TLS
	// handshake and the transport handshake together. It is also how long an
	// accepted connection may take to complete its handshake.
	DefaultDialTimeout = 3 * time.Second
	// DefaultWriteTimeout bounds one write to a peer's socket (a buffered
	// batch of frames, or one chunk of a snapshot). A peer that does not
	// drain its socket for this long is considered dead and the connection
	// is re-established.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultStepTimeout bounds handing one received message to raft. Only a
	// forwarded proposal can wait that long (raft holds it while it knows no
	// leader); a timed-out message is dropped.
	DefaultStepTimeout = time.Second
	// DefaultBackoffMin and DefaultBackoffMax bound the jittered exponential
	// delay between failed connection attempts to a peer.
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 5 * time.Second
	// DefaultMaxFrameSize bounds one marshaled raft message on a peer stream
	// (and the header of a snapshot). It must exceed the raft node's
	// MaxSizePerMsg (1 MiB by default) with room for one oversized entry.
	DefaultMaxFrameSize = 16 << 20
	// DefaultMaxSnapshotSize bounds the payload of one snapshot (the
	// snapshot file, streamed: memory does not grow with it). It is there
	// so that a peer cannot make a node write without end; the receiver's
	// free disk is checked as well.
	DefaultMaxSnapshotSize = 64 << 30
)

// Limits on configurable values that the wire format imposes.
const (
	// MaxClusterIDLen is the longest cluster id the handshake can carry.
	MaxClusterIDLen = 255
	// MaxFrameSizeLimit is the largest MaxFrameSize: the largest frame the
	// 4-byte length prefix and the receiver's buffer policy allow.
	MaxFrameSizeLimit = 1 << 30
	// MinFrameSize is the smallest MaxFrameSize; it keeps a
	// misconfiguration from refusing every append.
	MinFrameSize = 4 << 10
)

// Config configures a Transport. Zero fields take the defaults above;
// NodeID and ClusterID are required.
type Config struct {
	// NodeID is this node's raft id (consensus.Config.ID). Required.
	NodeID uint64

	// ClusterID names the cluster. Both ends of a connection must carry
	// the same one: a peer of another cluster (a stale address, a copied
	// configuration) is refused at the handshake, before it can send raft a
	// single message. Required, at most MaxClusterIDLen bytes.
	ClusterID string

	// ListenAddr is the TCP address peers connect to. Default
	// DefaultListenAddr. Port 0 picks a free port; Transport.Addr reports it.
	ListenAddr string

	// QueueLen is the capacity of each peer's send queue, in messages.
	// Default DefaultQueueLen.
	QueueLen int

	// DialTimeout bounds connect + TLS + handshake, in both directions.
	// Default DefaultDialTimeout.
	DialTimeout time.Duration

	// WriteTimeout bounds each socket write (and, for an inbound snapshot,
	// each read: it is the I/O progress timeout). Default DefaultWriteTimeout.
	WriteTimeout time.Duration

	// StepTimeout bounds Raft.Step for one received message. Default
	// DefaultStepTimeout.
	StepTimeout time.Duration

	// BackoffMin and BackoffMax bound the delay between connection attempts
	// to an unreachable peer: it doubles from BackoffMin after each failure
	// up to BackoffMax, with random jitter of up to half, and starts over
	// after a connection that stayed up for BackoffMax. Defaults
	// DefaultBackoffMin and DefaultBackoffMax.
	BackoffMin time.Duration
	BackoffMax time.Duration

	// MaxFrameSize bounds one marshaled message on a stream, in bytes, in
	// both directions: a larger outgoing message is dropped, a larger
	// incoming frame closes the connection. Default DefaultMaxFrameSize.
	MaxFrameSize int

	// MaxSnapshotSize bounds a snapshot's payload (the snapshot file that
	// Raft.OpenSnapshotFile opens), in bytes, in both directions; it is
	// independent of MaxFrameSize. Default DefaultMaxSnapshotSize.
	MaxSnapshotSize int64

	// Credentials, when set, secure every peer connection with mutual TLS
	// (1.3): this node presents Credentials.Certificate, which must name
	// NodeID (pkg/peercert), and requires of its peers a certificate chained
	// to Credentials.CAPool that names the node they are: the hello's sender
	// on an accepted connection, the peer dialed on an outgoing one. Both
	// are asked at every handshake, so rotated files take effect without a
	// restart. Nil: plaintext, for MOCK mode and tests only.
	Credentials Credentials

	// Logger receives connection events (never one line per message).
	// Default zap.NewNop().
	Logger *zap.Logger
}

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("transport: invalid config")

func (c Config) withDefaults() Config {
	if c.ListenAddr == "" {
		c.ListenAddr = DefaultListenAddr
	}
	if c.QueueLen == 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.StepTimeout == 0 {
		c.StepTimeout = DefaultStepTimeout
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(DefaultBackoffMax, c.BackoffMin)
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	if c.MaxSnapshotSize == 0 {
		c.MaxSnapshotSize = DefaultMaxSnapshotSize
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate reports whether c, after defaults, describes a usable transport.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.NodeID == 0:
		return fmt.Errorf("%w: NodeID must not be 0", ErrInvalidConfig)
	case c.ClusterID == "":
		return fmt.Errorf("%w: ClusterID is required", ErrInvalidConfig)
	case len(c.ClusterID) > MaxClusterIDLen:
		return fmt.Errorf("%w: ClusterID is %d bytes, at most %d", ErrInvalidConfig, len(c.ClusterID), MaxClusterIDLen)
	case c.QueueLen < 1:
		return fmt.Errorf("%w: QueueLen %d must be at least 1", ErrInvalidConfig, c.QueueLen)
	case c.DialTimeout < 0, c.WriteTimeout < 0, c.StepTimeout < 0, c.BackoffMin < 0, c.BackoffMax < 0:
		return fmt.Errorf("%w: timeouts and backoff must not be negative", ErrInvalidConfig)
	case c.BackoffMin > c.BackoffMax:
		return fmt.Errorf("%w: BackoffMin %v is above BackoffMax %v", ErrInvalidConfig, c.BackoffMin, c.BackoffMax)
	case c.MaxFrameSize < MinFrameSize || c.MaxFrameSize > MaxFrameSizeLimit:
		return fmt.Errorf("%w: MaxFrameSize %d must be within [%d, %d]", ErrInvalidConfig, c.MaxFrameSize, MinFrameSize, MaxFrameSizeLimit)
	case c.MaxSnapshotSize < 0:
		return fmt.Errorf("%w: MaxSnapshotSize %d must not be negative", ErrInvalidConfig, c.MaxSnapshotSize)
	}
	if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
		return fmt.Errorf("%w: ListenAddr %q: %v", ErrInvalidConfig, c.ListenAddr, err)
	}
	return nil
}
