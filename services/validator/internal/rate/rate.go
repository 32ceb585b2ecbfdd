// Package rate measures and limits rates: Meter turns a counter sampled
// over time into a rate per second for the views, KeptFor bounds how often
// a costly view is computed again, and NewLimiter is the token bucket per
// identifier that limits requests.
//
// A Meter is sampled by its own goroutine (Run); PerSecond may be called
// from any goroutine. Nothing here is replicated state.
package rate

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/labstack/echo/v4/middleware"
	xrate "golang.org/x/time/rate"
)

// Meter samples a counter at a steady interval and reports its rate over
// the last window of samples.
type Meter struct {
	mu      sync.Mutex
	samples []sample // oldest first, at most window+1
	window  int
}

type sample struct {
	at    time.Time
	value uint64
}

// NewMeter returns a meter whose rate spans the last window samples.
func NewMeter(window int) *Meter { return &Meter{window: window} }

// Run samples read every interval until ctx ends. It is the meter's
// goroutine: run it once.
func (m *Meter) Run(ctx context.Context, interval time.Duration, read func() uint64) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		m.add(time.Now(), read())
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

func (m *Meter) add(at time.Time, v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, sample{at, v})
	if len(m.samples) > m.window+1 {
		m.samples = append(m.samples[:0], m.samples[len(m.samples)-m.window-1:]...)
	}
}

// PerSecond is the counter's rate over the samples held, 0 with fewer than
// two (or when the counter went back).
func (m *Meter) PerSecond() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) < 2 {
		return 0
	}
	first, last := m.samples[0], m.samples[len(m.samples)-1]
	secs := last.at.Sub(first.at).Seconds()
	if secs <= 0 || last.value < first.value {
		return 0
	}
	return float64(last.value-first.value) / secs
}

// MinReuse is the least time KeptFor keeps a computed view.
const MinReuse = time.Second

// KeptFor is how long a view that took took to compute is reused: at least
// MinReuse, and ten times its cost, so that computing it again and again
// costs at most a tenth of a core however often it is asked for.
func KeptFor(took time.Duration) time.Duration { return max(MinReuse, 10*took) }

// NewLimiter is a token bucket per identifier (echo's in-memory store):
// perSecond on average, bursts of twice that; idle buckets go after three
// minutes.
func NewLimiter(perSecond float64) *middleware.RateLimiterMemoryStore {
	return middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
		Rate: xrate.Limit(perSecond), Burst: int(math.Ceil(2 * perSecond)), ExpiresIn: 3 * time.Minute,
	})
}
