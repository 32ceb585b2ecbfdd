package state

// Compaction (GcCompact entries; docs/adr/0033)
//
// Applied at raft index I on a state in generation N, a GcCompact
//   - deletes the segments of the generations older than N (from the first
//     segment key to the first segment of generation N, which the last run
//     wrote at its own index) with one range deletion, counting their
//     stored bytes first: generations N and N+1 remain;
//   - writes every live node, in key order, as Put ops of segments
//     s/g/<I><part> (part 0, 1, ...) of generation N+1, each at most
//     CompactSegmentBytes of node bytes (a larger node gets one of its own),
//     chained like any segment: part 0 names the head of generation N;
//   - records the run (s/k/<run>), resets the garbage count and emits
//     consensus/compact.
//
// An epoch at or below the last run's changes nothing, so a re-proposed
// entry is harmless and there is at most one run per epoch.

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// CompactSegmentBytes bounds the node bytes of one segment a compaction
// writes: segments stay small enough to stream, verify and archive alone.
const CompactSegmentBytes = 1 << 20

// RetainedGenerations is how many generations cleanup keeps (the contract
// fixes it): the one a compaction starts and the one before it.
const RetainedGenerations = 2

func (a *applier) compact(index, term uint64, op *ledgerpb.GcCompact) error {
	last := a.meta.lastRun
	if op.GetEpoch() <= last.GetEpoch() {
		return nil // this epoch's run was applied, or a newer one
	}
	run := &ledgerpb.GcRun{
		Run: last.GetRun() + 1, Epoch: op.GetEpoch(), Index: index, AtMs: op.GetAtMs(),
		Generation: last.GetGeneration() + 1, OldHead: append([]byte(nil), a.meta.segmentHash[:]...),
		GarbageBytes: a.meta.garbage,
	}
	if last != nil {
		if err := a.dropGenerationsBefore(last, run); err != nil {
			return err
		}
	}
	if err := a.rewriteLive(index, term, run); err != nil {
		return err
	}
	if err := a.put(storage.GcRunKey(run.GetRun()), run); err != nil {
		return err
	}
	a.meta.garbage = 0
	a.meta.lastRun, a.run = run, run
	ev := opEvent(EventTypeConsensus, EventActionCompact, nil, index, op.GetAtMs())
	ev.Epoch = op.GetEpoch()
	return a.emit(ev)
}

// dropGenerationsBefore deletes every segment before the first one of
// generation last.generation (which last wrote at its own index).
func (a *applier) dropGenerationsBefore(last, run *ledgerpb.GcRun) error {
	lower, _ := storage.SegmentBounds()
	upper := storage.SegmentKey(last.GetIndex(), 0)
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		run.SegmentsReclaimed++
		run.BytesReclaimed += uint64(len(it.Value()))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	run.KeptFromGeneration = last.GetGeneration()
	if run.GetSegmentsReclaimed() == 0 {
		return nil // nothing older is left: cleanup reclaims 0 B
	}
	a.dropped = append(a.dropped, keyRange{lower: lower, upper: upper})
	return a.mut.deleteRange(lower, upper)
}

// keyRange is the key range [lower, upper).
type keyRange struct{ lower, upper []byte }

// rewriteLive writes the live nodes as the segments of run's generation.
func (a *applier) rewriteLive(index, term uint64, run *ledgerpb.GcRun) error {
	lower, upper := storage.ChildrenBounds("/") // every node: paths start with '/'
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	seg := a.compactionSegment(index, term, run, 0)
	size := 0
	for ok := it.First(); ok; ok = it.Next() {
		node := &ledgerpb.Node{}
		if err := proto.Unmarshal(it.Value(), node); err != nil {
			return errors.Join(fmt.Errorf("%w: node %x: %v", ErrCorruptState, it.Key(), err), it.Close())
		}
		if size > 0 && size+len(it.Value()) > CompactSegmentBytes {
			if err := a.putCompactionSegment(seg, run); err != nil {
				return errors.Join(err, it.Close())
			}
			seg, size = a.compactionSegment(index, term, run, seg.GetPart()+1), 0
		}
		seg.Ops = append(seg.Ops, &ledgerpb.SegmentOp{Op: &ledgerpb.SegmentOp_Put{Put: node}})
		size += len(it.Value())
		run.LiveNodes++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	// The last segment, or the only one of an empty tree: every generation
	// has a first segment, which marks where the compaction happened.
	return a.putCompactionSegment(seg, run)
}

func (a *applier) compactionSegment(index, term uint64, run *ledgerpb.GcRun, part uint32) *ledgerpb.Segment {
	return &ledgerpb.Segment{Index: index, Term: term, Epoch: run.GetEpoch(), Generation: run.GetGeneration(), Part: part, Compaction: true}
}

// putCompactionSegment chains seg to the newest segment and stores it.
func (a *applier) putCompactionSegment(seg *ledgerpb.Segment, run *ledgerpb.GcRun) error {
	seg.PrevHash = append([]byte(nil), a.meta.segmentHash[:]...)
	raw, err := marshal(seg)
	if err != nil {
		return err
	}
	if err := a.mut.set(storage.SegmentKey(seg.GetIndex(), seg.GetPart()), raw); err != nil {
		return err
	}
	a.meta.segmentHash = segmentHash(raw)
	run.SegmentsWritten++
	run.BytesWritten += uint64(len(raw))
	return nil
}

// recordRunHash adds the state hash the entry produced to the run it
// recorded, if any. It is written outside the change digest (the hash
// cannot be part of what it hashes), like the metadata keys.
func (a *applier) recordRunHash(stateHash [32]byte) error {
	if a.run == nil {
		return nil
	}
	a.run.StateHash = append([]byte(nil), stateHash[:]...)
	run := a.run
	a.run = nil
	raw, err := marshal(run)
	if err != nil {
		return err
	}
	return a.b.Set(storage.GcRunKey(run.GetRun()), raw, nil)
}

// newestGcRun reads the record of the newest compaction run, nil when
// there was none.
func newestGcRun(r pebble.Reader) (*ledgerpb.GcRun, error) {
	lower, upper := storage.GcRunBounds()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	var run *ledgerpb.GcRun
	if it.Last() {
		run = &ledgerpb.GcRun{}
		if err := proto.Unmarshal(it.Value(), run); err != nil {
			return nil, errors.Join(fmt.Errorf("%w: GC run %x: %v", ErrCorruptState, it.Key(), err), it.Close())
		}
	}
	return run, errors.Join(it.Error(), it.Close())
}

// LastGcRun returns the newest compaction run, nil before the first. It
// must not be modified.
func (m *Machine) LastGcRun() *ledgerpb.GcRun {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.lastRun
}

// GarbageBytes returns the stored bytes of the segments written since the
// last compaction: what the leader compares with the GC threshold.
func (m *Machine) GarbageBytes() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.garbage
}

// Generation returns the generation new segments are written in.
func (m *Machine) Generation() uint32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.lastRun.GetGeneration()
}
