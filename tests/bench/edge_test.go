package bench

// BenchmarkEdge measures the edge in front of a 3-validator cluster (MOCK
// mode, idle): clients asking one /ops/v1 route, each on its own keep-alive
// connection, a sub-benchmark per route, client count and load:
//
//	BenchmarkEdge/route=overview/clients=1000             ...  requests/s  p50-ms  p99-ms  upstream-req/s  edge-cpu-us/op ...
//	BenchmarkEdge/route=overview/clients=1000/rate=20000  ...
//
// Without rate the clients are closed-loop (each asks again as soon as it
// has its answer): requests/s is the edge's capacity on this machine, and
// the latency is queueing at that capacity (on average clients ÷
// requests/s, by Little's law). With rate=R they are open-loop: R requests
// per second in all, each client asking at its turn, latency counted from
// when the request was due, so a slow answer delays and counts against the
// requests behind it. That is the latency a client sees at load R.
//
// upstream-req/s are the edge's calls to the validators during the run, as
// its own edge_upstream_requests_total counts them: with the cache and
// request coalescing they follow the routes and OPS_CACHE_TTL, not the
// number of clients (compare clients=100 with clients=1000).
// edge-cpu-us/op and client-cpu-us/op are the CPU time of the edge and of
// this process (the clients) per request, machine-cpu-% the share of the
// machine's CPU busy meanwhile: the clients and the edge share it.
//
// BENCH_EDGE_CLIENTS overrides the client counts (default 100,1000),
// BENCH_EDGE_RATES the open-loop loads (default 10000,20000 requests/s);
// BENCH_EDGE_BIN runs a prebuilt edge instead of building this tree's
// (another build to compare); BENCH_PROFILE=dir writes a CPU profile of the
// edge per run into dir (BENCH_PROFILE_SECONDS long, default 3).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contentledger/contentledger/tests/harness"
)

var (
	edgeBuildOnce sync.Once
	edgeBin       string
	edgeBuildErr  error
)

// buildEdge builds the edge next to the validator build, or returns
// $BENCH_EDGE_BIN when set.
func buildEdge() (string, error) {
	if bin := os.Getenv("BENCH_EDGE_BIN"); bin != "" {
		return bin, nil
	}
	edgeBuildOnce.Do(func() {
		var dir string
		if dir, edgeBuildErr = os.MkdirTemp("", "contentledger-bench-edge-"); edgeBuildErr != nil {
			return
		}
		edgeBin = filepath.Join(dir, "edge")
		out, err := exec.Command("go", "build", "-o", edgeBin,
			"github.com/contentledger/contentledger/services/edge/cmd/edge").CombinedOutput()
		if err != nil {
			edgeBuildErr = fmt.Errorf("building the edge: %v\n%s", err, out)
		}
	})
	return edgeBin, edgeBuildErr
}

func BenchmarkEdge(b *testing.B) {
	dir := b.TempDir()
	cluster, err := startLedger(b.Cleanup, dir)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := buildEdge()
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("BENCH_EDGE_BIN") == "" {
		b.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	var debug string // the edge's /debug/pprof, when profiling
	if profileDir() != "" {
		if debug, err = harness.FreeAddr(); err != nil {
			b.Fatal(err)
		}
	}
	var urls []string
	for _, n := range cluster.nodes {
		urls = append(urls, n.url)
	}
	// The defaults, written out so the figures say what they were
	// measured with.
	edge, err := startProc(b.Cleanup, "edge", bin, nil, []string{
		"OPS_HTTP_ADDR=" + addr,
		"OPS_VALIDATORS=" + strings.Join(urls, ","),
		"OPS_CACHE_TTL=500ms",
		"OPS_LEADER_REFRESH=1s",
		"OPS_VALIDATOR_CONCURRENCY=16",
		"OPS_DEBUG_ADDR=" + debug,
	}, filepath.Join(dir, "edge.log"))
	if err != nil {
		b.Fatal(err)
	}
	base := "http://" + addr
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second,
	}}
	b.Cleanup(client.CloseIdleConnections)
	if err := waitEdge(client, edge, base+"/ops/v1/overview"); err != nil {
		b.Fatal(err)
	}
	for _, route := range []string{"overview", "queue"} {
		for _, n := range edgeClients(b) {
			for _, rate := range edgeRates(b) {
				name := fmt.Sprintf("route=%s/clients=%d", route, n)
				if rate > 0 {
					name += fmt.Sprintf("/rate=%d", rate)
				}
				b.Run(name, func(b *testing.B) {
					edgeLoad(b, client, edge, addr, "/ops/v1/"+route, n, rate, debug)
				})
			}
		}
	}
}

func edgeClients(b *testing.B) []int {
	return positiveInts(b, "BENCH_EDGE_CLIENTS", []int{100, 1000})
}

// edgeRates are the offered loads, in requests per second over all clients,
// of the open-loop runs; 0 is the closed-loop run.
func edgeRates(b *testing.B) []int {
	return append([]int{0}, positiveInts(b, "BENCH_EDGE_RATES", []int{10000, 20000})...)
}

// positiveInts reads a comma-separated list of positive integers from the
// environment variable name, def when it is unset.
func positiveInts(b *testing.B, name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: %q is not a positive integer", name, s, f)
		}
		out = append(out, n)
	}
	return out
}

// waitEdge waits for the edge to answer url with 200: it is up, and the
// validators have a leader.
func waitEdge(client *http.Client, edge *proc, url string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := edge.alive(); err != nil {
			return err
		}
		status, err := edgeGet(context.Background(), client, url)
		if err == nil && status == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge did not answer %s with 200 in 60s: %d %v", url, status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func edgeGet(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// edgeLoad asks path b.N times from clients closed-loop clients, each on
// its own connection; with debug set, it profiles the edge meanwhile.
func edgeLoad(b *testing.B, client *http.Client, edge *proc, addr, path string, clients, rate int, debug string) {
	base := "http://" + addr
	upstream0, err := upstreamCalls(client, base)
	if err != nil {
		b.Fatal(err)
	}
	profiled := startEdgeProfile(b, debug, strings.ReplaceAll(strings.TrimPrefix(path, "/ops/v1/"), "/", "-"), clients, rate)
	defer profiled()
	getters := make([]*rawGetter, clients)
	for i := range getters {
		getters[i] = newRawGetter(addr, path)
		b.Cleanup(getters[i].close)
	}
	edgeCPU0, selfCPU0 := edge.cpu(), selfCPU()
	busy0, total0 := machineCPU()
	get := func(client, _ int) error {
		status, err := getters[client].get()
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("%s: status %d", path, status)
		}
		return err
	}
	var latencies []time.Duration
	var elapsed time.Duration
	if rate > 0 {
		latencies, elapsed = openLoop(b, clients, rate, get)
	} else {
		latencies, elapsed = closedLoopEach(b, clients, get)
	}
	if b.Failed() {
		return
	}
	edgeCPU, clientCPU := edge.cpu()-edgeCPU0, selfCPU()-selfCPU0
	busy1, total1 := machineCPU()
	upstream1, err := upstreamCalls(client, base)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "requests/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric((upstream1-upstream0)/elapsed.Seconds(), "upstream-req/s")
	b.ReportMetric(float64(edgeCPU.Microseconds())/float64(b.N), "edge-cpu-us/op")
	b.ReportMetric(float64(clientCPU.Microseconds())/float64(b.N), "client-cpu-us/op")
	if total1 > total0 {
		b.ReportMetric(100*float64(busy1-busy0)/float64(total1-total0), "machine-cpu-%")
	}
}

// upstreamCalls is the sum of the edge's edge_upstream_requests_total over
// its labels, from its /metrics.
func upstreamCalls(client *http.Client, base string) (float64, error) {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "edge_upstream_requests_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics: %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// startEdgeProfile captures a CPU profile of the edge into the BENCH_PROFILE
// directory, named after the route and the client count; the returned
// function waits for it.
func startEdgeProfile(b *testing.B, debug, route string, clients, rate int) (wait func()) {
	dir := profileDir()
	if debug == "" || dir == "" || b.N < 100 { // the calibration runs are too short
		return func() {}
	}
	seconds := 3
	if s := os.Getenv("BENCH_PROFILE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_PROFILE_SECONDS=%q is not a positive integer", s)
		}
		seconds = n
	}
	name := fmt.Sprintf("route=%s-clients=%d", route, clients)
	if rate > 0 {
		name += fmt.Sprintf("-rate=%d", rate)
	}
	prefix := filepath.Join(dir, fmt.Sprintf("%s-n=%d", name, b.N))
	// -count N repeats a run with the same name: number the repeats.
	for run := 2; ; run++ {
		if _, err := os.Stat(prefix + "-edge.pprof"); errors.Is(err, fs.ErrNotExist) {
			break
		}
		prefix = filepath.Join(dir, fmt.Sprintf("%s-n=%d-run%d", name, b.N, run))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fetchProfile(context.Background(), debug, "profile", time.Duration(seconds)*time.Second, prefix+"-edge.pprof"); err != nil {
			b.Logf("profile of the edge: %v", err)
		}
	}()
	return func() { <-done }
}
