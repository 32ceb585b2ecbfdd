package pipeline

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// Verifiers decide the accepted proposals whose payment intake did not find
// (ADR 0007). Intake no longer accepts a proposal unpaid (hold.go, ADR
// 0030): what they decide are the proposals earlier versions accepted, and
// a new leader adopts. A pool of Config.Verifiers workers, sized to the cores,
// checks each proposal against the payment index; a proposal whose payment
// is not observed yet is parked, not given a goroutine of its own. One
// parker holds the parked proposals: when the index changes it looks them
// up again (at most every parkScanInterval, so a busy chain does not turn
// into a busy loop) and hands back those now paid; when a proposal's wait
// (PaymentWait since its acceptance) is over it is REJECTED
// payment_not_found, if the chain feed is not stale (a missing payment is
// never declared on a stale feed: the proposal waits another PaymentWait),
// or payment_orphaned when a payment was observed and a
// chain reorganization took it back (reorgs.go): the proposal was paid, on
// a branch the chain abandoned, and the new branch did not mine the payment
// again within the wait.
//
// Signatures are recovered at intake, on the request goroutines, which Go
// spreads over every core already; the verifiers only match payments.

// parkScanInterval bounds how often the parker looks parked proposals up.
const parkScanInterval = 10 * time.Millisecond

// restoreRecheck is how often the parker looks again at proposals whose
// payment is back on the chain after a reorg and whose record still
// carries the retraction's mark (awaitsRestore): applying the leader's
// restoring entry does not change the payment index, so nothing else
// wakes it.
const restoreRecheck = 50 * time.Millisecond

// verifyState is the verifiers' queues and counters.
type verifyState struct {
	queue chan *ledgerpb.ProposalRecord // accepted, to be decided
	park  chan parked                   // from workers to the parker

	parked        atomic.Int64  // waiting for their payment now
	waitedFound   atomic.Uint64 // decided after waiting for their payment
	rejectsByCode sync.Map      // reason -> *atomic.Uint64
}

type parked struct {
	rec      *ledgerpb.ProposalRecord
	deadline time.Time
}

func (v *verifyState) countReject(reason string) {
	c, _ := v.rejectsByCode.LoadOrStore(reason, new(atomic.Uint64))
	c.(*atomic.Uint64).Add(1)
}

// rejects returns the rejections by reason.
func (v *verifyState) rejects() map[string]uint64 {
	out := map[string]uint64{}
	v.rejectsByCode.Range(func(k, c any) bool {
		out[k.(string)] = c.(*atomic.Uint64).Load()
		return true
	})
	return out
}

// enqueueVerify hands an accepted proposal to the verifiers. The queue holds
// MaxPending, and at most MaxPending proposals are pending.
func (p *Pipeline) enqueueVerify(rec *ledgerpb.ProposalRecord) { p.verifier.queue <- rec }

// runVerifiers runs the workers and the parker until ctx ends.
func (p *Pipeline) runVerifiers(ctx context.Context, wg *sync.WaitGroup) {
	for range p.cfg.Verifiers {
		wg.Go(func() { p.verifyWorker(ctx) })
	}
	if p.cfg.VerifyPayments {
		wg.Go(func() { p.parker(ctx) })
		wg.Go(func() { p.followReorgs(ctx) })
	}
}

func (p *Pipeline) verifyWorker(ctx context.Context) {
	for {
		select {
		case rec := <-p.verifier.queue:
			if !p.cfg.VerifyPayments { // MOCK mode: nothing to match
				p.dispatch(rec, payment.ProposalPaid{}, true)
				continue
			}
			id := common.BytesToHash(rec.GetProposal().GetId())
			if paid, ok := p.observed(id); ok && !p.awaitsRestore(id, paid) {
				p.dispatch(rec, paid, true)
				continue
			}
			select {
			case p.verifier.park <- parked{rec, p.cfg.Now().Add(p.paymentWait(rec.GetProposal()))}:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// dispatch decides a proposal and hands the decision to the sender.
func (p *Pipeline) dispatch(rec *ledgerpb.ProposalRecord, paid payment.ProposalPaid, found bool) {
	prop := rec.GetProposal()
	item := p.decide(prop, paid, found)
	if item.Rejection == "" {
		p.setPending(prop.GetId(), func(r *ledgerpb.ProposalRecord) {
			r.Status, r.Payment = ledgerpb.Status_STATUS_VERIFIED, item.Payment
		})
	}
	// A rejected proposal stays PENDING until its rejection is applied: a
	// terminal status is only ever reported from replicated state.
	p.decided <- item // capacity MaxPending, and at most MaxPending are pending
}

// orphaned reports whether a payment for id was observed and then taken
// back by a reorg.
func (p *Pipeline) orphaned(id common.Hash) bool {
	r := p.retractions()
	if r == nil {
		return false
	}
	_, ok := r.Retracted(id)
	return ok
}

// awaitsRestore reports whether paid is a log a reorg took back and the
// chain then took again (the index's last retraction for id names it) while
// id's applied record still carries the retraction's mark without it: a
// decision on the log would be rejected payment_orphaned if it reached the
// raft log before the leader's restoring PaymentReorg (reorgs.go), so it
// waits for that entry to be applied.
func (p *Pipeline) awaitsRestore(id common.Hash, paid payment.ProposalPaid) bool {
	r := p.retractions()
	if r == nil {
		return false
	}
	x, ok := r.Retracted(id)
	if !ok || x.BlockHash != paid.BlockHash || x.LogIndex != paid.LogIndex {
		return false
	}
	rec, found, err := p.record(id)
	if err != nil || !found {
		// Without a readable record there is no mark to wait for; the
		// decision's apply checks the mark in any case.
		return false
	}
	m := rec.GetPaymentOrphaned()
	return m != nil && common.BytesToHash(m.GetBlockHash()) == paid.BlockHash && uint(m.GetLogIndex()) == paid.LogIndex &&
		m.GetReplacement() == nil
}

// dispatchOrphaned rejects a proposal whose payment a reorg took back and
// the chain did not mine again: payment_orphaned, replicated like every
// rejection.
func (p *Pipeline) dispatchOrphaned(rec *ledgerpb.ProposalRecord) {
	item := &ledgerpb.BatchItem{Proposal: rec.GetProposal(), Rejection: string(apierror.PaymentOrphaned)}
	p.stats.rejected.Add(1)
	p.verifier.countReject(item.Rejection)
	p.cfg.Events.Rejected(item.Rejection, common.BytesToAddress(rec.GetProposal().GetWallet()), common.BytesToHash(rec.GetProposal().GetId()))
	p.decided <- item // capacity MaxPending, and at most MaxPending are pending
}

// parker holds the proposals waiting for their payment (see Verifiers).
func (p *Pipeline) parker(ctx context.Context) {
	waiting := map[common.Hash]parked{}
	var deadlines deadlineHeap
	var lastScan time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// changed is taken before each scan, so a payment observed during the
	// scan closes it and is looked at by the next one.
	changed, feedChanged := p.payments.Changed(), p.cfg.Feed.Changed()
	// recheck is set while a waiting proposal's payment awaits its
	// restoration (awaitsRestore).
	var recheck <-chan time.Time
	ready := func(id common.Hash) (payment.ProposalPaid, bool) {
		paid, ok := p.observed(id)
		if ok && p.awaitsRestore(id, paid) {
			if recheck == nil {
				recheck = time.After(restoreRecheck)
			}
			return paid, false
		}
		return paid, ok
	}
	for {
		p.verifier.parked.Store(int64(len(waiting)))
		next := time.Hour
		if len(deadlines) > 0 {
			next = max(0, deadlines[0].deadline.Sub(p.cfg.Now()))
		}
		timer.Reset(next)
		select {
		case w := <-p.verifier.park:
			id := common.BytesToHash(w.rec.GetProposal().GetId())
			// The payment may have been observed after the worker looked
			// and before the last scan: look once more.
			if paid, ok := ready(id); ok {
				p.verifier.waitedFound.Add(1)
				p.dispatch(w.rec, paid, true)
				continue
			}
			waiting[id] = w
			heap.Push(&deadlines, deadline{id, w.deadline})
		case <-feedChanged:
			feedChanged = p.cfg.Feed.Changed()
			p.dispatchReady(waiting, ready)
		case <-changed:
			if wait := parkScanInterval - time.Since(lastScan); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return
				}
			}
			lastScan = time.Now()
			changed = p.payments.Changed()
			p.dispatchReady(waiting, ready)
		case <-recheck:
			recheck = nil
			p.dispatchReady(waiting, ready)
		case <-timer.C:
			now := p.cfg.Now()
			for len(deadlines) > 0 && !deadlines[0].deadline.After(now) {
				d := heap.Pop(&deadlines).(deadline)
				w, ok := waiting[d.id]
				if !ok || !w.deadline.Equal(d.deadline) {
					continue // decided meanwhile
				}
				delete(waiting, d.id)
				// One last look: the payment may have arrived since the
				// scan. One still awaiting its restoration is decided
				// now too: its wait is over.
				paid, found := p.observed(d.id)
				if !found && p.orphaned(d.id) {
					p.dispatchOrphaned(w.rec)
					continue
				}
				if !found && p.cfg.Feed.Position().Stale != "" {
					w.deadline = now.Add(p.cfg.PaymentWait)
					waiting[d.id] = w
					heap.Push(&deadlines, deadline{d.id, w.deadline})
					continue
				}
				p.dispatch(w.rec, paid, found)
			}
		case <-ctx.Done():
			return
		}
	}
}

// dispatchReady decides the waiting proposals whose payment is ready.
func (p *Pipeline) dispatchReady(waiting map[common.Hash]parked, ready func(common.Hash) (payment.ProposalPaid, bool)) {
	for id, w := range waiting {
		if paid, ok := ready(id); ok {
			delete(waiting, id)
			p.verifier.waitedFound.Add(1)
			p.dispatch(w.rec, paid, true)
		}
	}
}

type deadline struct {
	id       common.Hash
	deadline time.Time
}

// deadlineHeap orders parked proposals by the end of their wait.
type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// VerifierStats are the verifiers' counters (see Stats).
type VerifierStats struct {
	Workers     int               `json:"workers"`
	Queued      int               `json:"queued"`      // accepted, waiting for a worker
	Parked      int               `json:"parked"`      // waiting for their payment
	WaitedFound uint64            `json:"waitedFound"` // decided after their payment arrived
	Rejected    map[string]uint64 `json:"rejectedByReason"`
}

func (p *Pipeline) verifierStats() VerifierStats {
	return VerifierStats{Workers: p.cfg.Verifiers, Queued: len(p.verifier.queue), Parked: int(p.verifier.parked.Load()),
		WaitedFound: p.verifier.waitedFound.Load(), Rejected: p.verifier.rejects()}
}
