package pipeline

import (
	"sync/atomic"
	"time"
)

// commitLatencyBounds are the upper bounds, in seconds, of the
// submit-to-commit histogram's buckets: from a single validator's group
// commit (about a millisecond) to CommitTimeout (10 s by default).
func commitLatencyBounds() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
}

// latencyHistogram counts durations into fixed buckets with atomics only:
// observing takes no lock and allocates nothing, and its size never grows.
type latencyHistogram struct {
	bounds []float64       // upper bounds in seconds, ascending
	counts []atomic.Uint64 // per bucket (not cumulative); the last is +Inf
	sum    atomic.Int64    // nanoseconds
}

func newLatencyHistogram(bounds []float64) *latencyHistogram {
	return &latencyHistogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// observe counts one duration.
func (h *latencyHistogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(h.bounds) && s > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// LatencyStats is a latency histogram read at one moment: Buckets are
// cumulative counts by upper bound in seconds, +Inf left out (it is Count).
type LatencyStats struct {
	Count      uint64
	SumSeconds float64
	Buckets    map[float64]uint64
}

// stats reads the histogram. Its figures are read one by one while
// observations go on, so Count may run a few observations ahead of the
// buckets; a scrape sees that as an observation not yet in a bucket.
func (h *latencyHistogram) stats() LatencyStats {
	st := LatencyStats{Buckets: make(map[float64]uint64, len(h.bounds))}
	var cumulative uint64
	for i, bound := range h.bounds {
		cumulative += h.counts[i].Load()
		st.Buckets[bound] = cumulative
	}
	st.Count = cumulative + h.counts[len(h.bounds)].Load()
	st.SumSeconds = time.Duration(h.sum.Load()).Seconds()
	return st
}
