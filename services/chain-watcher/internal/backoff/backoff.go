// Package backoff computes the waits between retries: exponential, capped,
// with jitter, and waits them out unless the context ends first.
//
// The random source is passed in, so a test can make the waits exact; there
// is no package-level state.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy describes a sequence of waits: Initial, then doubling up to Max,
// each shortened by a random part of at most Jitter of it.
type Policy struct {
	// Initial is the first wait.
	Initial time.Duration
	// Max caps every wait; 0 means no cap besides overflow.
	Max time.Duration
	// Jitter is the fraction of each wait that is random, from 0 to 1: a
	// wait d becomes d - Jitter*d*r with r uniform in [0, 1). Several
	// watchers, or one watcher's endpoints, that failed together then do
	// not retry a recovering provider in lockstep.
	Jitter float64
}

// Backoff is a Policy in progress. It is not safe for concurrent use.
type Backoff struct {
	policy  Policy
	rand    func() float64
	attempt int
}

// New returns a Backoff at its first wait. rand returns numbers in [0, 1);
// nil means math/rand/v2's Float64.
func New(p Policy, rand func() float64) *Backoff {
	if rand == nil {
		rand = defaultRand
	}
	p.Jitter = min(max(p.Jitter, 0), 1)
	return &Backoff{policy: p, rand: rand}
}

func defaultRand() float64 { return rand.Float64() }

// Next returns the wait before the next retry and moves on.
func (b *Backoff) Next() time.Duration {
	d := Delay(b.policy, b.attempt)
	b.attempt++
	if b.policy.Jitter > 0 && d > 0 {
		r := min(max(b.rand(), 0), 1)
		d -= time.Duration(float64(d) * b.policy.Jitter * r)
	}
	return d
}

// Reset starts the sequence again (after a success).
func (b *Backoff) Reset() { b.attempt = 0 }

// Attempts is how many waits Next has returned since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }

// Delay is the wait before retry number attempt (from 0) without jitter:
// Initial * 2^attempt, capped at Max, never overflowing.
func Delay(p Policy, attempt int) time.Duration {
	d := max(p.Initial, 0)
	for range attempt {
		if p.Max > 0 && d >= p.Max || d > time.Duration(1<<62) {
			break
		}
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	return d
}

// Sleep waits d, or until ctx ends, when it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
