package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Run seals decided proposals into batches and sends them until ctx ends.
// At most MaxInFlight batches are proposed and not yet applied. It returns
// once every goroutine it started has, so the caller may close the state.
func (p *Pipeline) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.adopt(ctx) })
	slots := make(chan struct{}, p.cfg.MaxInFlight)
	var carry *ledgerpb.BatchItem // first item of the next batch, when the last one was full by bytes
	for {
		// Take a slot before sealing: while every slot is busy, decided
		// proposals wait in the queue and all go into the next batch, so
		// batches grow with the load instead of staying as small as they
		// were when the slots ran out.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		var items []*ledgerpb.BatchItem
		size := 0
		if carry != nil {
			items, size, carry = append(items, carry), len(carry.GetProposal().GetMessage()), nil
		} else {
			select {
			case it := <-p.decided:
				items, size = append(items, it), len(it.GetProposal().GetMessage())
			case <-ctx.Done():
				return nil
			}
		}
	drain:
		for len(items) < p.cfg.MaxBatch {
			select {
			case it := <-p.decided:
				n := len(it.GetProposal().GetMessage())
				if size+n > p.cfg.MaxBatchBytes {
					carry = it
					break drain
				}
				items, size = append(items, it), size+n
			default:
				break drain
			}
		}
		batch := &ledgerpb.ProposalBatch{SealedAtMs: p.cfg.Now().UnixMilli(), Epoch: p.epochs.Current(), Items: items}
		wg.Go(func() {
			defer func() { <-slots }()
			p.send(ctx, batch)
		})
	}
}

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
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return // shutting down: the batch stays pending in memory (durable intake: see DESIGN.md)
		}
		if attempt > 0 {
			p.stats.reproposed.Add(1)
			p.log.Warn("batch not applied in time; proposing it again",
				zap.Int("proposals", len(ids)), zap.Int("attempt", attempt))
		}
		if err := p.raft.Propose(ctx, data); err != nil && ctx.Err() == nil {
			p.log.Warn("propose failed", zap.Error(err))
		}
		if p.awaitApplied(ctx, ids, accept) {
			break
		}
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
