package state

// Compaction (GcCompact, GcCompactStep and GcCompactAbandon entries;
// docs/adr/0033)
//
// A run moves the state from generation N to N+1 across several entries,
// so that no apply holds more than a step of the live content and writes
// go on between the steps:
//
//   - GcCompact, applied at raft index I, starts the run: it deletes the
//     segments older than the newest complete generation (meta.lastDone's)
//     with one range deletion (counting their stored bytes first), writes
//     the first segment of generation N+1 (s/g/<I>0000, no ops: it marks
//     the compaction and names the head of generation N), records the run
//     (s/k/<run>) in progress, resets the garbage count and emits
//     consensus/compact. Every ordinary segment from here on is of
//     generation N+1.
//   - Each GcCompactStep rewrites the next live nodes, in key order from
//     the run's resume key, as Put ops of segments s/g/<J><part> of
//     generation N+1, each at most CompactSegmentBytes of node bytes (a
//     larger node gets one of its own), until the nodes read reach the
//     step's bytes. A node whose commit index is I or later was written
//     since the run started: its segment is in generation N+1 already and
//     it is passed over. The step that reads the last node ends the run
//     (done), records the state hash it produced and emits
//     consensus/compact_done.
//   - GcCompactAbandon ends the run in progress undone (the leader gave it
//     up) and emits consensus/compact_abandoned with the reason.
//
// Replaying generation N+1 alone gives the live content once its run is
// done: every node not written since I was copied at its step, and every
// node written since is in an ordinary segment of the generation, with
// deletes after. A generation whose run was abandoned is not complete, so
// cleanup keeps from the newest complete one: normally N and N+1 remain.
//
// An epoch at or below the last run's, or a start while a run is in
// progress, changes nothing; a step other than the run's next changes
// nothing: re-proposed entries are harmless.

import (
	"errors"
	"fmt"
	"time"

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

// RunInProgress reports whether run was started and has not ended.
func RunInProgress(run *ledgerpb.GcRun) bool {
	return run != nil && !run.GetDone() && run.GetAbandoned() == ""
}

func (a *applier) compact(index, term uint64, op *ledgerpb.GcCompact) error {
	last := a.meta.lastRun
	if op.GetEpoch() <= last.GetEpoch() || RunInProgress(last) {
		return nil // this epoch's run was started, or a newer one; or one runs
	}
	run := &ledgerpb.GcRun{
		Run: last.GetRun() + 1, Epoch: op.GetEpoch(), Index: index, AtMs: op.GetAtMs(),
		Generation: last.GetGeneration() + 1, OldHead: append([]byte(nil), a.meta.segmentHash[:]...),
		GarbageBytes: a.meta.garbage, SizeDelta: op.GetSizeDelta(),
	}
	if kept := a.meta.lastDone; kept != nil {
		if err := a.dropGenerationsBefore(kept, run); err != nil {
			return err
		}
	}
	// The first segment of the generation: it marks the compaction, and
	// every generation has one, also one of an empty tree.
	if err := a.putCompactionSegment(a.compactionSegment(index, term, run, 0), nil, run); err != nil {
		return err
	}
	if err := a.put(storage.GcRunKey(run.GetRun()), run); err != nil {
		return err
	}
	a.meta.garbage = 0
	a.meta.lastRun = run
	ev := opEvent(EventTypeConsensus, EventActionCompact, nil, index, op.GetAtMs())
	ev.Epoch = op.GetEpoch()
	return a.emit(ev)
}

// newestDoneRun returns the newest run that is done, last (the newest run)
// or an older one, nil when none is.
func newestDoneRun(r pebble.Reader, last *ledgerpb.GcRun) (*ledgerpb.GcRun, error) {
	if last == nil || last.GetDone() {
		return last, nil
	}
	lower, upper := storage.GcRunBounds()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	for ok := it.Last(); ok; ok = it.Prev() {
		run := &ledgerpb.GcRun{}
		if err := proto.Unmarshal(it.Value(), run); err != nil {
			return nil, errors.Join(fmt.Errorf("%w: GC run %x: %v", ErrCorruptState, it.Key(), err), it.Close())
		}
		if run.GetDone() {
			return run, it.Close()
		}
	}
	return nil, errors.Join(it.Error(), it.Close())
}

// dropGenerationsBefore deletes every segment before the first one of the
// generation kept started (which it wrote at its own index).
func (a *applier) dropGenerationsBefore(kept, run *ledgerpb.GcRun) error {
	lower, _ := storage.SegmentBounds()
	upper := storage.SegmentKey(kept.GetIndex(), 0)
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	// Lengths only: a separated value's length is in its reference
	// (storage ADR 0035), so counting reads no segment's bytes.
	for ok := it.First(); ok; ok = it.Next() {
		lv := it.LazyValue()
		run.SegmentsReclaimed++
		run.BytesReclaimed += uint64(lv.Len())
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	run.KeptFromGeneration = kept.GetGeneration()
	if run.GetSegmentsReclaimed() == 0 {
		return nil // nothing older is left: cleanup reclaims 0 B
	}
	a.dropped = append(a.dropped, keyRange{lower: lower, upper: upper})
	return a.mut.deleteRange(lower, upper)
}

// keyRange is the key range [lower, upper).
type keyRange struct{ lower, upper []byte }

// compactStep applies the run's next step.
func (a *applier) compactStep(index, term uint64, op *ledgerpb.GcCompactStep) error {
	last := a.meta.lastRun
	if !RunInProgress(last) || op.GetRun() != last.GetRun() || op.GetStep() != last.GetSteps()+1 {
		return nil // a repeat, or a step of a run that ended
	}
	run := proto.Clone(last).(*ledgerpb.GcRun) // the published one stays as it is
	run.Steps++
	a.step = op
	resume, err := a.rewriteLive(index, term, run, op.GetStepBytes())
	if err != nil {
		return err
	}
	run.ResumeKey = resume
	if resume == nil {
		run.Done, run.EndIndex, run.EndAtMs = true, index, op.GetAtMs()
		a.run = run // its state hash is added once the entry's is known
		a.meta.lastDone = run
	}
	if err := a.put(storage.GcRunKey(run.GetRun()), run); err != nil {
		return err
	}
	a.meta.lastRun = run
	if !run.GetDone() {
		return nil
	}
	ev := opEvent(EventTypeConsensus, EventActionCompactDone, nil, index, op.GetAtMs())
	ev.Epoch = run.GetEpoch()
	return a.emit(ev)
}

// rewriteLive writes the live nodes from run's resume key until the nodes
// read reach stepBytes (at least one) as segments of run's generation at
// index. It returns the key the next step starts at, nil when it read the
// last node.
func (a *applier) rewriteLive(index, term uint64, run *ledgerpb.GcRun, stepBytes uint64) ([]byte, error) {
	lower, upper := storage.ChildrenBounds("/") // every node: paths start with '/'
	if len(run.GetResumeKey()) > 0 {
		lower = run.GetResumeKey()
	}
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	var resume []byte
	seg := a.compactionSegment(index, term, run, 0)
	var nodes [][]byte // the stored nodes of seg, copied as stored (compactseg.go)
	size, read := 0, uint64(0)
	for ok := it.First(); ok; ok = it.Next() {
		if read > 0 && read >= stepBytes {
			resume = append([]byte(nil), it.Key()...)
			break
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		read += uint64(len(raw))
		commit, err := storedCommitIndex(raw)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%w: node %x: %v", ErrCorruptState, it.Key(), err), it.Close())
		}
		if commit >= run.GetIndex() {
			run.NodesCurrent++ // its own segment is in the generation
			continue
		}
		if size > 0 && size+len(raw) > CompactSegmentBytes {
			if err := a.putCompactionSegment(seg, nodes, run); err != nil {
				return nil, errors.Join(err, it.Close())
			}
			seg, nodes, size = a.compactionSegment(index, term, run, seg.GetPart()+1), nodes[:0], 0
		}
		nodes = append(nodes, append([]byte(nil), raw...))
		size += len(raw)
		run.LiveNodes++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	if len(nodes) > 0 {
		if err := a.putCompactionSegment(seg, nodes, run); err != nil {
			return nil, err
		}
	}
	return resume, nil
}

// compactAbandon ends the run in progress undone.
func (a *applier) compactAbandon(index uint64, op *ledgerpb.GcCompactAbandon) error {
	last := a.meta.lastRun
	if !RunInProgress(last) || op.GetRun() != last.GetRun() {
		return nil
	}
	run := proto.Clone(last).(*ledgerpb.GcRun)
	run.Abandoned = op.GetReason()
	if run.Abandoned == "" {
		run.Abandoned = "given up"
	}
	run.EndIndex, run.EndAtMs = index, op.GetAtMs()
	if err := a.put(storage.GcRunKey(run.GetRun()), run); err != nil {
		return err
	}
	a.meta.lastRun, a.run = run, run
	ev := opEvent(EventTypeConsensus, EventActionCompactAbandoned, nil, index, op.GetAtMs())
	ev.Epoch, ev.Reason = run.GetEpoch(), run.GetAbandoned()
	return a.emit(ev)
}

func (a *applier) compactionSegment(index, term uint64, run *ledgerpb.GcRun, part uint32) *ledgerpb.Segment {
	return &ledgerpb.Segment{Index: index, Term: term, Epoch: run.GetEpoch(), Generation: run.GetGeneration(), Part: part, Compaction: true}
}

// putCompactionSegment chains seg, with nodes (stored node bytes) as its
// put ops, to the newest segment and stores it.
func (a *applier) putCompactionSegment(seg *ledgerpb.Segment, nodes [][]byte, run *ledgerpb.GcRun) error {
	seg.PrevHash = append([]byte(nil), a.meta.segmentHash[:]...)
	size := 128 // the header and trailer fields
	for _, node := range nodes {
		size += len(node) + 16 // and the framing of each op
	}
	raw, err := appendCompactionSegment(make([]byte, 0, size), seg, nodes)
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
// ended, if any. It is written outside the change digest (the hash
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

// CompactStepApply is how long this validator's apply of a compaction step
// took: the Apply call that carried it, from its start to the state
// published, which is how long the writes behind it waited. It is a local
// measurement, not replicated state; the leader holds each step to
// forceTimeout with it.
type CompactStepApply struct {
	Run, Step uint64
	Took      time.Duration
}

// LastCompactStep returns the newest compaction step this validator
// applied since it started, and how long its apply took.
func (m *Machine) LastCompactStep() CompactStepApply {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lastStep
}
