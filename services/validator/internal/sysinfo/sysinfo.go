// Package sysinfo reads the figures of the process and its host that the
// runtime and storage snapshots report: the Go runtime's, the process's
// (resident memory, open files, CPU time) and the file system's. What a
// platform does not report is absent, never guessed.
package sysinfo

import (
	"math"
	"os"
	"runtime"
	"runtime/metrics"

	"github.com/contentledger/contentledger/pkg/api"
)

// GoRuntime reads the Go runtime's figures through runtime/metrics, which,
// unlike runtime.ReadMemStats, does not stop the world.
func GoRuntime() api.GoRuntime {
	names := []string{
		"/sched/goroutines:goroutines", "/gc/heap/objects:objects", "/memory/classes/heap/objects:bytes",
		"/gc/heap/goal:bytes", "/memory/classes/total:bytes", "/gc/cycles/total:gc-cycles", "/sched/pauses/total/gc:seconds",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	u := func(i int) uint64 {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			return samples[i].Value.Uint64()
		}
		return 0
	}
	g := api.GoRuntime{Version: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Goroutines: u(0)}
	g.Heap.Objects, g.Heap.ObjectsBytes, g.Heap.GoalBytes, g.Heap.TotalBytes = u(1), u(2), u(3), u(4)
	g.GC.Cycles = u(5)
	if samples[6].Value.Kind() == metrics.KindFloat64Histogram {
		h := samples[6].Value.Float64Histogram()
		for _, n := range h.Counts {
			g.GC.Pauses += n
		}
		g.GC.P50Ms, g.GC.P99Ms, g.GC.MaxMs = histQuantileMs(h, 0.50), histQuantileMs(h, 0.99), histQuantileMs(h, 1)
	}
	return g
}

// histQuantileMs is the upper bound, in ms, of the bucket of a histogram of
// seconds holding quantile q (its lower bound for the open last bucket);
// nil without samples.
func histQuantileMs(h *metrics.Float64Histogram, q float64) *float64 {
	var total uint64
	for _, n := range h.Counts {
		total += n
	}
	if total == 0 {
		return nil
	}
	rank := max(1, uint64(math.Ceil(q*float64(total))))
	var seen uint64
	for i, n := range h.Counts {
		if seen += n; seen >= rank {
			bound := h.Buckets[i+1]
			if math.IsInf(bound, 1) {
				bound = h.Buckets[i]
			}
			ms := bound * 1000
			return &ms
		}
	}
	return nil
}

// Process reads the process's own figures; those the platform does
// not report are nil, with a gap each.
func Process(gaps []api.Gap) (api.Process, []api.Gap) {
	p := api.Process{PID: os.Getpid()}
	var ok bool
	if p.RSSBytes, ok = residentBytes(); !ok {
		gaps = append(gaps, api.Gap{Field: "process.rssBytes", Reason: "this platform does not report the resident set size to the validator"})
	}
	if p.OpenFDs, ok = openFDs(); !ok {
		gaps = append(gaps, api.Gap{Field: "process.openFds", Reason: "this platform does not report open file descriptors to the validator"})
	}
	if p.CPUSeconds, ok = cpuSeconds(); !ok {
		gaps = append(gaps, api.Gap{Field: "process.cpuSeconds", Reason: "this platform does not report the process's CPU time to the validator"})
	}
	return p, gaps
}
