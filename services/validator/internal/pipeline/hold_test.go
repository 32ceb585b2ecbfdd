package pipeline

import (
	"context"
	"crypto/ecdsa"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
)

// movableFeed is a chain feed a test moves.
type movableFeed struct {
	mu      sync.Mutex
	pos     FeedPosition
	seen    map[common.Hash]uint64
	changed chan struct{}
}

func newMovableFeed(pos FeedPosition) *movableFeed {
	return &movableFeed{pos: pos, seen: map[common.Hash]uint64{}, changed: make(chan struct{})}
}

func (f *movableFeed) Position() FeedPosition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

func (f *movableFeed) Seen(id common.Hash) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.seen[id]
	return b, ok
}

func (f *movableFeed) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *movableFeed) move(edit func(*FeedPosition, map[common.Hash]uint64)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	edit(&f.pos, f.seen)
	close(f.changed)
	f.changed = make(chan struct{})
}

func paidAt(id common.Hash, block uint64) payment.ProposalPaid {
	return payment.ProposalPaid{Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: id, Class: payment.Standard,
		Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH), BlockNumber: block, BlockHash: common.BigToHash(common.Big1)}
}

// async runs submit and hands back its outcome.
func async(submit func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- submit() }()
	return done
}

// TestHoldWaitsForConfirmedPayment: a submission whose payment is not
// observed waits at intake, with nothing replicated; a payment published
// but short of its confirmations (by the head the watcher reports) does
// not let it go; once the head is far enough, the proposal is decided at
// once and commits.
func TestHoldWaitsForConfirmedPayment(t *testing.T) {
	pays := payments.NewIndex()
	feed := newMovableFeed(FeedPosition{Known: true, Head: 100, Cursor: 97})
	p, l := startWith(t, pays, nil, nil, func(c *Config) { c.Feed, c.Confirmations, c.PaymentWait = feed, 3, 10*time.Second })
	key := payerKey()
	id := common.HexToHash("0x0401")

	done := async(func() error {
		s, created, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard))
		if err == nil && (!created || s.Status == "") {
			t.Errorf("answer %+v %v", s, created)
		}
		return err
	})
	waitStats(t, p, "held", func(s Stats) bool { return s.Holds.Waiting == 1 && s.Holds.Bytes > 0 })
	pays.Observe(paidAt(id, 99)) // published, but the head is only 1 block past it
	time.Sleep(50 * time.Millisecond)
	l.mu.Lock()
	records := len(l.records)
	l.mu.Unlock()
	if st := p.Stats(); st.Holds.Waiting != 1 || st.Pending != 0 || records != 0 {
		t.Fatalf("a payment short of its confirmations let the proposal go: %+v", st)
	}
	feed.move(func(pos *FeedPosition, _ map[common.Hash]uint64) { pos.Head, pos.Cursor = 102, 99 })
	if err := <-done; err != nil {
		t.Fatalf("held submission: %v", err)
	}
	if s := final(t, p, id); s.Status != api.StatusCommitted {
		t.Fatalf("proposal %s %q", s.Status, s.Reason)
	}
	if st := p.Stats(); st.Holds.Waiting != 0 || st.Holds.Bytes != 0 {
		t.Fatalf("hold not released: %+v", st.Holds)
	}
}

// TestHoldRefusals: what a held submission is told at the end of its wait
// depends on what the feed knows; each refusal is retryable, with
// Retry-After, and leaves nothing behind.
func TestHoldRefusals(t *testing.T) {
	feed := newMovableFeed(FeedPosition{Known: true, Head: 100, Cursor: 97})
	p, _ := startWith(t, paymentsByID{}, nil, nil, func(c *Config) { c.Feed, c.Confirmations, c.PaymentWait = feed, 3, 100*time.Millisecond })
	key := payerKey()
	cases := []struct {
		name   string
		move   func(*FeedPosition, map[common.Hash]uint64)
		code   apierror.Code
		status int
		says   string
	}{
		{"not observed yet", func(*FeedPosition, map[common.Hash]uint64) {}, apierror.PaymentNotFound, http.StatusPaymentRequired, "not observed yet"},
		{"seen on chain", func(_ *FeedPosition, seen map[common.Hash]uint64) { seen[common.HexToHash("0x0502")] = 99 },
			apierror.PaymentNotFound, http.StatusPaymentRequired, "has 1 of the 3 confirmations"},
		{"stale feed", func(pos *FeedPosition, _ map[common.Hash]uint64) {
			pos.Stale = "the chain-watcher's last status is 2m0s old"
		},
			apierror.PaymentFeedStale, http.StatusServiceUnavailable, "cannot tell whether"},
		{"missing, with evidence", func(pos *FeedPosition, _ map[common.Hash]uint64) { pos.Stale, pos.Cursor = "", 101 },
			apierror.PaymentNotFound, http.StatusPaymentRequired, "up to block 100"},
	}
	for i, c := range cases {
		id := common.BigToHash(common.Big0.SetUint64(uint64(0x0501 + i)))
		feed.move(c.move)
		started := time.Now()
		_, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard))
		e := apierror.As(err)
		if e == nil || e.Code != c.code || e.Status() != c.status || !e.Retryable || e.RetryAfter <= 0 || !strings.Contains(e.Message, c.says) {
			t.Fatalf("%s: %v, want %d %s saying %q", c.name, err, c.status, c.code, c.says)
		}
		if time.Since(started) < 100*time.Millisecond {
			t.Errorf("%s: refused before the wait was over", c.name)
		}
		if _, err := p.Status(id); apierror.CodeOf(err) != apierror.NotFound {
			t.Fatalf("%s: the refused proposal left a status (%v)", c.name, err)
		}
	}
	if st := p.Stats(); st.Pending != 0 || st.Accepted != 0 || st.Batches != 0 || st.Holds.Waiting != 0 {
		t.Fatalf("something of the refused submissions was kept or replicated: %+v", st)
	}
}

// TestHoldBounds: held submissions are bounded per wallet, per client and
// in bytes; past a bound a submission is refused at once, retryable, and
// the others keep waiting.
func TestHoldBounds(t *testing.T) {
	paidID := common.HexToHash("0x0798")
	p, _ := startWith(t, paymentsByID{paidID: paidAt(paidID, 1)}, nil, nil, func(c *Config) {
		c.HoldPerWallet, c.HoldPerClient, c.HoldBytes, c.PaymentWait = 2, 3, 1<<20, 10*time.Second
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held []<-chan error
	hold := func(client string, n int64) {
		key, _ := crypto.GenerateKey()
		id := common.BigToHash(common.Big0.SetInt64(n))
		held = append(held, async(func() error {
			_, _, err := p.Submit(WithClient(ctx, client), submission(t, key, id, id, payment.Standard))
			return err
		}))
	}
	refusedAtOnce := func(what string, ctx context.Context, key *ecdsa.PrivateKey, n int64) {
		t.Helper()
		id := common.BigToHash(common.Big0.SetInt64(n))
		started := time.Now()
		_, _, err := p.Submit(ctx, submission(t, key, id, id, payment.Standard))
		if e := apierror.As(err); e == nil || e.Code != apierror.PaymentNotFound || !e.Retryable || e.RetryAfter <= 0 || time.Since(started) > 5*time.Second {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// One wallet: two held, the third refused at once.
	wallet := payerKey()
	for i := range 2 {
		id := common.BigToHash(common.Big0.SetInt64(int64(0x0600 + i)))
		held = append(held, async(func() error {
			_, _, err := p.Submit(ctx, submission(t, wallet, id, id, payment.Standard))
			return err
		}))
	}
	waitStats(t, p, "two of one wallet held", func(s Stats) bool { return s.Holds.Waiting == 2 })
	refusedAtOnce("a wallet's third", ctx, wallet, 0x0602)

	// One client: three held (fresh keys), the fourth refused at once.
	for i := range 3 {
		hold("198.51.100.7", int64(0x0700+i))
	}
	waitStats(t, p, "three of one client held", func(s Stats) bool { return s.Holds.Waiting == 5 })
	fresh, _ := crypto.GenerateKey()
	refusedAtOnce("a client's fourth", WithClient(ctx, "198.51.100.7"), fresh, 0x0703)
	if st := p.Stats(); st.Holds.Refused != 2 || st.Holds.Waiting != 5 {
		t.Fatalf("holds %+v", st.Holds)
	}
	// Before its form is decoded, an unpaid submission of a client at its
	// bound is refused; another client's, or one the bytes still allow,
	// goes on.
	unpaid := common.HexToHash("0x0799")
	if e := apierror.As(p.RefuseEarly(WithClient(ctx, "198.51.100.7"), unpaid, 1000)); e == nil || e.Code != apierror.PaymentNotFound || !e.Retryable {
		t.Fatalf("early, a client at its bound: %v", e)
	}
	if err := p.RefuseEarly(WithClient(ctx, "198.51.100.7"), paidID, 1000); err != nil {
		t.Fatalf("early, a paid one of a client at its bound: %v", err)
	}
	if err := p.RefuseEarly(WithClient(ctx, "198.51.100.8"), unpaid, 1000); err != nil {
		t.Fatalf("early, another client: %v", err)
	}
	if e := apierror.As(p.RefuseEarly(WithClient(ctx, "198.51.100.8"), unpaid, 2<<20)); e == nil || e.Code != apierror.PaymentNotFound {
		t.Fatalf("early, past the byte bound: %v", e)
	}
	cancel()
	for _, done := range held {
		if err := <-done; apierror.CodeOf(err) != apierror.Timeout {
			t.Fatalf("held submission whose request ended: %v", err)
		}
	}
	waitStats(t, p, "all released", func(s Stats) bool { return s.Holds.Waiting == 0 && s.Holds.Bytes == 0 })
}

// TestStaleFeedDefersRejection: a proposal an earlier version accepted
// unpaid is not REJECTED payment_not_found while the feed is stale, even
// past its wait; once the feed is fresh again, it is.
func TestStaleFeedDefersRejection(t *testing.T) {
	feed := newMovableFeed(FeedPosition{Known: true, Head: 100, Cursor: 97, Stale: "no status from the chain-watcher yet"})
	p, l := startWith(t, paymentsByID{}, nil, nil, func(c *Config) { c.Feed, c.PaymentWait = feed, 100*time.Millisecond })
	id := common.HexToHash("0x0801")
	acceptEarlier(t, p, l, submission(t, payerKey(), id, id, payment.Standard))
	waitStats(t, p, "adopted and parked", func(s Stats) bool { return s.Verifiers.Parked == 1 })
	time.Sleep(300 * time.Millisecond) // three waits
	if s, err := p.Status(id); err != nil || s.Status != api.StatusPending {
		t.Fatalf("decided on a stale feed: %+v %v", s, err)
	}
	feed.move(func(pos *FeedPosition, _ map[common.Hash]uint64) { pos.Stale = "" })
	if s := final(t, p, id); s.Status != api.StatusRejected || s.Reason != string(apierror.PaymentNotFound) {
		t.Fatalf("after the feed came back: %s %q", s.Status, s.Reason)
	}
}

// TestHoldRefusesImpatientClients: a client refused at its own or the byte
// bound and back before its Retry-After is refused unread (429) while the
// bound is still reached; a client that waits as told, finds room, or was
// refused at its wallet's bound only, is read as any other.
func TestHoldRefusesImpatientClients(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	p, _ := startWith(t, paymentsByID{}, nil, nil, func(c *Config) {
		c.HoldPerWallet, c.HoldPerClient, c.HoldBytes, c.PaymentWait = 1, 1, 1<<20, 10*time.Second
		c.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const client, other = "198.51.100.7", "198.51.100.8"
	wallet := payerKey()
	first := common.HexToHash("0x0a01")
	held := async(func() error {
		_, _, err := p.Submit(WithClient(ctx, client), submission(t, wallet, first, first, payment.Standard))
		return err
	})
	waitStats(t, p, "one held", func(s Stats) bool { return s.Holds.Waiting == 1 })

	// The same wallet from another client: refused at the wallet's bound,
	// which does not make that client impatient.
	second := common.HexToHash("0x0a02")
	if _, _, err := p.Submit(WithClient(ctx, other), submission(t, wallet, second, second, payment.Standard)); apierror.CodeOf(err) != apierror.PaymentNotFound {
		t.Fatalf("a wallet's second: %v", err)
	}
	if err := p.RefuseImpatient(WithClient(ctx, other), 100); err != nil {
		t.Fatalf("refused at the wallet's bound only, then refused unread: %v", err)
	}
	// The client at its bound: refused, then refused unread while it comes
	// back early, each early return starting its wait again.
	fresh, _ := crypto.GenerateKey()
	if _, _, err := p.Submit(WithClient(ctx, client), submission(t, fresh, second, second, payment.Standard)); apierror.CodeOf(err) != apierror.PaymentNotFound {
		t.Fatalf("a client's second: %v", err)
	}
	for range 2 {
		clock.Add(int64(holdRetryAfter / 2))
		e := apierror.As(p.RefuseImpatient(WithClient(ctx, client), 100))
		if e == nil || e.Code != apierror.RateLimited || !e.Retryable || e.RetryAfter != holdRetryAfter {
			t.Fatalf("back before its Retry-After: %v", e)
		}
	}
	if st := p.Stats(); st.Holds.Impatient != 2 {
		t.Fatalf("holds %+v", st.Holds)
	}
	if err := p.RefuseImpatient(WithClient(ctx, other), 100); err != nil {
		t.Fatalf("another client: %v", err)
	}
	// Back after its Retry-After: read again.
	clock.Add(int64(holdRetryAfter))
	if err := p.RefuseImpatient(WithClient(ctx, client), 100); err != nil {
		t.Fatalf("back after its Retry-After: %v", err)
	}
	// Refused again, but back early when the hold has room: read.
	if _, _, err := p.Submit(WithClient(ctx, client), submission(t, fresh, second, second, payment.Standard)); apierror.CodeOf(err) != apierror.PaymentNotFound {
		t.Fatalf("a client's second, again: %v", err)
	}
	cancel()
	if err := <-held; apierror.CodeOf(err) != apierror.Timeout {
		t.Fatalf("held submission whose request ended: %v", err)
	}
	waitStats(t, p, "released", func(s Stats) bool { return s.Holds.Waiting == 0 })
	if err := p.RefuseImpatient(WithClient(context.Background(), client), 100); err != nil {
		t.Fatalf("back early, the hold with room: %v", err)
	}
}

// TestHoldForgetsImpatientClientsWithinBound: the clients remembered stay
// within maxImpatient; once full, a new client is not remembered until
// the entries have expired and a sweep drops them.
func TestHoldForgetsImpatientClientsWithinBound(t *testing.T) {
	var h holds
	now := time.Now()
	for i := range maxImpatient + 10 {
		h.refusedClient(strconv.Itoa(i), now)
	}
	if len(h.retryAt) != maxImpatient {
		t.Fatalf("%d clients remembered, bound %d", len(h.retryAt), maxImpatient)
	}
	later := now.Add(holdRetryAfter)
	h.refusedClient("late", later)
	if len(h.retryAt) != 1 || h.retryAt["late"].IsZero() {
		t.Fatalf("after expiry: %d clients remembered, the new one %v", len(h.retryAt), h.retryAt["late"])
	}
}
