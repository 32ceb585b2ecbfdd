package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
)

// The hold (ADR 0030). With payments verified, nothing unpaid is
// replicated: a submission whose payment this node has not observed (with
// its confirmations) waits here, on the request's goroutine, before it
// takes a place in the pending set or a byte of the raft log. It goes on
// the moment the payment is observed, or is refused when PaymentWait is
// over, retryable and with nothing kept:
//
//   - 503 payment_feed_stale when the feed cannot tell (no recent status
//     from the chain-watcher, the watcher far behind the chain, this node's
//     payment index behind the stream): a missing payment is never declared
//     on a stale feed;
//   - otherwise 402 payment_not_found, which says what the feed knows: the
//     payment seen on chain and not confirmed yet, or no payment in any
//     block up to the head when the submission arrived (the watcher's cursor
//     has passed it and the index holds all it published), or not observed
//     yet.
//
// Waiting submissions are bounded per wallet, per client and in bytes
// (their messages): past a bound a submission is refused at once, 402
// payment_not_found, retryable. While the client's or the byte bound is
// reached, intake refuses an unpaid submission before it decodes the form
// and hashes the message (RefuseEarly): those are most of what an unpaid
// flood costs the node, a message being up to a MiB. So fresh keys flooding unpaid proposals
// cost the cluster nothing but this node's bounded memory and their own
// requests, and the pending set, the raft log and paying users' capacity
// are left alone.

// Feed is how far the chain feed has come on this node: what the
// chain-watcher reports and whether this node's payment index holds all it
// published. Its methods are safe for concurrent use and return at once.
type Feed interface {
	// Position returns the feed's latest figures.
	Position() FeedPosition
	// Seen returns the block of the payment for id that the watcher has
	// seen on chain and not published yet (too few confirmations).
	Seen(id common.Hash) (block uint64, ok bool)
	// Changed is closed at the feed's next change (a new watcher status).
	Changed() <-chan struct{}
}

// FeedPosition is the chain feed as one node sees it.
type FeedPosition struct {
	// Known is false before the chain-watcher's first status.
	Known bool
	// Head is the chain's head block as the watcher last reported it;
	// Cursor the last block whose payments it has all published.
	Head, Cursor uint64
	// Stale names why the feed cannot be trusted to be complete now, ""
	// when it can: a missing or old watcher status, the watcher behind
	// the chain, this node's payment index behind the stream.
	Stale string
}

// clientKey is the context key of the client a submission came from.
type clientKey struct{}

// WithClient returns ctx naming the client (an address or its /64) a
// submission came from; the hold bounds each client's waiting submissions.
// Without one, only the wallet and byte bounds apply.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}

// holdRetryAfter is the Retry-After of a refusal by the hold: about a
// poll of the watcher, so a client's retry finds its next figures.
const holdRetryAfter = 2 * time.Second

// maxImpatient bounds the clients remembered as refused at a bound and
// told to retry later (holds.retryAt): 64 Ki entries of a few dozen bytes.
// Past it a refused client is not remembered, and its next submission is
// read and screened like any other.
const maxImpatient = 1 << 16

// holds counts the submissions waiting for their payment.
type holds struct {
	mu       sync.Mutex
	count    int
	bytes    int
	byWallet map[common.Address]int
	byClient map[string]int
	// refused counts the submissions refused at once, a bound reached;
	// impatient those refused before they were read, their client having
	// come back before the Retry-After it was given (RefuseImpatient).
	refused, impatient uint64
	// retryAt is when each client refused at a bound may submit again;
	// swept is when expired entries were last dropped from it.
	retryAt map[string]time.Time
	swept   time.Time
}

// refusedClient remembers that client was refused at a bound at now and
// told to retry after holdRetryAfter; h.mu is held.
func (h *holds) refusedClient(client string, now time.Time) {
	if client == "" {
		return
	}
	if h.retryAt == nil {
		h.retryAt = map[string]time.Time{}
	}
	if _, ok := h.retryAt[client]; !ok && len(h.retryAt) >= maxImpatient {
		// Entries expire after holdRetryAfter, so one sweep that long
		// keeps the map's size without a walk of it per refusal.
		if now.Sub(h.swept) >= holdRetryAfter {
			h.swept = now
			for c, at := range h.retryAt {
				if !at.After(now) {
					delete(h.retryAt, c)
				}
			}
		}
		if len(h.retryAt) >= maxImpatient {
			return
		}
	}
	h.retryAt[client] = now.Add(holdRetryAfter)
}

// refuse counts a submission of client refused at a bound at now, before
// take was asked.
func (h *holds) refuse(client string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refused++
	h.refusedClient(client, now)
}

// impatientAt reports whether client, refused at the client's or the
// byte bound, comes back at now before the Retry-After it was given while
// that bound is still reached for a submission of n bytes; if so the
// refusal is counted and the client's wait starts again.
func (h *holds) impatientAt(cfg Config, client string, n int, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.retryAt[client]
	if !ok {
		return false
	}
	if !at.After(now) {
		delete(h.retryAt, client)
		return false
	}
	if !h.fullLocked(cfg, client, n) {
		return false
	}
	h.impatient++
	h.retryAt[client] = now.Add(holdRetryAfter)
	return true
}

// full reports whether a submission of client carrying n bytes would be
// refused at the client's or the byte bound.
func (h *holds) full(cfg Config, client string, n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fullLocked(cfg, client, n)
}

func (h *holds) fullLocked(cfg Config, client string, n int) bool {
	return (client != "" && h.byClient[client] >= cfg.HoldPerClient) || h.bytes+n > cfg.HoldBytes
}

// take reserves a place for one waiting submission of wallet and client
// carrying n bytes; release frees it. ok is false at a bound.
func (h *holds) take(cfg Config, wallet common.Address, client string, n int, now time.Time) (release func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byWallet == nil {
		h.byWallet, h.byClient = map[common.Address]int{}, map[string]int{}
	}
	if h.fullLocked(cfg, client, n) {
		h.refused++
		h.refusedClient(client, now)
		return nil, false
	}
	if h.byWallet[wallet] >= cfg.HoldPerWallet {
		h.refused++
		return nil, false
	}
	h.count++
	h.bytes += n
	h.byWallet[wallet]++
	if client != "" {
		h.byClient[client]++
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.count--
		h.bytes -= n
		if h.byWallet[wallet]--; h.byWallet[wallet] == 0 {
			delete(h.byWallet, wallet)
		}
		if client != "" {
			if h.byClient[client]--; h.byClient[client] == 0 {
				delete(h.byClient, client)
			}
		}
	}, true
}

// HoldStats are the hold's figures (see Stats).
type HoldStats struct {
	Waiting int    `json:"waiting"`
	Bytes   int    `json:"bytes"`
	Refused uint64 `json:"refusedAtBound"` // refused at once, a bound reached
	// Impatient counts the submissions refused unread, their client back
	// before the Retry-After of its last refusal at a bound.
	Impatient uint64 `json:"refusedImpatient"`
}

func (h *holds) stats() HoldStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HoldStats{Waiting: h.count, Bytes: h.bytes, Refused: h.refused, Impatient: h.impatient}
}

// observed returns the payment observed for id once it has its
// confirmations: its block at least Confirmations below the head the
// chain-watcher reports. A payment the watcher's status does not yet
// vouch for (one published by anyone but an honest watcher ahead of its
// status, or none received) is not observed yet.
func (p *Pipeline) observed(id common.Hash) (payment.ProposalPaid, bool) {
	paid, ok := p.payments.Lookup(id)
	if !ok {
		return paid, false
	}
	pos := p.cfg.Feed.Position()
	return paid, pos.Known && paid.BlockNumber+p.cfg.Confirmations <= pos.Head
}

// awaitPayment holds a submission until its payment is observed (nil), or
// refuses it (see the package's hold above). n is what the submission
// weighs: its message.
func (p *Pipeline) awaitPayment(ctx context.Context, id common.Hash, wallet common.Address, n int) error {
	if _, ok := p.observed(id); ok {
		return nil
	}
	release, ok := p.held.take(p.cfg, wallet, clientOf(ctx), n, p.cfg.Now())
	if !ok {
		return holdFull(id)
	}
	defer release()
	arrival := p.cfg.Feed.Position()
	timer := time.NewTimer(p.cfg.PaymentWait)
	defer timer.Stop()
	for {
		observed, paymentChanged, feedChanged, stop := p.watchPayment(id)
		if observed {
			stop()
			return nil
		}
		select {
		case <-paymentChanged:
		case <-feedChanged:
		case <-timer.C:
			stop()
			return p.notObserved(id, arrival)
		case <-ctx.Done():
			stop()
			return apierror.New(apierror.Timeout, "the request ended while the proposal waited for its payment; nothing was kept: resubmit it")
		}
		stop()
	}
}

// watchPayment reports whether id's payment is observed and, when it is
// not, the changes that may make it so: its payment's arrival (or
// retraction), and, once the payment is in the index, the feed's next head,
// which brings its confirmations (nil otherwise: not waited on). Other
// payments and feed changes do not wake a waiter, so a full hold costs
// nothing while payments arrive and the chain moves. stop ends the watch.
func (p *Pipeline) watchPayment(id common.Hash) (observed bool, paymentChanged, feedChanged <-chan struct{}, stop func()) {
	// Taken before looking, so a change in between wakes the wait.
	paymentChanged, stop = p.payments.Watch(id)
	if _, ok := p.payments.Lookup(id); ok {
		feedChanged = p.cfg.Feed.Changed()
	}
	_, observed = p.observed(id)
	return observed, paymentChanged, feedChanged, stop
}

// holdFull is the refusal of a submission that finds the hold full.
func holdFull(id common.Hash) error {
	e := apierror.New(apierror.PaymentNotFound,
		"the payment for proposal %s is not observed yet, and too many submissions are already waiting for theirs; retry shortly", id.Hex())
	e.RetryAfter = holdRetryAfter
	return e
}

// RefuseEarly returns the refusal a submission under id of at most n
// bytes, from the context's client (WithClient), gets at once because the
// hold is full for it (the client's or the byte bound) and its payment is
// not observed; nil when it may go on to be parsed and submitted. Intake
// calls it before it decodes the form (proposal.ScanID finds the id), so a
// flood of unpaid submissions costs little more than reading them.
func (p *Pipeline) RefuseEarly(ctx context.Context, id common.Hash, n int) error {
	if !p.cfg.VerifyPayments || !p.held.full(p.cfg, clientOf(ctx), n) {
		return nil
	}
	if _, ok := p.observed(id); ok {
		return nil
	}
	p.mu.Lock()
	known, err := p.known(id)
	p.mu.Unlock()
	if err != nil || known != nil {
		return nil // the records answer it (Submit says how)
	}
	p.held.refuse(clientOf(ctx), p.cfg.Now())
	return holdFull(id)
}

// RefuseImpatient returns the refusal, 429 rate_limited, of a submission
// of at most n bytes whose client (WithClient) was refused at the client's
// or the byte bound of the hold, comes back before the Retry-After it was
// given, and finds that bound still reached; nil when it may go on. Intake
// calls it before it reads the form: a flood that ignores Retry-After
// costs the node the requests themselves (net/http drains a small unread
// body to keep the connection), none of their decoding or checks, and its
// wait starts again at each early return. A client that waits as told, or
// finds room, is read as any other.
func (p *Pipeline) RefuseImpatient(ctx context.Context, n int) error {
	if !p.cfg.VerifyPayments {
		return nil
	}
	if !p.held.impatientAt(p.cfg, clientOf(ctx), n, p.cfg.Now()) {
		return nil
	}
	e := apierror.New(apierror.RateLimited,
		"this client was refused at the payment hold's bound and told to retry after %s, and came back sooner; retry after %s", holdRetryAfter, holdRetryAfter)
	e.RetryAfter = holdRetryAfter
	return e
}

// notObserved is the refusal of a submission whose payment did not come
// within its wait; arrival is the feed when the submission arrived.
func (p *Pipeline) notObserved(id common.Hash, arrival FeedPosition) error {
	pos := p.cfg.Feed.Position()
	if pos.Stale != "" {
		e := apierror.New(apierror.PaymentFeedStale,
			"cannot tell whether proposal %s is paid: %s; nothing was kept, retry later", id.Hex(), pos.Stale)
		e.Details = map[string]any{"cause": pos.Stale}
		e.RetryAfter = 2 * holdRetryAfter
		return e
	}
	var e *apierror.Error
	switch block, seen := p.cfg.Feed.Seen(id); {
	case seen:
		e = apierror.New(apierror.PaymentNotFound,
			"the payment for proposal %s is in block %d and has %d of the %d confirmations required; nothing was kept, retry then",
			id.Hex(), block, pos.Head-min(pos.Head, block), p.cfg.Confirmations)
	case arrival.Known && pos.Cursor >= arrival.Head:
		e = apierror.New(apierror.PaymentNotFound,
			"no payment for proposal %s in the chain up to block %d, the head when it arrived; nothing was kept: pay, then resubmit", id.Hex(), arrival.Head)
		e.Details = map[string]any{"checkedThroughBlock": arrival.Head}
	default:
		e = apierror.New(apierror.PaymentNotFound,
			"the payment for proposal %s is not observed yet (the chain-watcher has published up to block %d); nothing was kept, retry shortly",
			id.Hex(), pos.Cursor)
	}
	e.RetryAfter = holdRetryAfter
	return e
}
