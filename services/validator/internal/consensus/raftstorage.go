package consensus

// Storage is raft's log and metadata in Pebble.
//
// Layout (internal/storage/keys.go): one key per entry, r/e/<index>, whose
// value is the entry's term (8 bytes, big-endian) followed by the marshaled
// raftpb.Entry, so Term(i) reads 8 bytes instead of decoding a batch of
// proposals; r/hs holds the HardState; r/cs the ConfState with the index of
// the conf change it reflects; r/sn the newest snapshot's metadata, whose
// data is a file (snapshot.go); r/tr the truncation point (index and term of
// the last discarded entry).
//
// Concurrency: raft calls the read methods from its own goroutine while the
// Ready loop appends and the snapshot goroutine compacts. Writers serialize
// on writeMu. The bounds (first, last, last term), the HardState, the
// ConfState and the snapshot metadata are kept in memory under mu; entries
// are read from Pebble. Appends commit to Pebble before the in-memory last
// index moves, and raft never reads from Storage an index it still holds in
// its unstable log (the only indexes an append may be replacing), so a
// reader never sees bounds that promise an entry that is not in Pebble yet.
// Compaction works the other way round: the in-memory truncation point moves
// first, then the entries are deleted; a reader that finds an entry missing
// checks the truncation point again and answers raft.ErrCompacted, which
// raft expects from a racing compaction.
//
// There is no entry cache: raft reads recent entries from its unstable log
// and Pebble serves the rest from the memtable or block cache. Add one only
// with a benchmark that needs it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// ErrCorruptLog is wrapped by errors about raft data in Pebble that cannot
// be right (a gap in the log, an undecodable entry, bounds that disagree).
var ErrCorruptLog = errors.New("consensus: corrupt raft log")

// Storage implements raft.Storage on the validator's Pebble database.
type Storage struct {
	db      *storage.DB
	fs      vfs.FS
	snapDir string
	sync    bool // fsync snapshot files (off when the database was opened with NoSync)
	log     *zap.Logger

	// writeMu serializes the writers: save (Ready loop), Compact and
	// createSnapshot (snapshot goroutine). Readers take only mu.
	writeMu sync.Mutex
	// recvMu admits one snapshot received from a peer at a time
	// (stageSnapshot).
	recvMu sync.Mutex

	// wantSnapshot asks the apply goroutine for a new snapshot now rather
	// than after SnapshotEntries (requestSnapshot); wantc wakes it up.
	wantSnapshot atomic.Bool
	wantc        chan struct{}

	mu         sync.Mutex
	hardState  *raftpb.HardState // nil until the first Save with one
	confState  *raftpb.ConfState // never nil
	confIndex  uint64            // index of the conf change confState reflects
	snapshot   *raftpb.Snapshot  // metadata only (the data is in its file); never nil
	truncIndex uint64            // last discarded index; FirstIndex is truncIndex+1
	truncTerm  uint64
	lastIndex  uint64 // == truncIndex when the log holds no entry
	lastTerm   uint64
}

var _ raft.Storage = (*Storage)(nil)

// OpenStorage loads the raft state kept in db and its snapshot directory
// (storage.DB.SnapshotDir), deleting what a crash left there half made.
func OpenStorage(db *storage.DB) (*Storage, error) {
	s := &Storage{
		db: db, fs: db.FS(), snapDir: db.SnapshotDir(), sync: db.DurableWrites().Sync, log: zap.NewNop(),
		wantc:     make(chan struct{}, 1),
		confState: raftpb.EnsureConfState(nil), snapshot: raftpb.EnsureSnapshot(nil),
	}
	pdb := db.Pebble()

	if v, err := storage.Get(pdb, []byte(storage.RaftHardStateKey)); err == nil {
		hs := &raftpb.HardState{}
		if err := proto.Unmarshal(v, hs); err != nil {
			return nil, fmt.Errorf("%w: hard state: %v", ErrCorruptLog, err)
		}
		s.hardState = hs
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	if v, err := storage.Get(pdb, []byte(storage.RaftConfStateKey)); err == nil {
		if len(v) < 8 {
			return nil, fmt.Errorf("%w: conf state record of %d bytes", ErrCorruptLog, len(v))
		}
		cs := &raftpb.ConfState{}
		if err := proto.Unmarshal(v[8:], cs); err != nil {
			return nil, fmt.Errorf("%w: conf state: %v", ErrCorruptLog, err)
		}
		s.confIndex = binary.BigEndian.Uint64(v)
		s.confState = raftpb.EnsureConfState(cs)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	if v, err := storage.Get(pdb, []byte(storage.RaftSnapshotKey)); err == nil {
		snap := &raftpb.Snapshot{}
		if err := proto.Unmarshal(v, snap); err != nil {
			return nil, fmt.Errorf("%w: snapshot metadata: %v", ErrCorruptLog, err)
		}
		s.snapshot = raftpb.EnsureSnapshot(snap)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	if v, err := storage.Get(pdb, []byte(storage.RaftTruncatedKey)); err == nil {
		if len(v) != 16 {
			return nil, fmt.Errorf("%w: truncation record of %d bytes", ErrCorruptLog, len(v))
		}
		s.truncIndex = binary.BigEndian.Uint64(v)
		s.truncTerm = binary.BigEndian.Uint64(v[8:])
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}

	// The log's bounds come from its first and last keys.
	s.lastIndex, s.lastTerm = s.truncIndex, s.truncTerm
	lo, hi := storage.RaftEntryPrefixBounds()
	it, err := pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if it.First() {
		first, ok := storage.RaftEntryIndex(it.Key())
		if !ok || first != s.truncIndex+1 {
			return nil, fmt.Errorf("%w: first entry %d does not follow truncation point %d", ErrCorruptLog, first, s.truncIndex)
		}
		it.Last()
		last, ok := storage.RaftEntryIndex(it.Key())
		if !ok {
			return nil, fmt.Errorf("%w: bad entry key %x", ErrCorruptLog, it.Key())
		}
		term, err := termOf(it.Value())
		if err != nil {
			return nil, err
		}
		s.lastIndex, s.lastTerm = last, term
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	// The truncation point may be past the newest snapshot: log truncation
	// (truncate.go) removes what every member holds, and Snapshot makes a
	// fresh snapshot when one is needed.
	if err := s.openSnapshotDir(); err != nil {
		return nil, err
	}
	return s, nil
}

func termOf(v []byte) (uint64, error) {
	if len(v) < 8 {
		return 0, fmt.Errorf("%w: entry value of %d bytes", ErrCorruptLog, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func encodeEntry(e *raftpb.Entry) ([]byte, error) {
	v := make([]byte, 8, 8+proto.Size(e))
	binary.BigEndian.PutUint64(v, e.GetTerm())
	return proto.MarshalOptions{}.MarshalAppend(v, e)
}

func decodeEntry(v []byte) (*raftpb.Entry, error) {
	if len(v) < 8 {
		return nil, fmt.Errorf("%w: entry value of %d bytes", ErrCorruptLog, len(v))
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(v[8:], e); err != nil {
		return nil, fmt.Errorf("%w: entry: %v", ErrCorruptLog, err)
	}
	return e, nil
}

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hs *raftpb.HardState
	if s.hardState != nil {
		hs = proto.Clone(s.hardState).(*raftpb.HardState)
	}
	return hs, proto.Clone(s.confState).(*raftpb.ConfState), nil
}

// Entries implements raft.Storage.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	s.mu.Lock()
	trunc, last := s.truncIndex, s.lastIndex
	s.mu.Unlock()
	if lo <= trunc {
		return nil, raft.ErrCompacted
	}
	if hi > last+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	if lo == hi {
		return nil, nil
	}
	lower, upper := storage.RaftEntryBounds(lo, hi)
	it, err := s.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := make([]*raftpb.Entry, 0, min(hi-lo, 64))
	var size uint64
	next := lo
	limited := false
	for ok := it.First(); ok; ok = it.Next() {
		idx, _ := storage.RaftEntryIndex(it.Key())
		if idx != next {
			if s.compactedSince(lo) {
				return nil, raft.ErrCompacted
			}
			return nil, fmt.Errorf("%w: expected entry %d, found %d", ErrCorruptLog, next, idx)
		}
		e, err := decodeEntry(it.Value())
		if err != nil {
			return nil, err
		}
		// Like raft's own limitSize: the first entry always, then stop
		// before the total exceeds maxSize.
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			limited = true
			break
		}
		out = append(out, e)
		next++
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if !limited && next != hi {
		if s.compactedSince(lo) {
			return nil, raft.ErrCompacted
		}
		// The bounds promised entries that Pebble does not hold.
		return nil, fmt.Errorf("%w: entries [%d, %d) missing", ErrCorruptLog, next, hi)
	}
	return out, nil
}

// compactedSince reports whether index has been discarded by now: a read
// that found entries missing raced with a compaction (which moves the
// truncation point before deleting).
func (s *Storage) compactedSince(index uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return index <= s.truncIndex
}

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	trunc, truncTerm, last, lastTerm := s.truncIndex, s.truncTerm, s.lastIndex, s.lastTerm
	s.mu.Unlock()
	switch {
	case i < trunc:
		return 0, raft.ErrCompacted
	case i == trunc:
		return truncTerm, nil
	case i > last:
		return 0, raft.ErrUnavailable
	case i == last:
		return lastTerm, nil
	}
	v, closer, err := s.db.Pebble().Get(storage.RaftEntryKey(i))
	if errors.Is(err, pebble.ErrNotFound) {
		// A compaction may have discarded it since the bounds were read.
		s.mu.Lock()
		trunc, truncTerm := s.truncIndex, s.truncTerm
		s.mu.Unlock()
		switch {
		case i < trunc:
			return 0, raft.ErrCompacted
		case i == trunc:
			return truncTerm, nil
		}
		return 0, raft.ErrUnavailable
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	return termOf(v)
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastIndex, nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncIndex + 1, nil
}

// Snapshot implements raft.Storage: the newest snapshot's metadata, after
// checking that its file is there. Its data stays in the file: raft puts the
// snapshot in a MsgSnap without data, and the transport streams the file
// (OpenSnapshotFile) to the follower, which stages it before its raft sees
// the message (Node.ReceiveSnapshot). raft asks for it only to send it to a
// follower behind the truncation point.
//
// A snapshot older than the latest membership change is not served: the
// follower may be the member that change added, and raft on the follower
// ignores a snapshot whose ConfState does not include it (the leader would
// send it again and again). raft is told to retry instead
// (ErrSnapshotTemporarilyUnavailable; it does on a later heartbeat) and a
// fresh snapshot is requested from the apply goroutine. So is a snapshot
// behind the truncation point, which log truncation (truncate.go) moves
// past the snapshots, and an unreadable file, after logging it: raft panics
// on any other error. Before any snapshot exists and while the log is
// whole it returns an empty one, which raft then never asks for.
func (s *Storage) Snapshot() (*raftpb.Snapshot, error) {
	s.mu.Lock()
	snapIndex := s.snapshot.GetMetadata().GetIndex()
	// A snapshot behind the truncation point (truncate.go) would leave the
	// member without the entries that follow it.
	stale := (s.confIndex > snapIndex && snapIndex > 0) || snapIndex < s.truncIndex
	s.mu.Unlock()
	if stale {
		s.requestSnapshot()
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	md, r, err := s.openCurrentSnapshot()
	if err != nil {
		s.log.Error("cannot read the snapshot to send; asking for a new one", zap.Error(err))
		s.requestSnapshot()
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	if r != nil {
		r.Close()
	}
	return raftpb.EnsureSnapshot(&raftpb.Snapshot{Metadata: md}), nil
}

// requestSnapshot asks the apply goroutine for a new snapshot now.
func (s *Storage) requestSnapshot() {
	s.wantSnapshot.Store(true)
	select {
	case s.wantc <- struct{}{}:
	default:
	}
}

// ConfState returns the persisted membership and the index of the conf
// change it reflects (0 before the first).
func (s *Storage) ConfState() (*raftpb.ConfState, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.confState).(*raftpb.ConfState), s.confIndex
}

// HardState returns a copy of the persisted HardState (empty if none).
func (s *Storage) HardState() *raftpb.HardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hardState == nil {
		return &raftpb.HardState{}
	}
	return proto.Clone(s.hardState).(*raftpb.HardState)
}

// save persists one Ready's HardState, entries and snapshot in one Pebble
// batch, synced when sync is true, then moves the in-memory bounds.
//
// A snapshot's file was received, verified and staged before raft saw the
// message (Node.ReceiveSnapshot); it is published under its final name
// before the batch that records it commits: once the batch is durable, so
// is everything a restart needs to restore the state.
func (s *Storage) save(hs *raftpb.HardState, entries []*raftpb.Entry, snap *raftpb.Snapshot, sync bool) (err error) {
	hasSnap := !raft.IsEmptySnap(snap)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	trunc, truncTerm, last, lastTerm := s.truncIndex, s.truncTerm, s.lastIndex, s.lastTerm
	s.mu.Unlock()

	b := s.db.Pebble().NewBatch()
	defer b.Close()
	var newSnap *raftpb.Snapshot
	var newCS *raftpb.ConfState
	if hasSnap {
		// A snapshot replaces the whole log: everything up to its index is
		// covered by it, anything after would be from a log it supersedes
		// (raft only hands out a snapshot that does not match its log).
		meta := snap.GetMetadata()
		newSnap = &raftpb.Snapshot{Metadata: proto.Clone(meta).(*raftpb.SnapshotMetadata)}
		newSnap = raftpb.EnsureSnapshot(newSnap)
		v, err := proto.MarshalOptions{Deterministic: true}.Marshal(newSnap)
		if err != nil {
			return err
		}
		if err := b.Set([]byte(storage.RaftSnapshotKey), v, nil); err != nil {
			return err
		}
		newCS = raftpb.EnsureConfState(proto.Clone(meta.GetConfState()).(*raftpb.ConfState))
		if err := b.Set([]byte(storage.RaftConfStateKey), encodeConfState(newCS, meta.GetIndex()), nil); err != nil {
			return err
		}
		lo, hi := storage.RaftEntryPrefixBounds()
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
		trunc, truncTerm = meta.GetIndex(), meta.GetTerm()
		last, lastTerm = trunc, truncTerm
		if err := b.Set([]byte(storage.RaftTruncatedKey), encodeTruncation(trunc, truncTerm), nil); err != nil {
			return err
		}
		if err := s.publishStagedSnapshot(meta.GetIndex(), meta.GetTerm()); err != nil {
			return err
		}
	}
	if len(entries) > 0 {
		// Entries the log already discarded are covered by a snapshot.
		if first := entries[0].GetIndex(); first <= trunc {
			if skip := trunc - first + 1; skip < uint64(len(entries)) {
				entries = entries[skip:]
			} else {
				entries = nil
			}
		}
	}
	if len(entries) > 0 {
		first := entries[0].GetIndex()
		if first > last+1 {
			return fmt.Errorf("%w: appending entry %d after last index %d leaves a gap", ErrCorruptLog, first, last)
		}
		for i, e := range entries {
			if e.GetIndex() != first+uint64(i) {
				return fmt.Errorf("%w: entries to append are not contiguous at %d", ErrCorruptLog, e.GetIndex())
			}
			v, err := encodeEntry(e)
			if err != nil {
				return err
			}
			if err := b.Set(storage.RaftEntryKey(e.GetIndex()), v, nil); err != nil {
				return err
			}
		}
		newLast := entries[len(entries)-1]
		// Raft only rewrites a suffix: entries after the new last one belong
		// to the log this append overrides.
		if newLast.GetIndex() < last {
			lo, hi := storage.RaftEntryBounds(newLast.GetIndex()+1, last+1)
			if err := b.DeleteRange(lo, hi, nil); err != nil {
				return err
			}
		}
		last, lastTerm = newLast.GetIndex(), newLast.GetTerm()
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		v, err := proto.Marshal(hs)
		if err != nil {
			return err
		}
		if err := b.Set([]byte(storage.RaftHardStateKey), v, nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	wo := pebble.NoSync
	if sync || hasSnap {
		wo = s.db.DurableWrites()
	}
	if err := b.Commit(wo); err != nil {
		return fmt.Errorf("consensus: persist raft state: %w", err)
	}

	s.mu.Lock()
	s.truncIndex, s.truncTerm, s.lastIndex, s.lastTerm = trunc, truncTerm, last, lastTerm
	if hs != nil && !raft.IsEmptyHardState(hs) {
		s.hardState = proto.Clone(hs).(*raftpb.HardState)
	}
	var oldSnap *raftpb.SnapshotMetadata
	if newSnap != nil {
		oldSnap = s.snapshot.GetMetadata()
		s.snapshot = newSnap
		s.confState = newCS
		s.confIndex = newSnap.GetMetadata().GetIndex()
	}
	s.mu.Unlock()
	if newSnap != nil {
		s.retireSnapshotFile(oldSnap, newSnap.GetMetadata())
		if _, err := s.pruneStagedLocked(newSnap.GetMetadata().GetIndex(), ""); err != nil {
			s.log.Warn("could not delete received snapshots raft no longer needs", zap.Error(err))
		}
	}
	return nil
}

// saveConfState durably records the membership after the conf change at
// index was applied to raft.
func (s *Storage) saveConfState(cs *raftpb.ConfState, index uint64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	cs = raftpb.EnsureConfState(proto.Clone(cs).(*raftpb.ConfState))
	if err := s.db.Pebble().Set([]byte(storage.RaftConfStateKey), encodeConfState(cs, index), s.db.DurableWrites()); err != nil {
		return fmt.Errorf("consensus: persist conf state: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.confState, s.confIndex = cs, index
	return nil
}

// Compact discards the log entries up to and including index, keeping its
// term for raft's matching. index must be applied and at or below the
// newest snapshot's index (ErrCompactBeyondSnapshot): a follower that needs
// a discarded entry then gets that snapshot instead. Nodes whose applier is
// a Snapshotter compact by themselves (Config.SnapshotEntries,
// Config.CompactionMargin); there is no need to call it.
func (s *Storage) Compact(index uint64) error { return s.compact(index, false) }

// compact is Compact; pastSnapshot lifts the limit of the newest snapshot
// for the log truncation of truncate.go, which keeps only what every member
// holds: Snapshot then makes a fresh snapshot for a member that needs more.
func (s *Storage) compact(index uint64, pastSnapshot bool) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	trunc, last, snapIndex := s.truncIndex, s.lastIndex, s.snapshot.GetMetadata().GetIndex()
	s.mu.Unlock()
	switch {
	case index <= trunc:
		return raft.ErrCompacted
	case index > last:
		return fmt.Errorf("consensus: compact %d is beyond the last index %d", index, last)
	case index > snapIndex && !pastSnapshot:
		return fmt.Errorf("%w: compact %d, snapshot at %d", ErrCompactBeyondSnapshot, index, snapIndex)
	}
	term, err := s.Term(index)
	if err != nil {
		return err
	}
	// The truncation point moves before the entries go (see the type's
	// comment): a reader that then misses an entry finds it compacted.
	s.mu.Lock()
	s.truncIndex, s.truncTerm = index, term
	s.mu.Unlock()

	b := s.db.Pebble().NewBatch()
	defer b.Close()
	lo, hi := storage.RaftEntryBounds(trunc+1, index+1)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	if err := b.Set([]byte(storage.RaftTruncatedKey), encodeTruncation(index, term), nil); err != nil {
		return err
	}
	// Not synced: losing a compaction in a crash only keeps entries longer.
	// It cannot survive without what it relies on, which was committed
	// before it in the same write-ahead log: the snapshot, or the applied
	// state of the entries it removes.
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("consensus: compact: %w", err)
	}
	return nil
}

func encodeConfState(cs *raftpb.ConfState, index uint64) []byte {
	v := make([]byte, 8, 8+proto.Size(cs))
	binary.BigEndian.PutUint64(v, index)
	v, _ = proto.MarshalOptions{Deterministic: true}.MarshalAppend(v, cs) // a ConfState always marshals
	return v
}

func encodeTruncation(index, term uint64) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, index)
	binary.BigEndian.PutUint64(v[8:], term)
	return v
}
