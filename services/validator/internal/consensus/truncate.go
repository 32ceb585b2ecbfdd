package consensus

// Log truncation behind the slowest member.
//
// Snapshots (snapshot.go) bound the log, but only every SnapshotEntries and
// with CompactionMargin entries kept. The log shares Pebble with the state,
// so every entry kept that long is flushed to an sstable and compacted with
// the state, once for its own bytes: at full load the log is as large as
// everything else written. An entry that every member already holds durably
// is never needed again, except by a member that joins or loses its data,
// which can be sent a snapshot instead. Truncating at that point, soon
// after the entries were written, lets them die in the memtable: the
// deletion reaches the flush together with the entries and both are
// dropped there.
//
// Only the leader knows how far every member got (raft's Progress, whose
// Match is what the member acknowledged, hence persisted). It proposes the
// point as a log entry of its own, and every member truncates when it
// applies that entry, so all members keep the same log: after a failover
// the new leader still holds everything its followers may need. This is
// how CockroachDB, whose raft log also lives in Pebble, truncates its logs.
//
// The entry is consensus's own: its data starts with truncationTag, a byte
// no protobuf message starts with (its low three bits would be wire type 7,
// which does not exist), and Propose refuses data that starts with it. The
// applier is handed the entry with its data removed, an empty entry like
// the ones raft appends, so that it still accounts for the index
// (appendNormalEntries, entries.go).
//
// A member that is behind (down, partitioned, or new) holds the point back;
// the snapshot-based compaction still bounds the log then. A log truncated
// past the newest snapshot needs a fresh snapshot when a member needs the
// missing entries: Storage.Snapshot asks for one (snapshot.go).

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"go.etcd.io/raft/v3"
	"go.uber.org/zap"
)

// truncationTag starts the data of a truncation entry.
const truncationTag = 0xff

// minTruncation is the fewest entries a truncation removes: fewer are not
// worth an entry of their own, and on an idle cluster it stops the next
// truncation entry from being proposed only to truncate the previous one.
const minTruncation = 16

// ErrReservedData is returned by Propose for data that starts with the
// byte consensus reserves for its own entries (0xff). No protobuf message
// starts with it.
var ErrReservedData = errors.New("consensus: proposal data starts with the reserved byte 0xff")

// encodeTruncationEntry is the data of an entry that truncates the log up
// to and including index.
func encodeTruncationEntry(index uint64) []byte {
	data := make([]byte, 9)
	data[0] = truncationTag
	binary.BigEndian.PutUint64(data[1:], index)
	return data
}

// truncateLoop proposes truncations while this node leads.
func (n *Node) truncateLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.TruncationInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stopc:
			return
		case <-t.C:
			n.maybeProposeTruncation()
		}
	}
}

// maybeProposeTruncation proposes truncating the log up to the lowest
// index every member holds, when that is minTruncation entries or more
// past the current truncation point.
func (n *Node) maybeProposeTruncation() {
	first, _ := n.storage.FirstIndex()
	upTo, ok := truncationPoint(n.raft.Status(), first)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.TruncationInterval)
	defer cancel()
	if err := n.raft.Propose(ctx, encodeTruncationEntry(upTo)); err != nil && !errors.Is(err, raft.ErrStopped) {
		// Lost leadership or a full proposal queue: the next tick retries.
		n.log.Debug("log truncation not proposed", zap.Uint64("up_to", upTo), zap.Error(err))
	}
}

// truncationPoint is where a leader with status st truncates a log that
// starts at first: the lowest index that every member (learners too) holds
// and that is committed. ok is false for a follower, and when that is fewer
// than minTruncation entries past the current truncation point.
func truncationPoint(st raft.Status, first uint64) (upTo uint64, ok bool) {
	if st.RaftState != raft.StateLeader || len(st.Progress) == 0 {
		return 0, false
	}
	upTo = st.GetCommit()
	for _, pr := range st.Progress {
		upTo = min(upTo, pr.Match)
	}
	return upTo, upTo >= first-1+minTruncation
}

// truncate removes the log up to upTo once the entries before it are
// applied. A point at or below the current one is a no-op: truncations
// commit in order but may name points out of order after a leader change.
func (n *Node) truncate(upTo uint64) {
	switch err := n.storage.compact(upTo, true); {
	case err == nil, errors.Is(err, raft.ErrCompacted):
	default:
		// Not fatal: the log is only longer than it needs to be, and the
		// next truncation or snapshot retries.
		n.log.Error("log truncation failed", zap.Uint64("up_to", upTo), zap.Error(err))
	}
}
