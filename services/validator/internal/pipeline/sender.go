package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
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
// when they do not (DECISIONS D7).
func (p *Pipeline) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.adopt(ctx) })
	wg.Go(func() { p.finalize(ctx) })
	wg.Go(func() { p.announce(ctx) })
	wg.Go(func() { p.payDebts(ctx) })
	p.runVerifiers(ctx, &wg)
	done := make(chan int) // a sent batch's size, once applied
	packing := newPacker(p.cfg.MicroBatch, p.cfg.MicroBatchBytes)
	var batches, inflight int
	var holding bool // backpressure as last told to Events
	for {
		if items := p.seal(packing, batches, inflight); len(items) > 0 {
			n := len(items)
			batch := &ledgerpb.ProposalBatch{SealedAtMs: p.cfg.Now().UnixMilli(), Epoch: p.epochs.Current(), Items: items,
				EventWindowMs: p.cfg.EventWindow.Milliseconds(), EventMax: p.cfg.EventMax}
			batches, inflight = batches+1, inflight+n
			p.sender.record(packing.figures(), inflight, false)
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
		if on := queued.Items > 0 && inflight >= p.cfg.MaxPendingMessages; on != holding {
			holding = on
			p.cfg.Events.Backpressure(on, inflight, p.cfg.MaxPendingMessages)
		}
		p.sender.record(queued, inflight, holding)
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
	backoff := proposeRetryMin
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return // shutting down: the batch stays pending in memory (durable intake: see DESIGN.md)
		}
		if attempt > 0 {
			p.stats.reproposed.Add(1)
		}
		// A refused proposal (no leader during an election, apply
		// backlog) is tried again soon: waiting CommitTimeout for it would
		// hold every proposal queued behind this batch.
		if err := p.raft.Propose(ctx, data); err != nil {
			if ctx.Err() == nil {
				p.log.Debug("propose refused; trying again", zap.Error(err), zap.Duration("in", backoff))
				p.sender.refused.Store(&refusal{at: p.cfg.Now(), reason: err.Error()})
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, proposeRetryMax)
			continue
		}
		backoff = proposeRetryMin
		if p.awaitApplied(ctx, ids, accept) {
			break
		}
		p.log.Warn("batch not applied in time; proposing it again", zap.Int("proposals", len(ids)), zap.Int("attempt", attempt+1))
	}
	p.mu.Lock()
	for i, id := range ids {
		if !accept(i) {
			delete(p.pending, id)
		}
	}
	p.mu.Unlock()
	for i := range ids {
		if !accept(i) {
			p.stats.applied.Add(1)
		}
	}
}

// awaitApplied waits up to CommitTimeout for every id to have a record, and
// a decided one unless accept(i).
func (p *Pipeline) awaitApplied(ctx context.Context, ids []common.Hash, accept func(int) bool) bool {
	deadline := time.NewTimer(p.cfg.CommitTimeout)
	defer deadline.Stop()
	for i, id := range ids {
		for {
			changed, release := p.outcomes.watch(id)
			rec, ok, err := p.record(id)
			if err != nil {
				p.log.Error("reading proposal record", zap.Error(err))
			}
			if ok && (accept(i) || rec.GetStatus() != ledgerpb.Status_STATUS_PENDING) {
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

// finalize runs on every validator; while it leads, it proposes the
// entries its epoch source calls for: FinalizeEpochs whenever the source's
// finalized epoch has passed the applied state's, and the per-epoch GC debt
// job (GcExecute) once per epoch. A repeat (the entry is still on its way)
// is a no-op in apply, and a dropped one is proposed again at the next look.
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
			p.proposeOp(ctx, &ledgerpb.Entry{Op: &ledgerpb.Entry_Finalize{Finalize: &ledgerpb.FinalizeEpochs{
				Epoch: epoch, AtMs: p.cfg.Now().UnixMilli(),
			}}})
		}
		if epoch := p.epochs.Current(); epoch > p.records.GcEpoch() {
			p.proposeOp(ctx, &ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{
				Epoch: epoch, AtMs: p.cfg.Now().UnixMilli(),
			}}})
		}
	}
}

// announce runs on every validator; when it leads a term that the applied
// state holds no announcement of, it proposes LeaderElected for it, at once
// when it becomes leader (the consensus leader event). Raft may lose a
// proposal, so the announcement is proposed again after CommitTimeout while
// the state does not hold it; apply takes only the first of a term.
func (p *Pipeline) announce(ctx context.Context) {
	tick := time.NewTicker(p.cfg.FinalizeInterval)
	defer tick.Stop()
	var (
		proposed   uint64    // the term last proposed
		proposedAt time.Time // and when
	)
	for {
		changed := p.raft.LeaderChanged()
		if node, term, ok := p.raft.Leading(); ok && term > p.records.LeaderTerm() {
			now := p.cfg.Now()
			if term != proposed || now.Sub(proposedAt) >= p.cfg.CommitTimeout {
				if p.proposeOp(ctx, &ledgerpb.Entry{Op: &ledgerpb.Entry_LeaderElected{LeaderElected: &ledgerpb.LeaderElected{
					NodeId: node, Term: term, AtMs: now.UnixMilli(),
				}}}) {
					proposed, proposedAt = term, now
				}
			}
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// proposeOp proposes a one-op entry, logging a failure, and reports whether
// raft took it: the caller looks again later either way.
func (p *Pipeline) proposeOp(ctx context.Context, ent *ledgerpb.Entry) bool {
	data, err := proto.Marshal(ent)
	if err != nil { // cannot happen for a well-formed message
		p.log.Error("marshalling an entry", zap.Error(err))
		return false
	}
	if err := p.raft.Propose(ctx, data); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("proposing an entry failed", zap.Error(err))
		}
		return false
	}
	return true
}
