// Package epoch tells the current and finalized epoch (DECISIONS D7).
//
// The clock here is derived from wall time: in MOCK mode it starts at epoch
// 1000 when the validator starts; on chain-backed networks it is unix time
// divided by the epoch length, which tracks a beacon chain's epochs closely
// enough for grouping. Finality is current - 2 until a chain-driven source
// (the watcher's epoch messages) replaces it.
package epoch

import (
	"sync"
	"time"
)

// DefaultLength is 32 slots of 12 s.
const DefaultLength = 384 * time.Second

// MockStart is the first epoch of a MOCK-mode clock.
const MockStart = 1000

// FinalityLag is how many epochs behind the current one finality trails.
const FinalityLag = 2

// Clock is a wall-clock epoch source. It is safe for concurrent use.
type Clock struct {
	length time.Duration
	now    func() time.Time

	mu     sync.Mutex
	start  uint64    // epoch at origin before any shift
	base   uint64    // epoch at origin, start shifted by the MOCK surfaces
	origin time.Time // zero for the unix epoch
}

// NewMock returns a clock at MockStart now.
func NewMock(length time.Duration, now func() time.Time) *Clock {
	return &Clock{length: length, now: now, start: MockStart, base: MockStart, origin: now()}
}

// NewChain returns a clock of unix time / length.
func NewChain(length time.Duration, now func() time.Time) *Clock {
	return &Clock{length: length, now: now, origin: time.Unix(0, 0)}
}

// Current returns the current epoch.
func (c *Clock) Current() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	elapsed := c.now().Sub(c.origin)
	if elapsed < 0 {
		elapsed = 0
	}
	return c.base + uint64(elapsed/c.length)
}

// Finalized returns the newest final epoch.
func (c *Clock) Finalized() uint64 {
	cur := c.Current()
	if cur < FinalityLag {
		return 0
	}
	return cur - FinalityLag
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

// NextIn is the time left until the next epoch starts.
func (c *Clock) NextIn() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	elapsed := max(0, c.now().Sub(c.origin))
	return c.length - elapsed%c.length
}
