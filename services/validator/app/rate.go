package app

import (
	"math"

	"context"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"
	"sync"
	"time"
)

// rateMeter samples a counter once a second and reports its rate over the
// last window of samples.
type rateMeter struct {
	mu      sync.Mutex
	samples []rateSample // oldest first, at most window+1
	window  int
}

type rateSample struct {
	at    time.Time
	value uint64
}

func newRateMeter(window int) *rateMeter { return &rateMeter{window: window} }

// run samples read every interval until ctx ends.
func (m *rateMeter) run(ctx context.Context, interval time.Duration, read func() uint64) {
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

func (m *rateMeter) add(at time.Time, v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, rateSample{at, v})
	if len(m.samples) > m.window+1 {
		m.samples = append(m.samples[:0], m.samples[len(m.samples)-m.window-1:]...)
	}
}

// PerSecond is the counter's rate over the samples held, 0 with fewer than two.
func (m *rateMeter) PerSecond() float64 {
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

// newLimiter is a token bucket per identifier (echo's in-memory store):
// perSecond on average, bursts of twice that; idle buckets go after three
// minutes.
func newLimiter(perSecond float64) *middleware.RateLimiterMemoryStore {
	return middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(perSecond), Burst: int(math.Ceil(2 * perSecond)), ExpiresIn: 3 * time.Minute,
	})
}
