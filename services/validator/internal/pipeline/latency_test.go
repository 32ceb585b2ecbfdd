package pipeline

import (
	"testing"
	"time"
)

// TestLatencyHistogram: each duration lands in the first bucket whose
// bound holds it (a bound is inclusive), the counts are cumulative, and
// one beyond the last bound counts only in Count.
func TestLatencyHistogram(t *testing.T) {
	h := newLatencyHistogram([]float64{.01, .1, 1})
	for _, d := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, time.Second, 3 * time.Second} {
		h.observe(d)
	}
	st := h.stats()
	want := map[float64]uint64{.01: 2, .1: 3, 1: 4}
	if st.Count != 5 || len(st.Buckets) != len(want) {
		t.Fatalf("%+v", st)
	}
	for bound, n := range want {
		if st.Buckets[bound] != n {
			t.Errorf("bucket %v: %d, want %d", bound, st.Buckets[bound], n)
		}
	}
	if got, want := st.SumSeconds, 4.061; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("sum %v, want %v", got, want)
	}
}

// BenchmarkCommitLatencyObserve is what a committed proposal's intake pays
// for the submit-to-commit histogram (with the time.Now it takes at
// acceptance): a few nanoseconds, next to a raft round and an fsync.
func BenchmarkCommitLatencyObserve(b *testing.B) {
	h := newLatencyHistogram(commitLatencyBounds())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			accepted := time.Now()
			h.observe(time.Since(accepted))
		}
	})
}

// BenchmarkCommitLatencyObserveSerial is one intake at a time: the
// cost without contention on the counters.
func BenchmarkCommitLatencyObserveSerial(b *testing.B) {
	h := newLatencyHistogram(commitLatencyBounds())
	b.ReportAllocs()
	for b.Loop() {
		accepted := time.Now()
		h.observe(time.Since(accepted))
	}
}
