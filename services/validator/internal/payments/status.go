package payments

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/payment"
)

// DefaultStatusBucket is the chain-watcher's key-value bucket, where it
// keeps its checkpoint and the chain status (status-<chainId>).
const DefaultStatusBucket = "CHAIN_WATCHER"

// ChainStatus follows the chain-watcher's status of one chain and keeps the
// latest in memory. It is observability, not replicated state: every
// validator reads it on its own, nothing is decided from it but what the
// operator views show (the chain's head, the watcher's lag, the payments
// OBSERVED and not yet confirmed). It is safe for concurrent use; Run needs
// JS, ChainID and Log.
type ChainStatus struct {
	JS      jetstream.JetStream
	Bucket  string // empty: DefaultStatusBucket
	ChainID uint64
	Log     *zap.Logger
	// Retry is the pause before watching again after the bucket was
	// missing or the watch failed; 0 means one second.
	Retry time.Duration
	Now   func() time.Time // nil: time.Now
	// StaleAfter is the age past which the status counts as stopped (the
	// watcher is not running, or cannot write); 0: DefaultStatusStale.
	StaleAfter time.Duration

	mu         sync.Mutex
	status     *payment.WatcherStatus
	receivedAt time.Time
	byTx       map[common.Hash][]payment.PendingPayment
	rejected   uint64
	lastErr    string
	changed    chan struct{} // closed and replaced at every status taken or forgotten
}

// Changed is closed at the next status taken (or forgotten).
func (c *ChainStatus) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// signal wakes the Changed waiters; c.mu is held.
func (c *ChainStatus) signal() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Latest returns the last status received and when; ok is false before
// the first one (and after the watcher's key was deleted).
func (c *ChainStatus) Latest() (s payment.WatcherStatus, receivedAt time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == nil {
		return payment.WatcherStatus{}, time.Time{}, false
	}
	return *c.status, c.receivedAt, true
}

// Pending returns the payments of transaction tx that the latest status
// lists as seen on chain and not published yet, in log order.
func (c *ChainStatus) Pending(tx common.Hash) []payment.PendingPayment {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]payment.PendingPayment(nil), c.byTx[tx]...)
}

// PendingAll returns every payment the latest status lists, in chain order.
func (c *ChainStatus) PendingAll() []payment.PendingPayment {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == nil {
		return nil
	}
	return append([]payment.PendingPayment(nil), c.status.Pending...)
}

// Rejected counts the values that did not decode (or named another chain),
// with the last such error.
func (c *ChainStatus) Rejected() (uint64, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rejected, c.lastErr
}

// Observe takes one value of the status key: a value that does not decode
// is counted and leaves the last good status in place; nil (the key was
// deleted) forgets it.
func (c *ChainStatus) Observe(value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if value == nil {
		c.status, c.byTx = nil, nil
		c.signal()
		return nil
	}
	s, err := payment.DecodeWatcherStatus(value)
	if err == nil && s.ChainID != c.ChainID {
		err = fmt.Errorf("%w: status of chain %d, this validator follows %d", payment.ErrMalformedStatus, s.ChainID, c.ChainID)
	}
	if err != nil {
		c.rejected++
		c.lastErr = err.Error()
		return err
	}
	byTx := make(map[common.Hash][]payment.PendingPayment, len(s.Pending))
	for _, p := range s.Pending {
		byTx[p.TxHash] = append(byTx[p.TxHash], p)
	}
	c.status, c.receivedAt, c.byTx = &s, c.now(), byTx
	c.signal()
	return nil
}

// Stale reports, for a status received at receivedAt, whether it is older
// than StaleAfter: the watcher that wrote it counts as stopped.
func (c *ChainStatus) Stale(receivedAt time.Time) (age time.Duration, stale bool) {
	age = c.now().Sub(receivedAt)
	return age, age > c.staleAfter()
}

func (c *ChainStatus) staleAfter() time.Duration {
	if c.StaleAfter > 0 {
		return c.StaleAfter
	}
	return DefaultStatusStale
}

func (c *ChainStatus) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Run watches the status key until ctx ends: the current value first, so
// a restarted validator knows the chain at once, then every change. The
// bucket may not exist yet (the watcher declares it): Run waits for it.
func (c *ChainStatus) Run(ctx context.Context) {
	retry := c.Retry
	if retry <= 0 {
		retry = time.Second
	}
	for ctx.Err() == nil {
		err := c.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			c.Log.Info("chain status bucket not declared yet; waiting for the chain-watcher", zap.String("bucket", c.bucket()))
		} else {
			c.Log.Warn("chain status watch interrupted; watching again", zap.Error(err), zap.Duration("after", retry))
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
		}
	}
}

func (c *ChainStatus) bucket() string {
	if c.Bucket == "" {
		return DefaultStatusBucket
	}
	return c.Bucket
}

func (c *ChainStatus) watch(ctx context.Context) error {
	kv, err := c.JS.KeyValue(ctx, c.bucket())
	if err != nil {
		return fmt.Errorf("chain status bucket %s: %w", c.bucket(), err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.Watch(ctx, payment.StatusKey(c.ChainID))
	if err != nil {
		return fmt.Errorf("watch %s: %w", payment.StatusKey(c.ChainID), err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch ended")
			}
			if e == nil { // the current value, if any, has been delivered
				continue
			}
			var value []byte
			if e.Operation() == jetstream.KeyValuePut {
				value = e.Value()
			}
			if err := c.Observe(value); err != nil {
				c.Log.Error("chain status does not decode; the last good one is kept", zap.Uint64("revision", e.Revision()), zap.Error(err))
			}
		}
	}
}
