package state

import (
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// ReadView is applied state at one applied index, read from a Pebble
// snapshot: a sequence of reads through it sees one state whatever is
// applied or restored meanwhile. The ops views that add figures up over
// several ranges (segments, nodes, accounts) read through one, so that their
// totals agree with each other. Close it when done: it pins the versions it
// sees.
type ReadView struct {
	snap    *pebble.Snapshot
	applied uint64
	gcEpoch uint64
	lastRun *ledgerpb.GcRun
}

// ReadView opens a view of the state as it is now.
func (m *Machine) ReadView() (*ReadView, error) {
	snap := m.db.Pebble().NewSnapshot()
	applied, err := getUint64(snap, []byte(storage.AppliedIndexKey))
	if err != nil {
		_ = snap.Close()
		return nil, err
	}
	gcEpoch, err := getUint64(snap, []byte(storage.GcEpochKey))
	if err != nil {
		_ = snap.Close()
		return nil, err
	}
	lastRun, err := newestGcRun(snap)
	if err != nil {
		_ = snap.Close()
		return nil, err
	}
	return &ReadView{snap: snap, applied: applied, gcEpoch: gcEpoch, lastRun: lastRun}, nil
}

// LastGcRun is the newest compaction run the view holds, nil before the
// first. It must not be modified.
func (v *ReadView) LastGcRun() *ledgerpb.GcRun { return v.lastRun }

// LastDoneGcRun is the newest compaction run the view holds that is done,
// nil before the first: what GC debt is priced by (CleanupCostBytes).
func (v *ReadView) LastDoneGcRun() (*ledgerpb.GcRun, error) { return newestDoneRun(v.snap, v.lastRun) }

// GcRuns calls fn with each compaction run the view holds, oldest first,
// until fn fails.
func (v *ReadView) GcRuns(fn func(*ledgerpb.GcRun) error) error {
	return v.GcRunsFrom(1, fn)
}

// GcRunsFrom calls fn with each compaction run the view holds from run
// first on, oldest first, until fn fails: the newest few without reading
// the older ones.
func (v *ReadView) GcRunsFrom(first uint64, fn func(*ledgerpb.GcRun) error) error {
	_, upper := storage.GcRunBounds()
	return v.each(storage.GcRunKey(first), upper, func(k, raw []byte) error {
		run := &ledgerpb.GcRun{}
		if err := proto.Unmarshal(raw, run); err != nil {
			return fmt.Errorf("%w: GC run %x: %v", ErrCorruptState, k, err)
		}
		return fn(run)
	})
}

// AppliedIndex is the applied index the view holds.
func (v *ReadView) AppliedIndex() uint64 { return v.applied }

// GcEpoch is the epoch of the last per-epoch GC debt job the view holds (0:
// none yet).
func (v *ReadView) GcEpoch() uint64 { return v.gcEpoch }

// Close releases the snapshot.
func (v *ReadView) Close() error { return v.snap.Close() }

// each calls fn with every key and value in [lower, upper) in key order,
// until fn fails.
func (v *ReadView) each(lower, upper []byte, fn func(key, value []byte) error) error {
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return errors.Join(err, it.Close())
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// SegmentsFrom calls fn with the raft index, the stored bytes and the hash
// (hash.go) of each segment with index >= from, in index order, until fn
// fails. raw is valid only during the call.
func (v *ReadView) SegmentsFrom(from uint64, fn func(index uint64, raw []byte, hash [32]byte) error) error {
	_, upper := storage.SegmentBounds()
	return v.each(storage.SegmentKey(from, 0), upper, func(k, raw []byte) error {
		idx, _, _ := storage.SegmentKeyIndex(k)
		return fn(idx, raw, segmentHash(raw))
	})
}

// FirstSegmentIndex returns the raft index of the oldest segment kept, ok
// false when there is none. It reads no segment's bytes.
func (v *ReadView) FirstSegmentIndex() (index uint64, ok bool, err error) {
	lower, upper := storage.SegmentBounds()
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, false, err
	}
	if it.First() {
		index, _, ok = storage.SegmentKeyIndex(it.Key())
	}
	return index, ok, errors.Join(it.Error(), it.Close())
}

// SegmentRange calls fn with the raft index, the part and the stored bytes
// of each segment with first <= index <= last, in chain order (index, then
// part), until fn fails. raw is valid only during the call.
func (v *ReadView) SegmentRange(first, last uint64, fn func(index uint64, part uint32, raw []byte) error) error {
	if last < first {
		return nil
	}
	_, upper := storage.SegmentBounds()
	if last < math.MaxUint64 {
		upper = storage.SegmentKey(last+1, 0)
	}
	return v.each(storage.SegmentKey(first, 0), upper, func(k, raw []byte) error {
		idx, part, _ := storage.SegmentKeyIndex(k)
		return fn(idx, part, raw)
	})
}

// NewestSegments calls fn with the raft index and the stored bytes of each
// segment, newest first, until fn returns false or fails. raw is valid only
// during the call.
func (v *ReadView) NewestSegments(fn func(index uint64, raw []byte) (bool, error)) error {
	lower, upper := storage.SegmentBounds()
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.Last(); ok; ok = it.Prev() {
		k := it.Key()
		idx, _, _ := storage.SegmentKeyIndex(k)
		more, err := fn(idx, it.Value())
		if err != nil {
			return errors.Join(err, it.Close())
		}
		if !more {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// Nodes calls fn with the stored bytes of every content node, in key order,
// until fn fails. value is valid only during the call.
func (v *ReadView) Nodes(fn func(value []byte) error) error {
	lower, upper := storage.ChildrenBounds("/")
	return v.each(lower, upper, func(_, value []byte) error { return fn(value) })
}

// Accounts calls fn with every GC debt account, in wallet order, until fn
// fails.
func (v *ReadView) Accounts(fn func(*ledgerpb.GcAccount) error) error {
	lower, upper := storage.AccountBounds()
	return v.each(lower, upper, func(k, value []byte) error {
		acc := &ledgerpb.GcAccount{}
		if err := proto.Unmarshal(value, acc); err != nil {
			return fmt.Errorf("%w: GC account %x: %v", ErrCorruptState, k, err)
		}
		return fn(acc)
	})
}
