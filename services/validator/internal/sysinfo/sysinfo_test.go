package sysinfo

import (
	"math"
	"runtime"
	"runtime/metrics"
	"testing"
)

// TestHistQuantileMs: a quantile is the upper bound of its bucket, the
// lower bound of the open last bucket, and absent without samples.
func TestHistQuantileMs(t *testing.T) {
	h := &metrics.Float64Histogram{Counts: []uint64{2, 0, 1, 1}, Buckets: []float64{0, 0.001, 0.002, 0.004, math.Inf(1)}}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 1}, {0.75, 4}, {0.99, 4}, {1, 4}, {0, 1}} {
		got := histQuantileMs(h, c.q)
		if got == nil || *got != c.want {
			t.Errorf("q %v: %v, want %v ms", c.q, got, c.want)
		}
	}
	if got := histQuantileMs(&metrics.Float64Histogram{Counts: []uint64{0}, Buckets: []float64{0, 1}}, 0.5); got != nil {
		t.Errorf("no samples: %v", *got)
	}
}

// TestProcessAndRuntime: on Linux every process figure is reported, with
// no gap; the runtime's figures are those of this process.
func TestProcessAndRuntime(t *testing.T) {
	p, gaps := Process(nil)
	if runtime.GOOS == "linux" && (len(gaps) != 0 || p.RSSBytes == nil || *p.RSSBytes == 0 || p.OpenFDs == nil || p.CPUSeconds == nil) {
		t.Fatalf("process %+v, gaps %+v", p, gaps)
	}
	g := GoRuntime()
	if g.Version != runtime.Version() || g.Goroutines == 0 || g.Heap.TotalBytes == 0 {
		t.Fatalf("runtime %+v", g)
	}
	if d, ok := DiskUsage(t.TempDir()); runtime.GOOS == "linux" && (!ok || d.TotalBytes == 0 || d.UsedRatio < 0 || d.UsedRatio > 1) {
		t.Fatalf("disk %+v %v", d, ok)
	}
}
