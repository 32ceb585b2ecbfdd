// Package bench compares a 3-validator Content Ledger cluster with a
// 3-member etcd cluster on the same machine, in the same run, under the same
// closed-loop load: each client sends one 1 KiB proposal (a signed write to
// the validators, a Put to etcd), waits until it is committed, then sends the
// next. Both systems run on loopback with fsync on.
//
// Run with `make bench-cluster`. Settings from the environment:
//
//	BENCH_CLIENTS=16            client counts, comma-separated (default 1,16,256)
//	BENCH_VALIDATOR_ENV="K=V …"  extra SVC_VALIDATOR_* settings (see validatorSettings)
//	BENCH_VALIDATOR_BIN=path    a prebuilt validator instead of building this tree's
//	ETCD_BIN=path               etcd (default: etcd on PATH, else apt-get install etcd-server)
//	BENCH_PROFILE=dir           write a CPU profile of every validator, and of this process, per run into dir (the soak: the validators, per window)
//	BENCH_PROFILE_SECONDS=n     length of each profile (default 3, the soak 10; keep it below the run's length)
//	BENCH_PROFILE_TRACE=1       also an execution trace of the leader over the same window (go tool trace)
//
// Besides proposals/s and the latency percentiles from submission to
// COMMITTED, each run reports proposals/entry (proposals per raft entry, from
// the leader's commit index), the CPU the servers and the clients used per
// proposal, HTTP requests per proposal (validators), and machine-cpu-% and
// other-cpu-% (the CPU other processes took meanwhile: the noise).
// Figures are in Go's benchmark format:
//
//	BenchmarkCluster/system=contentledger/clients=256  ...  proposals/s  p50-ms  p99-ms ...
//	BenchmarkCluster/system=etcd/clients=256           ...
//	BenchmarkCluster/ratio/clients=256                 ...  ours/etcd
//
// `benchstat -filter '/system:(contentledger OR etcd)' -col /system out.txt`
// puts the two systems side by side; `benchstat old.txt new.txt` compares
// runs, the ratio rows included.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// system is a cluster under load.
type system interface {
	// prepare does a run's client-side work before the timer and returns
	// its operation i (0 <= i < n), which returns once the proposal is
	// committed.
	prepare(b *testing.B, n int) func(ctx context.Context, i int) error
	// commitIndex is the leader's raft commit index.
	commitIndex(ctx context.Context) (uint64, error)
	// servers are the leader's process and all the processes.
	servers() (leader *proc, all []*proc)
}

// lazySystem starts its cluster on first use, so a -bench filter that
// selects one system starts only that one.
type lazySystem struct {
	once  sync.Once
	start func() (system, error)
	sys   system
	err   error
}

func (l *lazySystem) get(b *testing.B) system {
	l.once.Do(func() { l.sys, l.err = l.start() })
	switch {
	case errors.Is(l.err, errNoEtcd):
		b.Skip(l.err)
	case l.err != nil:
		b.Fatal(l.err)
	}
	return l.sys
}

func clientCounts(b *testing.B) []int {
	s := os.Getenv("BENCH_CLIENTS")
	if s == "" {
		return []int{1, 16, 256}
	}
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_CLIENTS=%q: %q is not a positive integer", s, f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkCluster measures committed proposals per second and the latency
// from submission to COMMITTED of 3 validators, and the same of 3 etcd
// members, at each client count in turn, and reports ours/etcd.
func BenchmarkCluster(b *testing.B) {
	dir := b.TempDir()
	ours := &lazySystem{start: func() (system, error) { return startLedger(b.Cleanup, dir) }}
	etcd := &lazySystem{start: func() (system, error) { return startEtcd(b.Cleanup, dir) }}
	var rec recorder
	counts := clientCounts(b)
	for _, n := range counts {
		b.Run(fmt.Sprintf("system=contentledger/clients=%d", n), func(b *testing.B) {
			load(b, ours.get(b), n, rec.series("contentledger", n))
		})
		b.Run(fmt.Sprintf("system=etcd/clients=%d", n), func(b *testing.B) {
			load(b, etcd.get(b), n, rec.series("etcd", n))
		})
		b.Run(fmt.Sprintf("ratio/clients=%d", n), func(b *testing.B) {
			o, e := rec.median("contentledger", n), rec.median("etcd", n)
			if o == 0 || e == 0 {
				b.Skip("the ratio needs both systems measured at this client count in this run")
			}
			b.ReportMetric(0, "ns/op") // no work of its own
			b.ReportMetric(o/e, "ours/etcd")
		})
	}
	for _, n := range counts {
		if o, e := rec.median("contentledger", n), rec.median("etcd", n); o > 0 && e > 0 {
			fmt.Printf("cluster throughput at %d clients: contentledger %.0f, etcd %.0f proposals/s, ours/etcd %.2f\n", n, o, e, o/e)
		}
	}
}

// load runs b.N operations from clients closed-loop clients and reports the
// throughput, latency percentiles, batching and CPU use.
func load(b *testing.B, sys system, clients int, series *series) {
	op := sys.prepare(b, b.N)
	leader, all := sys.servers()
	for _, p := range all {
		if err := p.alive(); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	index0, err := sys.commitIndex(ctx)
	if err != nil {
		b.Fatal(err)
	}
	meter := startCPUMeter(leader, all)
	counter, _ := sys.(interface{ requests() uint64 })
	var requests0 uint64
	if counter != nil {
		requests0 = counter.requests()
	}
	profiled := startProfile(b, sys, clients)
	defer profiled()
	latencies, elapsed := closedLoop(b, clients, func(i int) error {
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return op(octx, i)
	})
	if b.Failed() {
		return
	}

	if counter != nil {
		b.ReportMetric(float64(counter.requests()-requests0)/float64(b.N), "http-requests/op")
	}
	index1, err := sys.commitIndex(ctx)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	throughput := float64(b.N) / elapsed.Seconds()
	series.add(b.N, throughput)

	b.ReportMetric(throughput, "proposals/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	if index1 > index0 {
		// Raft entries include the odd empty or conf-change entry; under
		// load they are a rounding error.
		b.ReportMetric(float64(b.N)/float64(index1-index0), "proposals/entry")
	}
	meter.report(b)
}

// profiler is a system whose servers can be profiled (BENCH_PROFILE).
type profiler interface {
	profile(ctx context.Context, d time.Duration, prefix string) error
}

func profileDir() string { return os.Getenv("BENCH_PROFILE") }

// profileSeconds is BENCH_PROFILE_SECONDS, def when unset.
func profileSeconds(b *testing.B, def int) int {
	s := os.Getenv("BENCH_PROFILE_SECONDS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("BENCH_PROFILE_SECONDS=%q is not a positive integer", s)
	}
	return n
}

// startProfile starts CPU profiles of the servers when BENCH_PROFILE is set
// and sys supports it; the returned function waits for it.
func startProfile(b *testing.B, sys system, clients int) (wait func()) {
	p, ok := sys.(profiler)
	dir := profileDir()
	if !ok || dir == "" || b.N < 100 { // the calibration runs are too short
		return func() {}
	}
	seconds := profileSeconds(b, 3)
	prefix := filepath.Join(dir, fmt.Sprintf("clients=%d-n=%d", clients, b.N))
	// -count N repeats a run with the same name: number the repeats rather
	// than overwrite the first run's profiles.
	for run := 2; ; run++ {
		if _, err := os.Stat(prefix + "-bench.pprof"); errors.Is(err, fs.ErrNotExist) {
			break
		}
		prefix = filepath.Join(dir, fmt.Sprintf("clients=%d-n=%d-run%d", clients, b.N, run))
	}
	// The benchmark's own process (clients, and whatever backing it runs
	// in-process) shares the machine with the servers: profile it over the
	// same window, so that where the rest of the CPU goes is visible too.
	f, err := os.Create(prefix + "-bench.pprof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Logf("profile of the benchmark process: %v", err) // another profile (-cpuprofile) runs
		_ = f.Close()
		f = nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.profile(context.Background(), time.Duration(seconds)*time.Second, prefix); err != nil {
			b.Logf("profile: %v", err)
		}
		if f != nil {
			pprof.StopCPUProfile()
			_ = f.Close()
		}
	}()
	return func() { <-done }
}

func procsCPU(ps []*proc) time.Duration {
	var d time.Duration
	for _, p := range ps {
		d += p.cpu()
	}
	return d
}

// cpuMeter measures where the CPU went during a run: the servers, the
// leader among them, this process (the clients, and whatever backing it
// runs in-process), and the whole machine, so that a figure shows how much
// of the box the system used and how much other processes took (the noise).
type cpuMeter struct {
	leader              *proc
	all                 []*proc
	servers, lead, self time.Duration
	busy, total         uint64
}

func startCPUMeter(leader *proc, all []*proc) cpuMeter {
	m := cpuMeter{leader: leader, all: all, servers: procsCPU(all), lead: leader.cpu(), self: selfCPU()}
	m.busy, m.total = machineCPU()
	return m
}

// cpuFigures is where the CPU went over some operations: per operation,
// the servers, the leader among them and this process; and, in percent of
// the machine, how busy it was and what other processes took (the noise).
// The percentages are unknown (machineKnown false) when the machine's
// counters did not move.
type cpuFigures struct {
	servers, leader, client time.Duration
	machineKnown            bool
	machineBusy, other      float64
}

// figures returns the figures of the n operations since start.
func (m cpuMeter) figures(n int) cpuFigures {
	servers, lead, self := procsCPU(m.all)-m.servers, m.leader.cpu()-m.lead, selfCPU()-m.self
	busy1, total1 := machineCPU()
	per := time.Duration(max(n, 1))
	f := cpuFigures{servers: servers / per, leader: lead / per, client: self / per}
	if total1 > m.total {
		busy, total := time.Duration(busy1-m.busy)*clockTick, time.Duration(total1-m.total)*clockTick
		f.machineKnown = true
		f.machineBusy = 100 * busy.Seconds() / total.Seconds()
		f.other = max(0, 100*(busy-servers-self).Seconds()/total.Seconds())
	}
	return f
}

// report adds server-cpu-us/op (all server processes), leader-cpu-us/op,
// client-cpu-us/op (this process), machine-cpu-% and other-cpu-% over the
// b.N operations since start.
func (m cpuMeter) report(b *testing.B) {
	f := m.figures(b.N)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(f.servers), "server-cpu-us/op")
	b.ReportMetric(us(f.leader), "leader-cpu-us/op")
	b.ReportMetric(us(f.client), "client-cpu-us/op")
	if f.machineKnown {
		b.ReportMetric(f.machineBusy, "machine-cpu-%")
		b.ReportMetric(f.other, "other-cpu-%")
	}
}

// recorder keeps each sub-benchmark's throughputs for the ratio.
type recorder struct {
	mu sync.Mutex
	m  map[string]*series
}

func (r *recorder) series(system string, clients int) *series {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*series{}
	}
	k := system + "/" + strconv.Itoa(clients)
	if r.m[k] == nil {
		r.m[k] = &series{}
	}
	return r.m[k]
}

// median is the median throughput of the reported runs, 0 if none: with
// -count, a burst of noise from other processes spoils one run, not the ratio.
func (r *recorder) median(system string, clients int) float64 {
	s := r.series(system, clients)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The testing package calls a benchmark with b.N = 1, then with growing
	// b.N until the run lasts -benchtime, and reports the last call of each
	// such sequence, once per -count. So a call was reported when the next
	// one starts a sequence again (b.N = 1), or when it is the last.
	var reported []float64
	for i, r := range s.runs {
		if i == len(s.runs)-1 || s.runs[i+1].n == 1 {
			reported = append(reported, r.perSec)
		}
	}
	if len(reported) == 0 {
		return 0
	}
	slices.Sort(reported)
	k := len(reported)
	return (reported[(k-1)/2] + reported[k/2]) / 2
}

// series is the runs of one sub-benchmark, in call order.
type series struct {
	mu   sync.Mutex
	runs []run
}

type run struct {
	n      int     // b.N
	perSec float64 // proposals per second
}

func (s *series) add(n int, perSec float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, run{n, perSec})
}

// closedLoop runs op(0..b.N-1) from clients closed-loop clients, each taking
// the next index as soon as its previous op returned, and times the whole
// (the timer runs from here to the end) and each op. The first error fails
// the benchmark and stops the other clients.
func closedLoop(b *testing.B, clients int, op func(i int) error) (latencies []time.Duration, elapsed time.Duration) {
	return closedLoopEach(b, clients, func(_, i int) error { return op(i) })
}

// closedLoopEach is closedLoop telling op which client (0 <= client <
// clients) makes operation i, for clients that keep state of their own.
func closedLoopEach(b *testing.B, clients int, op func(client, i int) error) (latencies []time.Duration, elapsed time.Duration) {
	latencies = make([]time.Duration, b.N)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for client := range min(clients, b.N) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := op(client, i); err != nil {
					b.Error(err)
					next.Store(int64(b.N)) // stop the other clients
					return
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed = time.Since(start)
	b.StopTimer()
	return latencies, elapsed
}

// openLoop runs op(0..b.N-1) at rate operations per second in all, from
// clients clients taking turns (operation i is client i % clients's), and
// times each op from when it was due, not from when it was sent: a client
// whose previous op is late sends the next one late, and that wait counts
// (no coordinated omission). elapsed is from the start to the last answer.
func openLoop(b *testing.B, clients, rate int, op func(client, i int) error) (latencies []time.Duration, elapsed time.Duration) {
	latencies = make([]time.Duration, b.N)
	var failed atomic.Bool
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for client := range min(clients, b.N) {
		wg.Go(func() {
			for i := client; i < b.N && !failed.Load(); i += clients {
				due := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
				}
				if err := op(client, i); err != nil {
					b.Error(err)
					failed.Store(true)
					return
				}
				latencies[i] = time.Since(due)
			}
		})
	}
	wg.Wait()
	elapsed = time.Since(start)
	b.StopTimer()
	return latencies, elapsed
}
