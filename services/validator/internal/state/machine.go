// Package state is the validator's deterministic state machine: it applies
// committed raft entries to the content tree, the proposal records, the
// event log and the segment chain in Pebble, and answers reads about them.
//
// Apply is a pure function of (state, entry): no clock, no randomness, no
// map iteration, no I/O besides Pebble. See DESIGN.md and hash.go.
package state

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// Errors.
var (
	// ErrIndexGap is returned by Apply when an entry does not follow the
	// applied index: entries were lost between raft and the state machine.
	ErrIndexGap = errors.New("state: entry does not follow the applied index")
	// ErrCorruptState is wrapped by errors about stored state that does not
	// decode.
	ErrCorruptState = errors.New("state: corrupt state")
)

// Options configures a Machine.
type Options struct {
	// Logger receives the machine's log. Default zap.NewNop().
	Logger *zap.Logger
	// Reclaimer, if set, is told of the key ranges an Apply deleted with
	// range deletions (a compaction's cleanup), once the batch committed.
	Reclaimer SpaceReclaimer
}

// SpaceReclaimer returns the disk space of deleted key ranges
// (storage.Reclaimer). Reclaim is called on the apply goroutine after the
// batch that deleted [lower, upper) has committed: it must not block, and
// what it does is local, outside the state (Apply stays a pure function of
// state and entry).
type SpaceReclaimer interface {
	Reclaim(lower, upper []byte)
}

// Machine is the replicated state of one validator. Apply and
// RestoreSnapshot are called by one goroutine (the consensus apply loop);
// the reads, and the encoding of an open snapshot, may run concurrently
// with them and with each other.
type Machine struct {
	db        *storage.DB
	log       *zap.Logger
	reclaimer SpaceReclaimer // nil: Pebble's own compactions return the space

	applyMu sync.Mutex // one Apply or RestoreSnapshot at a time

	mu      sync.RWMutex
	meta    meta
	history *hashHistory // the state hash of each recent index, under mu
	changed chan struct{}
	// lastStep is this validator's time for the newest compaction step it
	// applied, under mu (LastCompactStep).
	lastStep CompactStepApply

	observer atomic.Pointer[Observer]
}

// Observer learns of the proposal records each Apply wrote, right after they
// are committed, on the apply goroutine: it must not block. Waiters use it to
// wake for their own proposal instead of re-reading state after every apply.
type Observer interface {
	RecordsApplied(records []*ledgerpb.ProposalRecord)
	// StateRestored says a snapshot replaced the whole state: anything
	// remembered from earlier applies may be stale.
	StateRestored()
}

// SetObserver sets the observer of applied records (nil: none).
func (m *Machine) SetObserver(o Observer) {
	if o == nil {
		m.observer.Store(nil)
		return
	}
	m.observer.Store(&o)
}

// meta is the in-memory copy of the metadata keys, moved only after the
// batch that writes them has committed.
type meta struct {
	applied     uint64
	stateHash   [32]byte
	segmentHash [32]byte
	lastEvent   uint64
	firstEvent  uint64 // oldest kept event; lastEvent+1 when none is kept (retention.go)
	finalized   uint64 // newest final epoch (FinalizeEpochs)
	gcEpoch     uint64 // epoch of the last per-epoch GC debt job
	leaderTerm  uint64 // newest term a leader announced itself in (LeaderElected)
	unfinalized uint64 // committed proposals whose epoch is not final
	// garbage is the stored bytes of the segments written since the last
	// compaction (GarbageBytes).
	garbage uint64
	// lastRun is the newest compaction run, nil before the first; replaced,
	// never modified, once published.
	lastRun *ledgerpb.GcRun
	// lastDone is the newest run that is done (lastRun, or one before it
	// when lastRun is in progress or was given up), nil before the first:
	// what cleanup keeps from, and what GC debt is priced by (gc.go).
	lastDone *ledgerpb.GcRun
	// counts is replaced, never modified, once published: Apply works on
	// a clone.
	counts *ledgerpb.ProposalCounts
}

// Open loads the state kept in db.
func Open(db *storage.DB, opts Options) (*Machine, error) {
	if db == nil {
		return nil, errors.New("state: db is required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	md, err := loadMeta(db.Pebble())
	if err != nil {
		return nil, err
	}
	m := &Machine{db: db, log: opts.Logger, reclaimer: opts.Reclaimer, meta: md, history: newHashHistory(HashHistory), changed: make(chan struct{})}
	if md.applied > 0 {
		m.history.add(md.applied, md.stateHash)
	}
	return m, nil
}

// loadMeta reads the metadata keys.
func loadMeta(r pebble.Reader) (meta, error) {
	var md meta
	var err error
	if md.applied, err = getUint64(r, []byte(storage.AppliedIndexKey)); err != nil {
		return meta{}, err
	}
	if md.lastEvent, err = getUint64(r, []byte(storage.EventSeqKey)); err != nil {
		return meta{}, err
	}
	if md.finalized, err = getUint64(r, []byte(storage.FinalizedEpochKey)); err != nil {
		return meta{}, err
	}
	if md.gcEpoch, err = getUint64(r, []byte(storage.GcEpochKey)); err != nil {
		return meta{}, err
	}
	if md.leaderTerm, err = getUint64(r, []byte(storage.LeaderTermKey)); err != nil {
		return meta{}, err
	}
	if md.unfinalized, err = getUint64(r, []byte(storage.UnfinalizedCountKey)); err != nil {
		return meta{}, err
	}
	if md.counts, err = getMessage[*ledgerpb.ProposalCounts](r, []byte(storage.ProposalCountsKey), "proposal counts"); err != nil {
		return meta{}, err
	}
	if md.counts == nil {
		md.counts = &ledgerpb.ProposalCounts{}
	}
	if md.garbage, err = getUint64(r, []byte(storage.GarbageBytesKey)); err != nil {
		return meta{}, err
	}
	if md.lastRun, err = newestGcRun(r); err != nil {
		return meta{}, err
	}
	if md.lastDone, err = newestDoneRun(r, md.lastRun); err != nil {
		return meta{}, err
	}
	if md.stateHash, err = getHash(r, []byte(storage.StateHashKey)); err != nil {
		return meta{}, err
	}
	if md.segmentHash, err = getHash(r, []byte(storage.SegmentHashKey)); err != nil {
		return meta{}, err
	}
	if md.firstEvent, err = firstEventID(r, md.lastEvent); err != nil {
		return meta{}, err
	}
	return md, nil
}

func getUint64(r pebble.Reader, key []byte) (uint64, error) {
	v, err := storage.Get(r, key)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, ok := storage.Uint64(v)
	if !ok {
		return 0, fmt.Errorf("%w: %q holds %d bytes, want 8", ErrCorruptState, key, len(v))
	}
	return n, nil
}

func getHash(r pebble.Reader, key []byte) ([32]byte, error) {
	var h [32]byte
	v, err := storage.Get(r, key)
	if errors.Is(err, storage.ErrNotFound) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	if len(v) != 32 {
		return h, fmt.Errorf("%w: %q holds %d bytes, want 32", ErrCorruptState, key, len(v))
	}
	copy(h[:], v)
	return h, nil
}

// marshal is the one encoding of every stored message: deterministic,
// because the bytes are hashed into the state hash.
func marshal(m proto.Message) ([]byte, error) { return marshalAppend(nil, m) }

// marshalAppend appends the deterministic encoding of m to dst.
func marshalAppend(dst []byte, m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
}

// Apply applies committed entries in order (consensus.Applier). Entries at
// or below the applied index are skipped, so a redelivery is harmless; an
// entry after a gap is an error. The state changes of all entries, the
// applied index and the state hash are written in one Pebble batch.
//
// The batch is committed without fsync: the entries are already durable in
// the raft log, which shares this database's write-ahead log, so a crash
// either keeps the batch or loses it together with everything after it, and
// raft then redelivers the entries from the applied index on. The next
// synced raft write makes it durable.
func (m *Machine) Apply(entries []Entry) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	start := time.Now() // a local figure (LastCompactStep), not state
	m.mu.RLock()
	cur := m.meta
	m.mu.RUnlock()
	cur.counts = proto.Clone(cur.counts).(*ledgerpb.ProposalCounts)

	b := m.db.Pebble().NewIndexedBatch()
	defer b.Close()
	a := &applier{b: b, mut: newMutations(b), meta: &cur, log: m.log}
	hashes := make([]indexHash, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		if e.Index <= cur.applied {
			continue
		}
		if e.Index != cur.applied+1 {
			return fmt.Errorf("%w: entry %d after applied index %d", ErrIndexGap, e.Index, cur.applied)
		}
		if err := a.applyEntry(e); err != nil {
			return fmt.Errorf("state: apply entry %d: %w", e.Index, err)
		}
		cur.stateHash = nextStateHash(cur.stateHash, e.Index, e.Term, a.mut.digest())
		cur.applied = e.Index
		if err := a.recordRunHash(cur.stateHash); err != nil {
			return err
		}
		hashes = append(hashes, indexHash{cur.applied, cur.stateHash})
	}
	if len(hashes) == 0 {
		return nil
	}
	counts, err := marshal(cur.counts)
	if err != nil {
		return err
	}
	for _, kv := range []struct {
		key, value []byte
	}{
		{[]byte(storage.ProposalCountsKey), counts},
		{[]byte(storage.AppliedIndexKey), storage.PutUint64(cur.applied)},
		{[]byte(storage.StateHashKey), cur.stateHash[:]},
		{[]byte(storage.SegmentHashKey), cur.segmentHash[:]},
		{[]byte(storage.EventSeqKey), storage.PutUint64(cur.lastEvent)},
		{[]byte(storage.FinalizedEpochKey), storage.PutUint64(cur.finalized)},
		{[]byte(storage.GcEpochKey), storage.PutUint64(cur.gcEpoch)},
		{[]byte(storage.LeaderTermKey), storage.PutUint64(cur.leaderTerm)},
		{[]byte(storage.UnfinalizedCountKey), storage.PutUint64(cur.unfinalized)},
		{[]byte(storage.GarbageBytesKey), storage.PutUint64(cur.garbage)},
	} {
		if err := b.Set(kv.key, kv.value, nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}

	m.mu.Lock()
	m.meta = cur
	if a.step != nil {
		m.lastStep = CompactStepApply{Run: a.step.GetRun(), Step: a.step.GetStep(), Took: time.Since(start)}
	}
	for _, ih := range hashes {
		m.history.add(ih.index, ih.hash)
	}
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	if o := m.observer.Load(); o != nil && len(a.records) > 0 {
		(*o).RecordsApplied(a.records)
	}
	if m.reclaimer != nil {
		for _, r := range a.dropped {
			m.reclaimer.Reclaim(r.lower, r.upper)
		}
	}
	return nil
}

// AppliedIndex returns the index of the last applied entry.
func (m *Machine) AppliedIndex() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.applied
}

// StateHash returns the rolling state hash at AppliedIndex (hash.go).
func (m *Machine) StateHash() [32]byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.stateHash
}

// StateHashAt returns the state hash after index, while index is one of
// the latest HashHistory applied indexes (and was applied since this
// process started or last restored a snapshot).
func (m *Machine) StateHashAt(index uint64) ([32]byte, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.history.at(index)
}

// FinalizedEpoch returns the newest epoch a FinalizeEpochs entry declared
// final (0 before the first).
func (m *Machine) FinalizedEpoch() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.finalized
}

// Unfinalized returns the number of committed proposals whose epoch is not
// final, and the oldest of them (nil when there is none).
func (m *Machine) Unfinalized() (uint64, *ledgerpb.ProposalRecord, error) {
	m.mu.RLock()
	n := m.meta.unfinalized
	m.mu.RUnlock()
	lower, upper := storage.UnfinalizedThrough(^uint64(0))
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, nil, err
	}
	defer it.Close()
	if !it.First() {
		return n, nil, it.Error()
	}
	id, ok := storage.UnfinalizedID(it.Key())
	if !ok {
		return 0, nil, fmt.Errorf("%w: unfinalized mark %x", ErrCorruptState, it.Key())
	}
	rec, err := getRecord(m.db.Pebble(), id[:])
	return n, rec, err
}

// Counts returns the cumulative counts of decided proposals and the
// applied index they are at. The counts must not be modified.
func (m *Machine) Counts() (*ledgerpb.ProposalCounts, uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.counts, m.meta.applied
}

// GcEpoch returns the epoch of the last per-epoch GC debt job.
func (m *Machine) GcEpoch() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.gcEpoch
}

// LeaderTerm returns the newest term a leader announced itself in with a
// LeaderElected entry (0 before the first).
func (m *Machine) LeaderTerm() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.leaderTerm
}

// Account returns a wallet's GC debt account, nil when it has none.
func (m *Machine) Account(wallet [20]byte) (*ledgerpb.GcAccount, error) {
	return getAccount(m.db.Pebble(), wallet[:])
}

// DebtTxSpent reports whether a GcPay of the DebtPaid log logIndex of
// transaction tx was applied.
func (m *Machine) DebtTxSpent(tx [32]byte, logIndex uint32) (bool, error) {
	_, err := storage.Get(m.db.Pebble(), storage.DebtTxKey(tx, logIndex))
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// DebtTxPaid reports whether any DebtPaid log of transaction tx has paid a
// debt.
func (m *Machine) DebtTxPaid(tx [32]byte) (bool, error) {
	lower, upper := storage.DebtTxBounds(tx)
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return false, err
	}
	found := it.First()
	return found, errors.Join(it.Error(), it.Close())
}

// SegmentHash returns the hash of the newest segment (zero before the first).
func (m *Machine) SegmentHash() [32]byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.segmentHash
}

// LastEventID returns the id of the newest event (0 before the first).
func (m *Machine) LastEventID() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.lastEvent
}

// FirstEventID returns the id of the oldest event kept (retention.go), or
// LastEventID()+1 when none is: resuming after an id below FirstEventID()-1
// skips events that are gone.
func (m *Machine) FirstEventID() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.firstEvent
}

// Changed returns a channel that is closed after the next Apply that
// applied anything or the next RestoreSnapshot. Take the channel, then read
// the state, then wait: no change is missed that way.
func (m *Machine) Changed() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed
}

// Node returns the content node at path; ok is false when there is none.
func (m *Machine) Node(path string) (node *ledgerpb.Node, ok bool, err error) {
	n, err := getNode(m.db.Pebble(), path)
	return n, n != nil, err
}

// Children returns the names of the direct children of path in byte order,
// at most limit of them (limit <= 0: all). A name is listed when any node
// exists below it, so the implicit intermediate segments of a path (the
// wallet fan-out, say) are listed too. See ChildrenAfter for paging.
func (m *Machine) Children(path string, limit int) ([]string, error) {
	return m.ChildrenAfter(path, "", limit)
}

// ChildrenAfter is Children starting after the child name after ("" for the
// first page).
//
// It does not visit grandchildren: after reading a child's first key it
// seeks past the child's whole subtree (a contiguous key range, see
// storage.SubtreeBounds), so the cost is one seek per child.
func (m *Machine) ChildrenAfter(path, after string, limit int) ([]string, error) {
	lower, upper := storage.ChildrenBounds(path)
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var names []string
	var ok bool
	if after == "" {
		ok = it.First()
	} else {
		ok = it.SeekGE(skipKey(lower, after))
	}
	for ; ok; ok = it.SeekGE(skipKey(lower, names[len(names)-1])) {
		rest := it.Key()[len(lower):]
		if i := bytes.IndexByte(rest, storage.PathSeparator); i >= 0 {
			rest = rest[:i]
		}
		names = append(names, string(rest))
		if limit > 0 && len(names) >= limit {
			break
		}
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	return names, nil
}

// skipKey is the first key after the subtree of child name under prefix.
func skipKey(prefix []byte, name string) []byte {
	k := make([]byte, 0, len(prefix)+len(name)+1)
	k = append(append(k, prefix...), name...)
	return append(k, storage.PathSeparator+1)
}

// Record returns the record of a proposal id; ok is false when there is
// none.
func (m *Machine) Record(id common.Hash) (rec *ledgerpb.ProposalRecord, ok bool, err error) {
	rec, err = getRecord(m.db.Pebble(), id[:])
	return rec, rec != nil, err
}

// EventsSince returns the events with id > afterID in id order, at most
// limit of them (limit <= 0: all).
func (m *Machine) EventsSince(afterID uint64, limit int) ([]*ledgerpb.Event, error) {
	if afterID == ^uint64(0) {
		return nil, nil
	}
	_, upper := storage.EventBounds()
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: storage.EventKey(afterID + 1), UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*ledgerpb.Event
	for ok := it.First(); ok && (limit <= 0 || len(out) < limit); ok = it.Next() {
		ev := &ledgerpb.Event{}
		if err := proto.Unmarshal(it.Value(), ev); err != nil {
			return nil, fmt.Errorf("%w: event %x: %v", ErrCorruptState, it.Key(), err)
		}
		out = append(out, ev)
	}
	return out, it.Error()
}

// Segment returns the segment of raft index (the first part of a
// compaction's); ok is false when there is none (entries that changed
// nothing have none).
func (m *Machine) Segment(index uint64) (seg *ledgerpb.Segment, ok bool, err error) {
	seg, err = getMessage[*ledgerpb.Segment](m.db.Pebble(), storage.SegmentKey(index, 0), fmt.Sprintf("segment %d", index))
	return seg, seg != nil, err
}

// SegmentsFrom calls fn with the raft index, the stored bytes and the hash
// (hash.go) of each segment with index >= from, in index order, until fn
// returns false. It is what a chain verifier or a TAR exporter reads.
func (m *Machine) SegmentsFrom(from uint64, fn func(index uint64, raw []byte, hash [32]byte) bool) error {
	_, upper := storage.SegmentBounds()
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: storage.SegmentKey(from, 0), UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		idx, _, _ := storage.SegmentKeyIndex(k)
		raw := it.Value()
		if !fn(idx, raw, segmentHash(raw)) {
			break
		}
	}
	return it.Error()
}

// Members returns the cluster's address book, by raft id.
func (m *Machine) Members() ([]*ledgerpb.Member, error) {
	lower, upper := storage.MemberBounds()
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*ledgerpb.Member
	for it.First(); it.Valid(); it.Next() {
		var mem ledgerpb.Member
		if err := proto.Unmarshal(it.Value(), &mem); err != nil {
			return nil, fmt.Errorf("%w: member %x: %v", ErrCorruptState, it.Key(), err)
		}
		out = append(out, &mem)
	}
	return out, it.Error()
}

// RemovedMembers returns the raft ids of the members a committed change
// removed, in increasing order: ids that may never be members again.
func (m *Machine) RemovedMembers() ([]uint64, error) {
	lower, upper := storage.RemovedMemberBounds()
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []uint64
	for it.First(); it.Valid(); it.Next() {
		id, ok := storage.RemovedMemberID(it.Key())
		if !ok {
			return nil, fmt.Errorf("%w: removed member key %x", ErrCorruptState, it.Key())
		}
		out = append(out, id)
	}
	return out, it.Error()
}

// WasRemoved reports whether a committed change removed the member id, as
// of the applied index: consensus asks it before installing the addition
// of id, on the apply goroutine, so the answer is the same on every
// validator.
func (m *Machine) WasRemoved(id uint64) (bool, error) { return removedMember(m.db.Pebble(), id) }

// Undecided returns up to limit records of accepted proposals that have no
// decision yet (status PENDING), in proposal-id order: the work a new leader
// takes over.
func (m *Machine) Undecided(limit int) ([]*ledgerpb.ProposalRecord, error) {
	lower, upper := storage.UndecidedBounds()
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*ledgerpb.ProposalRecord
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		id, ok := storage.UndecidedID(it.Key())
		if !ok {
			return nil, fmt.Errorf("%w: undecided key %x", ErrCorruptState, it.Key())
		}
		rec, ok, err := m.Record(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: undecided proposal %x has no record", ErrCorruptState, id)
		}
		out = append(out, rec)
	}
	return out, it.Error()
}
