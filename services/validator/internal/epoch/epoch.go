// Package epoch tells the current and finalized epoch (ADR 0022).
//
// A MOCK-mode clock (NewMock) keeps its own time: it starts at epoch 1000
// when the validator starts, advances with wall time, and moves through the
// /api/mock/* surfaces (Advance, SetOffset).
//
// On chain-backed networks (NewChain, TESTNET and MAINNET) the chain says:
// the chain-watcher publishes the chain's current and finalized epoch on
// chain.<chainId>.epochs, and every update fed to Observe is adopted. Until
// the first one arrives the clock estimates from wall time: unix time
// divided by the epoch length (the watcher's block-time numbering), with
// finality current - 2. Once the chain has spoken its figures are used as
// they are, and they never go backwards: an update with a lower current or
// finalized epoch keeps the figure already adopted (counted in
// ChainState.Regressions). Between updates the figures stay where the last
// one left them, also when updates stop: the clock does not guess past the
// chain.
//
// Because figures never go back, one update far in the future would hold
// for good (every epoch final at once). An update is therefore bounded by
// the wall clock: its current epoch may run at most maxAhead epochs past
// unix time / length (ADR 0029). One beyond is refused whole, counted in
// ChainState.Ahead, and changes nothing.
package epoch

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultLength is 32 slots of 12 s.
const DefaultLength = 384 * time.Second

// MockStart is the first epoch of a MOCK-mode clock.
const MockStart = 1000

// DefaultMaxAhead is how many epochs an update's current epoch may run
// ahead of the wall-clock estimate: one covers clock skew and block
// timestamps slightly in the future, with a margin of a whole epoch.
const DefaultMaxAhead = 1

// Why Observe did not adopt an update (or part of it).
var (
	// ErrBehind: a figure was below the adopted one and was kept.
	ErrBehind = errors.New("epoch update behind the adopted epochs; its lower figure is kept")
	// ErrAhead: the current epoch is further ahead of the wall clock than
	// allowed; nothing of the update was taken.
	ErrAhead = errors.New("epoch update ahead of the wall clock; refused")
)

// FinalityLag is how many epochs behind the current one finality trails in
// the wall-clock estimate.
const FinalityLag = 2

// Clock is an epoch source: the chain's figures once observed, a wall-clock
// estimate before. It is safe for concurrent use.
type Clock struct {
	length time.Duration
	now    func() time.Time
	mock   bool // keeps its own time: Observe changes nothing
	// maxAhead bounds an update's current epoch: the wall-clock estimate
	// plus this many epochs.
	maxAhead uint64

	mu     sync.Mutex
	start  uint64    // epoch at origin before any shift
	base   uint64    // epoch at origin, start shifted by the MOCK surfaces
	origin time.Time // zero for the unix epoch
	chain  ChainState
}

// ChainState is what a chain-backed clock has adopted from the chain.
type ChainState struct {
	// Adopted is false until the first update: the clock estimates until
	// then, and Current and Finalized below are zero.
	Adopted            bool
	Current, Finalized uint64
	// Updates counts the updates observed, Regressions those with a figure
	// below the adopted one (that figure was kept), Ahead those refused as
	// further ahead of the wall clock than allowed.
	Updates, Regressions, Ahead uint64
	// At is when the last update was observed.
	At time.Time
}

// NewMock returns a clock at MockStart now.
func NewMock(length time.Duration, now func() time.Time) *Clock {
	return &Clock{length: length, now: now, mock: true, start: MockStart, base: MockStart, origin: now()}
}

// NewChain returns a clock that follows the chain's updates (Observe),
// estimating unix time / length until the first, and refusing updates more
// than maxAhead epochs past that estimate (0: DefaultMaxAhead).
func NewChain(length time.Duration, maxAhead uint64, now func() time.Time) *Clock {
	if maxAhead == 0 {
		maxAhead = DefaultMaxAhead
	}
	return &Clock{length: length, now: now, origin: time.Unix(0, 0), maxAhead: maxAhead}
}

// Current returns the current epoch.
func (c *Clock) Current() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current()
}

func (c *Clock) current() uint64 {
	if c.chain.Adopted {
		return c.chain.Current
	}
	return c.estimate()
}

// estimate is the epoch by wall time alone.
func (c *Clock) estimate() uint64 {
	elapsed := c.now().Sub(c.origin)
	if elapsed < 0 {
		elapsed = 0
	}
	return c.base + uint64(elapsed/c.length)
}

// Finalized returns the newest final epoch.
func (c *Clock) Finalized() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chain.Adopted {
		return c.chain.Finalized
	}
	cur := c.current()
	if cur < FinalityLag {
		return 0
	}
	return cur - FinalityLag
}

// Observe adopts the chain's current and finalized epoch, as the
// chain-watcher published them. An update whose current epoch is more than
// maxAhead epochs past the wall-clock estimate is refused whole (ErrAhead):
// a forged or broken feed must not finalize everything for good. Otherwise
// each figure is taken only when it is not below the adopted one; a figure
// below (a watcher reading a lagging endpoint, a replayed message) is kept
// and counted (ErrBehind). A finalized epoch after the current one is taken
// as the current one. A MOCK clock ignores updates and reports nil.
func (c *Clock) Observe(current, finalized uint64) error {
	if c.mock {
		return nil
	}
	finalized = min(finalized, current)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.chain
	s.Updates++
	s.At = c.now()
	if limit := c.estimate() + c.maxAhead; current > limit {
		s.Ahead++
		return fmt.Errorf("%w: current epoch %d, at most %d now", ErrAhead, current, limit)
	}
	if !s.Adopted {
		s.Adopted, s.Current, s.Finalized = true, current, finalized
		return nil
	}
	behind := current < s.Current || finalized < s.Finalized
	s.Current, s.Finalized = max(s.Current, current), max(s.Finalized, finalized)
	if behind {
		s.Regressions++
		return ErrBehind
	}
	return nil
}

// Chain returns what the clock has adopted from the chain.
func (c *Clock) Chain() ChainState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chain
}

// Length returns the epoch length.
func (c *Clock) Length() time.Duration { return c.length }

// Advance moves the clock n epochs forward (MOCK mode test surface).
func (c *Clock) Advance(n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base += n
}

// SetOffset shifts the clock to offset epochs from where it would be
// unshifted (MOCK mode test surface). An offset that would take the epoch
// below zero is refused.
func (c *Clock) SetOffset(offset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if offset < 0 && uint64(-offset) > c.start {
		return false
	}
	c.base = uint64(int64(c.start) + offset)
	return true
}

// Offset is the shift SetOffset and Advance applied.
func (c *Clock) Offset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.base) - int64(c.start)
}

// NextIn is the time left until the next epoch starts, by wall time: on a
// chain-backed clock, when the block-time numbering (unix time / length)
// expects it.
func (c *Clock) NextIn() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	elapsed := max(0, c.now().Sub(c.origin))
	return c.length - elapsed%c.length
}
