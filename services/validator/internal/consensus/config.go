package consensus

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
)

// Defaults of Config.
const (
	// DefaultTickInterval is one raft logical clock tick. Shorter ticks made
	// leaders flap on a loaded 2-core machine; 100 ms gives a
	// 1–2 s election timeout with DefaultElectionTicks.
	DefaultTickInterval = 100 * time.Millisecond
	// DefaultElectionTicks is the election timeout in ticks (raft randomizes
	// it within [ElectionTicks, 2*ElectionTicks)).
	DefaultElectionTicks = 10
	// DefaultHeartbeatTicks is the leader's heartbeat interval in ticks.
	DefaultHeartbeatTicks = 1
	// DefaultMaxSizePerMsg bounds the entries in one append message (bytes).
	DefaultMaxSizePerMsg = 1 << 20
	// DefaultMaxInflightMsgs bounds the append messages in flight to one
	// follower during optimistic replication.
	DefaultMaxInflightMsgs = 256
	// DefaultMaxCommittedSizePerReady bounds the committed entries handed to
	// the applier in one Ready (bytes).
	DefaultMaxCommittedSizePerReady = 8 << 20
	// DefaultMaxApplyLag is how many committed but not yet applied entries
	// make Propose refuse new work with ErrApplyBacklog.
	DefaultMaxApplyLag = 5000
	// DefaultSnapshotEntries is how many entries are applied between two
	// snapshots of the state.
	DefaultSnapshotEntries = 10_000
	// DefaultCompactionMargin is how many entries before a new snapshot's
	// index stay in the log, so that a follower slightly behind catches up
	// from the log rather than by a snapshot.
	DefaultCompactionMargin = 5_000
	// DefaultTruncationInterval is how often a leader truncates the log
	// behind its slowest member: well within a memtable's life at full
	// load, so that truncated entries are never flushed (truncate.go).
	DefaultTruncationInterval = 250 * time.Millisecond
)

// Config configures a Node. Zero fields take the defaults above; PreVote and
// CheckQuorum are always on (a partitioned node cannot disturb the cluster
// when it comes back, and a leader that lost its quorum steps down).
type Config struct {
	// ID is this node's raft id. Required, not 0, unique in the cluster and
	// never reused for another data directory.
	ID uint64

	// Peers are the ids of the initial voters, including ID, used only when
	// the log is empty (bootstrap of a new cluster). Empty means a single-node
	// cluster of ID. Ignored on restart: membership comes from storage.
	Peers []uint64

	// Join starts a node with an empty log without bootstrapping: it waits
	// for the leader of an existing cluster, which added it through a conf
	// change, to send it the log.
	Join bool

	// TickInterval is the duration of one raft tick. Default
	// DefaultTickInterval; values below 100 ms are for tests.
	TickInterval time.Duration

	// ElectionTicks is the election timeout in ticks. Default
	// DefaultElectionTicks. Must be greater than HeartbeatTicks.
	ElectionTicks int

	// HeartbeatTicks is the heartbeat interval in ticks. Default
	// DefaultHeartbeatTicks.
	HeartbeatTicks int

	// MaxSizePerMsg limits the bytes of entries per append message.
	// Default DefaultMaxSizePerMsg.
	MaxSizePerMsg uint64

	// MaxInflightMsgs limits append messages in flight per follower.
	// Default DefaultMaxInflightMsgs.
	MaxInflightMsgs int

	// MaxCommittedSizePerReady limits the bytes of committed entries per
	// Ready. Default DefaultMaxCommittedSizePerReady.
	MaxCommittedSizePerReady uint64

	// MaxApplyLag is the number of committed, not yet applied entries above
	// which Propose fails fast with ErrApplyBacklog. Default
	// DefaultMaxApplyLag.
	MaxApplyLag uint64

	// SnapshotEntries is the number of entries applied since the last
	// snapshot after which the node snapshots its state and compacts its
	// log. Only appliers that implement Snapshotter are snapshotted; with
	// any other the log is never compacted. Default DefaultSnapshotEntries.
	SnapshotEntries uint64

	// CompactionMargin is the number of entries before a new snapshot's
	// index that compaction keeps: the log is truncated up to
	// snapshot index − CompactionMargin. Followers further behind than that
	// receive the snapshot. Default DefaultCompactionMargin.
	CompactionMargin uint64

	// TruncationInterval is how often the leader truncates the log up to
	// the last entry every member holds (truncate.go), independently of
	// snapshots; only for Snapshotter appliers. Default
	// DefaultTruncationInterval; negative turns it off, leaving only the
	// compaction behind snapshots.
	TruncationInterval time.Duration

	// Logger receives raft's and the node's log. Default zap.NewNop().
	Logger *zap.Logger
}

// maxSnapshotEntries bounds SnapshotEntries and CompactionMargin: beyond
// it the log would hold more than a node can reasonably replay or keep,
// and an accidental huge value (a negative number cast to uint64) would
// silently turn compaction off.
const maxSnapshotEntries = 1 << 32

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("consensus: invalid config")

func (c Config) withDefaults() Config {
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = DefaultMaxSizePerMsg
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = DefaultMaxInflightMsgs
	}
	if c.MaxCommittedSizePerReady == 0 {
		c.MaxCommittedSizePerReady = DefaultMaxCommittedSizePerReady
	}
	if c.MaxApplyLag == 0 {
		c.MaxApplyLag = DefaultMaxApplyLag
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.CompactionMargin == 0 {
		c.CompactionMargin = DefaultCompactionMargin
	}
	if c.TruncationInterval == 0 {
		c.TruncationInterval = DefaultTruncationInterval
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if len(c.Peers) == 0 && c.ID != 0 {
		c.Peers = []uint64{c.ID}
	}
	return c
}

// Validate reports whether c, after defaults, describes a usable node.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.ID == 0:
		return fmt.Errorf("%w: ID must not be 0", ErrInvalidConfig)
	case c.TickInterval < time.Millisecond:
		return fmt.Errorf("%w: TickInterval %v is below 1ms", ErrInvalidConfig, c.TickInterval)
	case c.HeartbeatTicks < 1:
		return fmt.Errorf("%w: HeartbeatTicks %d must be at least 1", ErrInvalidConfig, c.HeartbeatTicks)
	case c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("%w: ElectionTicks %d must be greater than HeartbeatTicks %d", ErrInvalidConfig, c.ElectionTicks, c.HeartbeatTicks)
	case c.MaxInflightMsgs < 1:
		return fmt.Errorf("%w: MaxInflightMsgs %d must be at least 1", ErrInvalidConfig, c.MaxInflightMsgs)
	case c.SnapshotEntries > maxSnapshotEntries:
		return fmt.Errorf("%w: SnapshotEntries %d is above %d", ErrInvalidConfig, c.SnapshotEntries, uint64(maxSnapshotEntries))
	case c.CompactionMargin > maxSnapshotEntries:
		return fmt.Errorf("%w: CompactionMargin %d is above %d", ErrInvalidConfig, c.CompactionMargin, uint64(maxSnapshotEntries))
	case !c.Join && !slices.Contains(c.Peers, c.ID):
		return fmt.Errorf("%w: Peers %v do not include ID %d", ErrInvalidConfig, c.Peers, c.ID)
	}
	seen := make(map[uint64]bool, len(c.Peers))
	for _, p := range c.Peers {
		if p == 0 || seen[p] {
			return fmt.Errorf("%w: Peers %v hold 0 or a duplicate", ErrInvalidConfig, c.Peers)
		}
		seen[p] = true
	}
	return nil
}
