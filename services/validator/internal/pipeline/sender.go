package pipeline

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Run seals decided proposals into batches and sends them until ctx ends.
// It returns once every goroutine it started has, so the caller may close
// the state.
//
// When to seal a batch decides both batching and latency:
//
//   - With nothing in flight, at once, with whatever is queued: a lone
//     proposal goes without waiting.
//   - With a batch in flight, only once a full batch (MaxBatch) is queued.
//     Until then proposals gather while the batch in flight is replicated
//     and applied, and go together into the next one (group commit), so
//     batches grow with the load and the per-entry costs (fsyncs,
//     messages, apply commits) are shared. Full batches are pipelined.
//   - Never beyond MaxPendingMessages proposals proposed and not yet
//     applied. At that ceiling the sender holds the queue: backpressure.
//     Intake keeps accepting until MaxPending, then answers 429.
//
// Decided proposals wait in the packing buffer (packer.go), by epoch and
// class in micro-batches of one wallet and organization. Which go is the
// packer's choice: all of them while they fit, the higher classes first
// when they do not (ADR 0022).
//
// Every other replicated change (changes.go) goes through here too: one
// entry each, counted against MaxPendingMessages like a proposal, released
// before the queued proposals (they are few and small, and a payment
// reorg must reach the log before the decision it may stop).
func (p *Pipeline) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.adopt(ctx) })
	wg.Go(func() { p.finalize(ctx) })
	wg.Go(func() { p.driveCompactions(ctx) })
	wg.Go(func() { p.announce(ctx) })
	wg.Go(func() { p.payDebts(ctx) })
	wg.Go(func() { p.ingress.Run(ctx, time.Second, p.stats.accepted.Load) })
	wg.Go(func() { p.commits.Run(ctx, time.Second, p.stats.applied.Load) })
	p.runVerifiers(ctx, &wg)
	done := make(chan int)            // a sent batch's size, once applied
	changeDone := make(chan struct{}) // a sent change, once applied or given up
	packing := newPacker(p.cfg.MicroBatch, p.cfg.MicroBatchBytes)
	var (
		batches  int
		inflight int       // proposals and changes proposed and not yet applied: what MaxPendingMessages bounds
		changes  []*change // waiting for room below the ceiling, oldest first
		sending  int       // changes in flight
		holding  bool      // backpressure as last told to Events
	)
	defer func() {
		for _, c := range changes {
			p.settle(c) // never sent: a loop may hand it over again
		}
	}()
	for {
		if len(changes) > 0 && inflight < p.cfg.MaxPendingMessages {
			c := changes[0]
			changes[0] = nil
			changes = changes[1:]
			inflight, sending = inflight+1, sending+1
			p.sender.changes(len(changes), sending)
			wg.Go(func() {
				p.sendChange(ctx, c)
				select {
				case changeDone <- struct{}{}:
				case <-ctx.Done():
				}
			})
			continue
		}
		if items := p.seal(packing, batches, inflight); len(items) > 0 {
			n := len(items)
			batch := &ledgerpb.ProposalBatch{SealedAtMs: p.cfg.Now().UnixMilli(), Epoch: p.epochs.Current(), Items: items,
				EventWindowMs: p.cfg.EventWindow.Milliseconds(), EventMax: p.cfg.EventMax}
			batches, inflight = batches+1, inflight+n
			p.sender.record(packing.figures(), inflight-sending, false)
			p.sender.batches.Store(int64(batches))
			for _, it := range items {
				if c := payment.ClassFromProto(it.GetProposal().GetTier()); c.Valid() {
					p.sender.released[c].Add(1)
				}
			}
			wg.Go(func() {
				p.send(ctx, batch)
				select {
				case done <- n:
				case <-ctx.Done():
				}
			})
			continue
		}
		queued := packing.figures()
		// Told between batches only: sealing a batch at the ceiling lifts
		// backpressure for an instant, which is no change to report.
		if on := (queued.Items > 0 || len(changes) > 0) && inflight >= p.cfg.MaxPendingMessages; on != holding {
			holding = on
			p.cfg.Events.Backpressure(on, inflight, p.cfg.MaxPendingMessages)
		}
		p.sender.record(queued, inflight-sending, holding)
		var oldest int64
		if at := packing.oldest(); !at.IsZero() {
			oldest = at.UnixMilli()
		}
		p.sender.oldestQueued.Store(oldest)
		select {
		case it := <-p.decided:
			now := p.cfg.Now()
			packing.add(it, now)
			// Take whatever else is already decided before sealing.
			for more := true; more; {
				select {
				case it := <-p.decided:
					packing.add(it, now)
				default:
					more = false
				}
			}
		case n := <-done:
			batches, inflight = batches-1, inflight-n
			p.sender.batches.Store(int64(batches))
		case c := <-p.changes:
			changes = append(changes, c)
			p.sender.changes(len(changes), sending)
		case <-changeDone:
			inflight, sending = inflight-1, sending-1
			p.sender.changes(len(changes), sending)
		case <-ctx.Done():
			return nil // what is queued stays pending (durable intake: see DESIGN.md)
		}
	}
}

// seal takes the proposals of the next batch out of the packing buffer,
// none when no batch is due (see Run). A batch holds at most MaxBatch
// proposals, MaxBatchBytes of messages (one larger proposal goes alone)
// and the room left below MaxPendingMessages; which proposals go is the
// packer's take.
func (p *Pipeline) seal(packing *packer, batches, inflight int) []*ledgerpb.BatchItem {
	room := min(p.cfg.MaxBatch, p.cfg.MaxPendingMessages-inflight)
	queued := packing.figures()
	if queued.Items == 0 || room <= 0 {
		return nil
	}
	full := queued.Items >= p.cfg.MaxBatch || (queued.Bytes > p.cfg.MaxBatchBytes && queued.Items > 1)
	if batches > 0 && !full {
		return nil // gather while the batch in flight is applied
	}
	return packing.take(room, p.cfg.MaxBatchBytes, p.cfg.Now(), p.cfg.ClassAging)
}

// Bounds of the wait before proposing again a batch raft refused.
const (
	proposeRetryMin = 20 * time.Millisecond
	proposeRetryMax = 500 * time.Millisecond
)

// send proposes the batch until every item is applied (an acceptance: the
// record exists; a decision: the record is decided), then drops the decided
// proposals from the pending set.
func (p *Pipeline) send(ctx context.Context, batch *ledgerpb.ProposalBatch) {
	data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: batch}})
	if err != nil { // cannot happen for a well-formed message
		p.log.Error("marshalling batch", zap.Error(err))
		return
	}
	ids := make([]common.Hash, len(batch.Items))
	for i, it := range batch.Items {
		ids[i] = common.BytesToHash(it.GetProposal().GetId())
	}
	accept := func(i int) bool { return batch.Items[i].GetAccept() }
	p.stats.batches.Add(1)
	if !p.deliver(ctx, data, nil, func() bool { return p.awaitApplied(ctx, batch.Items) }) {
		return // shutting down: the batch stays pending in memory (durable intake: see DESIGN.md)
	}
	p.mu.Lock()
	for i, id := range ids {
		if !accept(i) {
			p.dropPending(id, common.BytesToHash(batch.Items[i].GetProposal().GetDigest()))
		}
	}
	p.mu.Unlock()
	for i := range ids {
		if !accept(i) {
			p.stats.applied.Add(1)
		}
	}
}

// deliver proposes one entry until await reports it applied, and reports
// whether it was: the retry policy of every entry the sender proposes.
//
// A refusal (no leader during an election, an apply backlog) is tried again
// after proposeRetryMin, doubling up to proposeRetryMax: waiting
// CommitTimeout for it would hold everything queued behind. An entry raft
// took (Propose nil: "maybe") that await does not see applied within
// CommitTimeout is proposed again, the same bytes: raft may lose an entry
// in a leader change, and apply ignores a repeat. c is the change being
// delivered, nil for a batch; deliver gives up when ctx ends or the change
// is no longer wanted (p.wanted), and looks whether applied state holds a
// change (or no longer needs it) before proposing it again.
func (p *Pipeline) deliver(ctx context.Context, data []byte, c *change, await func() bool) bool {
	backoff := proposeRetryMin
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || (c != nil && !p.wanted(c)) {
			return false
		}
		if attempt > 0 {
			if c != nil && p.holds(c) {
				return true
			}
			p.stats.reproposed.Add(1)
		}
		if err := p.raft.Propose(ctx, data); err != nil {
			if ctx.Err() == nil {
				p.log.Debug("propose refused; trying again", zap.Error(err), zap.Duration("in", backoff), zap.String("entry", entryName(c)))
				if c == nil { // the release governor reports what holds proposals back
					p.sender.refused.Store(&refusal{at: p.cfg.Now(), reason: err.Error()})
				}
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, proposeRetryMax)
			continue
		}
		backoff = proposeRetryMin
		if await() {
			return true
		}
		if ctx.Err() == nil {
			p.log.Warn("entry not applied in time; proposing it again", zap.String("entry", entryName(c)), zap.Int("attempt", attempt+1))
		}
	}
}

// awaitApplied waits up to CommitTimeout for every id to have a record, and
// a decided one unless accept(i).
func (p *Pipeline) awaitApplied(ctx context.Context, items []*ledgerpb.BatchItem) bool {
	deadline := time.NewTimer(p.cfg.CommitTimeout)
	defer deadline.Stop()
	for _, item := range items {
		id := common.BytesToHash(item.GetProposal().GetId())
		for {
			changed, release := p.outcomes.watch(id)
			rec, ok, err := p.record(id)
			if err != nil {
				p.log.Error("reading proposal record", zap.Error(err))
			}
			if ok && itemApplied(rec, item) {
				release()
				break
			}
			select {
			case <-changed:
				release()
			case <-deadline.C:
				release()
				return false
			case <-ctx.Done():
				release()
				return false
			}
		}
	}
	return true
}

// itemApplied reports whether the entry of item is applied, from the
// record under its id: an acceptance once the record is its proposal's, a
// decision once that record is decided. A REJECTED record of another
// proposal is replaced by this one's entry (ADR 0028), so it is waited
// past; any other record of another proposal holds the id, and apply skips
// the item: nothing more will come of it.
func itemApplied(rec *ledgerpb.ProposalRecord, item *ledgerpb.BatchItem) bool {
	if !bytes.Equal(rec.GetProposal().GetDigest(), item.GetProposal().GetDigest()) {
		return rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED
	}
	return item.GetAccept() || rec.GetStatus() != ledgerpb.Status_STATUS_PENDING
}

// finalize runs on every validator; while it leads, it hands the sender the
// entries its epoch source calls for: FinalizeEpochs whenever the source's
// finalized epoch has passed the applied state's, the per-epoch GC debt
// job (GcExecute) once per epoch, and a compaction (GcCompact, ADR 0033)
// once per finalized epoch while the segment bytes written since the last
// one are at least GcSizeDelta or an operator armed the trigger. The
// sender proposes each until applied state holds it; while it is on its
// way, the next looks hand over nothing.
func (p *Pipeline) finalize(ctx context.Context) {
	tick := time.NewTicker(p.cfg.FinalizeInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if !p.raft.IsLeader() {
			continue
		}
		if epoch := p.epochs.Finalized(); epoch > p.records.FinalizedEpoch() {
			p.background(ctx, finalizeKey(epoch), &ledgerpb.Entry{Op: &ledgerpb.Entry_Finalize{Finalize: &ledgerpb.FinalizeEpochs{
				Epoch: epoch, AtMs: p.cfg.Now().UnixMilli(),
			}}}, func() (bool, error) { return p.records.FinalizedEpoch() >= epoch, nil })
		}
		if epoch := p.epochs.Current(); epoch > p.records.GcEpoch() {
			p.background(ctx, gcJobKey(epoch), &ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{
				Epoch: epoch, AtMs: p.cfg.Now().UnixMilli(),
			}}}, func() (bool, error) { return p.records.GcEpoch() >= epoch, nil })
		}
		if epoch := p.epochs.Finalized(); p.compactionDue(epoch) {
			p.proposeCompaction(ctx, epoch)
		}
	}
}

// compactionDue reports whether the finalized epoch calls for a
// compaction: none ran on it yet, and the garbage reached the threshold or
// an operator armed the trigger (compaction.go).
func (p *Pipeline) compactionDue(finalized uint64) bool {
	run := p.records.LastGcRun()
	last := run.GetEpoch()
	if p.cfg.GcSizeDelta == 0 || finalized <= last || state.RunInProgress(run) {
		return false // off, this epoch's run started, or a run is in progress
	}
	_, term, _ := p.raft.Leading()
	armed := p.trigger.fires(term, finalized, last)
	return armed || p.records.GarbageBytes() >= p.cfg.GcSizeDelta
}

// Keys of the background changes of finalize and announce (see change.key).
type (
	finalizeKey uint64 // FinalizeEpochs of an epoch
	gcJobKey    uint64 // the per-epoch GC debt job of an epoch
	compactKey  uint64 // the compaction proposed on a finalized epoch
	announceKey uint64 // LeaderElected of a term
)

// announce runs on every validator; when it leads a term that the applied
// state holds no announcement of, it hands the sender LeaderElected for it,
// at once when it becomes leader (the consensus leader event). The sender
// proposes it again after CommitTimeout while the state does not hold it
// (raft may lose a proposal); apply takes only the first of a term.
func (p *Pipeline) announce(ctx context.Context) {
	tick := time.NewTicker(p.cfg.FinalizeInterval)
	defer tick.Stop()
	for {
		changed := p.raft.LeaderChanged()
		if node, term, ok := p.raft.Leading(); ok && term > p.records.LeaderTerm() {
			p.background(ctx, announceKey(term), &ledgerpb.Entry{Op: &ledgerpb.Entry_LeaderElected{LeaderElected: &ledgerpb.LeaderElected{
				NodeId: node, Term: term, AtMs: p.cfg.Now().UnixMilli(),
			}}}, func() (bool, error) { return p.records.LeaderTerm() >= term, nil })
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
