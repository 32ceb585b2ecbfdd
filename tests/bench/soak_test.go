package bench

import (
	"context"
	"crypto/ecdsa"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// BenchmarkSoak runs a long write load against 3 validators (MOCK mode,
// fsync on, 1 KiB messages) and follows storage as it goes: does it stay
// bounded by the live content while GC (COMPACT, ADR 0033) runs, and does
// throughput and memory hold up? Two sub-benchmarks, each on a fresh
// cluster:
//
//	gc=on   compactions at every finalized epoch once SOAK_GC_SIZE_DELTA segment bytes were written
//	gc=off  SVC_VALIDATOR_GC_OFF=true: no compaction, storage only grows
//
// SOAK_COUNT proposals (default 1,000,000) from SOAK_CLIENTS closed-loop
// clients (default 64), each its own wallet: about 70 % writes of new
// paths, 20 % overwrites of a path the client wrote and still holds, 10 %
// deletes of one (a deterministic seed; a client only touches its own
// paths, so every overwrite and delete finds its path committed). Every
// SOAK_WINDOW proposals (default 100,000) a row of the table is logged:
// proposals/s, p50/p99, disk bytes of each validator's data directory,
// live bytes, disk/live, leader and follower RSS (and the parts of the
// leader's that are Pebble's block cache and memtables, Go's, and file
// pages), GC runs and bytes reclaimed so far, CPU per proposal (the
// validators, the leader, the clients) and how busy the machine was. The
// metrics are the first and last windows' figures,
// the worst disk/live ratio, RSS growth from the first window to the end,
// and the GC totals.
//
// A window's forms are signed before its timer starts (signing is the
// clients' cost, not the cluster's), so the cluster idles a few seconds
// between windows. Run it with -benchtime 1x: SOAK_COUNT, not b.N, is the
// work (make bench-soak).
func BenchmarkSoak(b *testing.B) {
	cfg := soakSettings(b)
	for _, gc := range []bool{true, false} {
		name := "gc=on"
		if !gc {
			name = "gc=off"
		}
		b.Run(name, func(b *testing.B) { soak(b, cfg, gc) })
	}
}

// soakEpochLength is the MOCK clock's epoch: the leader considers a
// compaction at each finalized epoch (and checks every second), so a short
// epoch lets GC run whenever the threshold is reached.
const soakEpochLength = time.Second

// soakGCPoll is how often the leader's last GC run is read: below the epoch
// length, and at most one compaction runs per epoch, so no run goes unseen.
const soakGCPoll = soakEpochLength / 4

// soakSeed makes the soak's wallets, paths and operations the same on
// every run.
const soakSeed = 19

// soakConfig is the soak's shape, from the environment.
type soakConfig struct {
	count, window, clients int
	// gcSizeDelta is SVC_VALIDATOR_GC_SIZE_DELTA (soakSettings).
	gcSizeDelta uint64
	// cacheBytes is every validator's SVC_VALIDATOR_CACHE_BYTES.
	cacheBytes int
}

func soakSettings(b *testing.B) soakConfig {
	cfg := soakConfig{count: envInt(b, "SOAK_COUNT", 1_000_000), window: envInt(b, "SOAK_WINDOW", 100_000), clients: envInt(b, "SOAK_CLIENTS", 64)}
	// By default 2 KiB per proposal of a window. A proposal writes about
	// 1 KiB of segments, so a run is due about every other window, five
	// times in the default soak, whatever the scale. A run rewrites the
	// whole live content, so a threshold far below it makes every byte of
	// garbage cost many bytes of rewrite (ADR 0033, "GC debt").
	cfg.gcSizeDelta = uint64(envInt(b, "SOAK_GC_SIZE_DELTA", cfg.window*2048))
	// Pebble's block cache fills as the state grows and then stays full.
	// The default, 128 MiB (the least with 32 MiB memtables), is full
	// within the first window, so the RSS growth the soak reports is what
	// grows with the length of the run, not the cache warming up.
	cfg.cacheBytes = envInt(b, "SOAK_CACHE_BYTES", 128<<20)
	cfg.window = min(cfg.window, cfg.count)
	return cfg
}

// soakClient is one closed-loop client: its wallet, the paths it holds
// live, and its own random source, so its operations do not depend on how
// the clients interleave.
type soakClient struct {
	key    *ecdsa.PrivateKey
	wallet common.Address
	rng    *rand.Rand
	live   []string // sub-paths written and not deleted
	paths  int      // sub-paths created so far
}

// soakOp is one prepared proposal.
type soakOp struct {
	route string
	form  string
}

// next draws the client's next operation: a delete or overwrite of a path
// it holds, else a write of a new one; seq numbers the proposal (its
// message differs from every other, so an overwrite changes the node).
func (sc *soakClient) next(seq int) (proposal.Action, string, []byte) {
	roll := sc.rng.IntN(10)
	switch {
	case roll == 0 && len(sc.live) > 0: // 10 %: delete
		i := sc.rng.IntN(len(sc.live))
		path := sc.live[i]
		sc.live[i] = sc.live[len(sc.live)-1]
		sc.live = sc.live[:len(sc.live)-1]
		return proposal.Delete, path, nil
	case roll <= 2 && len(sc.live) > 0: // 20 %: overwrite
		return proposal.Write, sc.live[sc.rng.IntN(len(sc.live))], soakMessage(seq)
	default: // 70 %, and whenever the client holds nothing
		sc.paths++
		path := "soak/" + strconv.Itoa(sc.paths)
		sc.live = append(sc.live, path)
		return proposal.Write, path, soakMessage(seq)
	}
}

// soakMessage is the 1 KiB message with the proposal's number in front.
func soakMessage(seq int) []byte {
	m := message1KiB()
	copy(m, fmt.Sprintf("%012d ", seq))
	return m
}

// soakWindow is one window's figures.
type soakWindow struct {
	proposals   int // proposals so far
	perSec      float64
	p50, p99    float64 // ms
	disk        []int64 // bytes of each validator's data directory
	wal         int64   // the largest validator's write-ahead logs among them
	live        uint64
	leaderRSS   int64
	followerRSS int64 // the larger follower's
	// The leader's Pebble block cache and memtables, part of its RSS.
	leaderCache, leaderMemTables int64
	// The leader's Go runtime memory (not given back), and its file-backed
	// pages, parts of its RSS.
	leaderGo, leaderFileRSS int64
	gcRuns                  uint64
	reclaimed               uint64
	missedGCRuns            uint64
	// CPU per proposal over the window: the three validators, the leader
	// among them, and this process (the clients); and how busy the machine
	// was.
	cpu cpuFigures
}

// diskPerLive is the largest validator's disk over the live bytes.
func (w soakWindow) diskPerLive() float64 {
	if w.live == 0 {
		return 0
	}
	return float64(slices.Max(w.disk)) / float64(w.live)
}

func soak(b *testing.B, cfg soakConfig, gc bool) {
	dir := b.TempDir()
	env := []string{"SVC_VALIDATOR_EPOCH_LENGTH=" + soakEpochLength.String(),
		// One operator request per client lifts its debt limit at the start.
		"SVC_VALIDATOR_OPERATOR_RATE=0", "SVC_VALIDATOR_CACHE_BYTES=" + strconv.Itoa(cfg.cacheBytes)}
	if gc {
		env = append(env, "SVC_VALIDATOR_GC_SIZE_DELTA="+strconv.FormatUint(cfg.gcSizeDelta, 10))
	} else {
		env = append(env, "SVC_VALIDATOR_GC_OFF=true")
	}
	c, err := startLedger(b.Cleanup, dir, env...)
	if err != nil {
		b.Fatal(err)
	}
	clients := soakClients(b, c, cfg.clients)
	gcs := &gcSampler{url: c.leader.url + "/v1/gc/status", http: c.http}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go gcs.run(ctx)

	// The table goes to stderr as it grows: a benchmark's log is cut after
	// a few lines, and an hour's run should show its windows as they end.
	table := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "soak gc=%-5v "+format+"\n", append([]any{gc}, args...)...)
	}
	b.Logf("soak gc=%v: %d proposals, windows of %d, %d clients, GC threshold %d B, epoch %s, block cache %d MiB",
		gc, cfg.count, cfg.window, len(clients), cfg.gcSizeDelta, soakEpochLength, cfg.cacheBytes>>20)
	table("%9s %9s %8s %8s %24s %8s %9s %9s %10s %10s %8s %8s %10s %7s %13s %10s %10s %10s %8s",
		"proposals", "props/s", "p50-ms", "p99-ms", "disk-MiB (v1 v2 v3)", "wal-MiB", "live-MiB", "disk/live", "leader-RSS", "cache+mem", "go-MiB", "file-MiB", "follow-RSS", "gc-runs", "reclaimed-MiB",
		"server-us", "leader-us", "client-us", "busy-%")
	var windows []soakWindow
	var timed time.Duration
	b.ResetTimer()
	b.StopTimer()
	for done, seq := 0, 0; done < cfg.count; {
		n := min(cfg.window, cfg.count-done)
		plans := prepareSoakWindow(b, c, clients, seq, n)
		seq += n
		// BENCH_PROFILE: every validator's CPU over the window's first
		// BENCH_PROFILE_SECONDS (default 10), and the leader's heap after.
		profiled := func() {}
		if profileDir() != "" {
			profiled = startSoakProfile(b, c, fmt.Sprintf("soak-gc=%v-%07d", gc, done+n))
		}
		cpu := startCPUMeter(c.servers())
		b.StartTimer()
		latencies, elapsed := runSoakWindow(b, c, plans)
		b.StopTimer()
		spent := cpu.figures(n)
		profiled()
		if b.Failed() {
			return
		}
		timed += elapsed
		done += n
		w := measureSoakWindow(b, c, dir, gcs)
		w.proposals, w.cpu = done, spent
		slices.Sort(latencies)
		pct := func(p float64) float64 {
			return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
		}
		w.perSec, w.p50, w.p99 = float64(n)/elapsed.Seconds(), pct(0.50), pct(0.99)
		windows = append(windows, w)
		disks := make([]string, len(w.disk))
		for i, d := range w.disk {
			disks[i] = fmt.Sprintf("%.1f", mib(d))
		}
		table("%9d %9.0f %8.1f %8.1f %24s %8.1f %9.1f %9.2f %10.1f %10.1f %8.1f %8.1f %10.1f %7d %13.1f %10d %10d %10d %8.0f",
			w.proposals, w.perSec, w.p50, w.p99, strings.Join(disks, " "), mib(w.wal), mib(w.live), w.diskPerLive(),
			mib(w.leaderRSS), mib(w.leaderCache+w.leaderMemTables), mib(w.leaderGo), mib(w.leaderFileRSS), mib(w.followerRSS), w.gcRuns, mib(w.reclaimed),
			w.cpu.servers.Microseconds(), w.cpu.leader.Microseconds(), w.cpu.client.Microseconds(), w.cpu.machineBusy)
		if w.missedGCRuns > 0 {
			b.Logf("%d GC runs went by between two reads of /v1/gc/status: their reclaimed bytes are not counted", w.missedGCRuns)
		}
	}
	reportSoak(b, cfg, windows, timed, gc)
}

// soakClients makes the clients' wallets (from the seed) and lifts their
// GC debt limits: every delete charges debt (ADR 0011), and the soak's
// deletes would block a wallet's writes long before the end.
func soakClients(b *testing.B, c *ledgerCluster, n int) []*soakClient {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients := make([]*soakClient, n)
	for i := range clients {
		seed := crypto.Keccak256([]byte(fmt.Sprintf("contentledger soak %d client %d", soakSeed, i)))
		key, err := crypto.ToECDSA(seed)
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = &soakClient{key: key, wallet: crypto.PubkeyToAddress(key.PublicKey), rng: rand.New(rand.NewPCG(soakSeed, uint64(i)))}
		if _, err := c.client.SetGcLimit(ctx, clients[i].wallet, soakDebtLimitMicros); err != nil {
			b.Fatalf("lifting the GC debt limit of client %d: %v", i, err)
		}
	}
	return clients
}

// soakDebtLimitMicros is the most the set-limit route takes, 10^6 debt
// units: 10^7 deletes at the least a delete is charged (0.10).
const soakDebtLimitMicros = 1_000_000 * 1_000_000

// prepareSoakWindow draws and signs the next n proposals, numbered from
// seq: each client its share, in its own order.
func prepareSoakWindow(b *testing.B, c *ledgerCluster, clients []*soakClient, seq, n int) [][]soakOp {
	plans := make([][]soakOp, len(clients))
	type draft struct {
		client int
		p      *ledgerclient.Proposal
	}
	var drafts []draft
	for i, sc := range clients {
		share := n / len(clients)
		if i < n%len(clients) {
			share++
		}
		plans[i] = make([]soakOp, share)
		for range share {
			action, path, msg := sc.next(seq)
			var id common.Hash
			binary.BigEndian.PutUint64(id[:], soakSeed)
			binary.BigEndian.PutUint64(id[24:], uint64(seq))
			seq++
			drafts = append(drafts, draft{i, &ledgerclient.Proposal{Action: action, ID: id, Message: msg, ContentType: "bench", Path: path}})
		}
	}
	// Sign in parallel; a client's forms keep its order.
	offsets := make([]int, len(clients)+1)
	for i, p := range plans {
		offsets[i+1] = offsets[i] + len(p)
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := w; j < len(drafts); j += workers {
				d := drafts[j]
				form, _, err := ledgerclient.Form(c.cfg, clients[d.client].key, d.p, common.Hash{})
				if err != nil {
					b.Error(err)
					return
				}
				route := "/v1/propose-write?wait=30s"
				if d.p.Action == proposal.Delete {
					route = "/v1/propose-delete?wait=30s"
				}
				plans[d.client][j-offsets[d.client]] = soakOp{route: route, form: form.Encode()}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return plans
}

// runSoakWindow has every client submit its plan, one proposal at a time
// on its own keep-alive connection, each answered once decided.
func runSoakWindow(b *testing.B, c *ledgerCluster, plans [][]soakOp) ([]time.Duration, time.Duration) {
	addr := strings.TrimPrefix(c.leader.url, "http://")
	latencies := make([][]time.Duration, len(plans))
	var failed atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for i, plan := range plans {
		wg.Go(func() {
			conn := &submitConn{addr: addr}
			defer conn.close()
			for _, op := range plan {
				if failed.Load() {
					return
				}
				t0 := time.Now()
				status, err := conn.submit(op.route, op.form)
				if err != nil || !api.Committed(status) {
					b.Errorf("client %d: %s: %q %v", i, op.route, status, err)
					failed.Store(true)
					return
				}
				latencies[i] = append(latencies[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	return slices.Concat(latencies...), time.Since(start)
}

// measureSoakWindow reads the figures of the table after a window.
func measureSoakWindow(b *testing.B, c *ledgerCluster, dir string, gcs *gcSampler) soakWindow {
	var w soakWindow
	for i, n := range c.nodes {
		if err := n.alive(); err != nil {
			b.Fatal(err)
		}
		disk, wal, err := dirBytesOnDisk(filepath.Join(dir, "v"+strconv.Itoa(i+1)))
		if err != nil {
			b.Fatal(err)
		}
		w.disk = append(w.disk, disk)
		w.wal = max(w.wal, wal)
		rss, err := harness.ProcMemory(n.cmd.Process.Pid, "VmRSS")
		if err != nil {
			b.Fatal(err)
		}
		if n == c.leader {
			w.leaderRSS = rss
			// File-backed pages (the binary's text among them) are not
			// memory the validator allocated.
			if w.leaderFileRSS, err = harness.ProcMemory(n.cmd.Process.Pid, "RssFile"); err != nil {
				b.Fatal(err)
			}
		} else {
			w.followerRSS = max(w.followerRSS, rss)
		}
	}
	// Live bytes: the stored bytes of every live content node (the encoded
	// node, as a segment carries it), added up over the wallets by the
	// leader's /v1/fragmentation/metrics. The soak's wallets are fewer than
	// the route lists, so its totals cover all of them. The route keeps its
	// scan for a few seconds: read until it is of the state the window
	// ended with. After a GC run the route reads every segment kept again,
	// which takes a while on a large store: the wait is generous.
	ended, err := c.commitIndex(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var frag api.FragmentationMetrics
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if err := harness.GetJSON(nil, 3*time.Minute, c.leader.url+"/v1/fragmentation/metrics", &frag); err != nil {
			b.Fatal(err)
		}
		if frag.AppliedIndex >= ended {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("/v1/fragmentation/metrics is still of index %d, the window ended at %d", frag.AppliedIndex, ended)
		}
		time.Sleep(200 * time.Millisecond) // polling the route's scan
	}
	w.live = frag.Totals.LiveBytes
	// What of the leader's RSS is Pebble's: the block cache (bounded by
	// its size) and the memtables, flushed ones an iterator still holds
	// included.
	var storage api.StorageSnapshot
	if err := harness.GetJSON(nil, time.Minute, c.leader.url+"/v1/ops/snapshots/storage", &storage); err != nil {
		b.Fatal(err)
	}
	w.leaderCache = storage.Pebble.BlockCache.SizeBytes
	w.leaderMemTables = int64(storage.Pebble.MemTable.SizeBytes + storage.Pebble.MemTable.ZombieSizeBytes)
	// And what is the Go runtime's: all it mapped, less the heap it gave
	// back to the system.
	w.leaderGo = int64(c.leaderMetric(b, "go_memstats_sys_bytes") - c.leaderMetric(b, "go_memstats_heap_released_bytes"))
	w.gcRuns, w.reclaimed, w.missedGCRuns = gcs.totals()
	return w
}

// reportSoak reports the metrics and says how the run stands against the
// targets: disk at most 3× the live bytes, RSS at the end within 25 % of
// RSS after the first window, the last window's proposals/s at least 80 %
// of the first's.
func reportSoak(b *testing.B, cfg soakConfig, windows []soakWindow, timed time.Duration, gc bool) {
	first, last := windows[0], windows[len(windows)-1]
	var maxRatio float64
	for _, w := range windows {
		maxRatio = max(maxRatio, w.diskPerLive())
	}
	growth := func(a, z int64) float64 { return 100 * (float64(z) - float64(a)) / float64(a) }
	b.ReportMetric(float64(timed.Nanoseconds())/float64(cfg.count), "ns/op")
	b.ReportMetric(first.perSec, "first-proposals/s")
	b.ReportMetric(last.perSec, "last-proposals/s")
	b.ReportMetric(first.p99, "first-p99-ms")
	b.ReportMetric(last.p99, "last-p99-ms")
	b.ReportMetric(maxRatio, "max-disk/live")
	b.ReportMetric(mib(slices.Max(last.disk)), "last-disk-MiB")
	b.ReportMetric(mib(last.live), "last-live-MiB")
	b.ReportMetric(growth(first.leaderRSS, last.leaderRSS), "rss-growth-%")
	b.ReportMetric(growth(first.followerRSS, last.followerRSS), "follower-rss-growth-%")
	b.ReportMetric(float64(last.gcRuns), "gc-runs")
	b.ReportMetric(mib(last.reclaimed), "reclaimed-MiB")
	// The machine is saturated, so proposals/s follows the validators' CPU
	// per proposal, and the machine's speed: on a shared machine that
	// varies by a fifth within a run. The clients do the same work per
	// proposal in every window, so their CPU per proposal measures the
	// machine's speed; the validators' CPU per proposal over the clients'
	// is the cost of a proposal with the machine's speed taken out.
	b.ReportMetric(float64(first.cpu.servers.Microseconds()), "first-server-cpu-us/op")
	b.ReportMetric(float64(last.cpu.servers.Microseconds()), "last-server-cpu-us/op")
	b.ReportMetric(100*relativeCost(first)/relativeCost(last), "last-at-first-speed-%")
	verdict := func(ok bool) string {
		if ok {
			return "meets"
		}
		return "misses"
	}
	b.Logf("targets (gc=%v): disk/live at most 3 after each window: %.2f, %s; leader RSS growth within 25%%: %.1f%%, %s; "+
		"last window's proposals/s at least 80%% of the first's: %.0f%%, %s",
		gc, maxRatio, verdict(maxRatio <= 3), growth(first.leaderRSS, last.leaderRSS), verdict(growth(first.leaderRSS, last.leaderRSS) <= 25),
		100*last.perSec/first.perSec, verdict(last.perSec >= 0.8*first.perSec))
	b.Logf("the machine's speed (the clients' CPU per proposal): %v in the first window, %v in the last; "+
		"the validators' CPU per proposal over the clients': %.1f, then %.1f (at the first window's machine speed, the last window would have made %.0f%% of the first's proposals/s)",
		first.cpu.client.Round(time.Microsecond), last.cpu.client.Round(time.Microsecond), relativeCost(first), relativeCost(last), 100*relativeCost(first)/relativeCost(last))
}

// relativeCost is the validators' CPU per proposal over the clients' in w:
// what a proposal costs the validators, in units of the machine's speed.
func relativeCost(w soakWindow) float64 {
	return w.cpu.servers.Seconds() / max(w.cpu.client.Seconds(), 1e-9)
}

// gcSampler follows the leader's last GC run and adds up the runs it sees.
type gcSampler struct {
	url  string
	http *http.Client

	mu        sync.Mutex
	last      uint64 // the number of the last run seen
	reclaimed uint64
	missed    uint64 // runs that went by unseen
}

func (g *gcSampler) run(ctx context.Context) {
	tick := time.NewTicker(soakGCPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var st api.GcStatus
		if harness.GetJSON(g.http, 5*time.Second, g.url, &st) != nil || st.LastRun == nil {
			continue // a slow answer under load; the next read catches up
		}
		g.mu.Lock()
		if r := st.LastRun; r.Run > g.last {
			g.missed += r.Run - g.last - 1
			g.reclaimed += r.ReclaimedBytes
			g.last = r.Run
		}
		g.mu.Unlock()
	}
}

// totals are the GC runs so far, the bytes they reclaimed, and how many
// of them went by unseen (their bytes are not in reclaimed).
func (g *gcSampler) totals() (runs, reclaimed, missed uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last, g.reclaimed, g.missed
}

// dirBytesOnDisk is the space the files under dir take on disk, and among
// them Pebble's write-ahead logs (*.log): preallocated and recycled, they
// are a fixed part of some 35 MiB each, which dominates a short soak.
func dirBytesOnDisk(dir string) (total, wal int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking: Pebble deletes obsolete files
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n := allocatedBytes(info)
		total += n
		if strings.HasSuffix(path, ".log") {
			wal += n
		}
		return nil
	})
	return total, wal, err
}

func mib[T int64 | uint64](n T) float64 { return float64(n) / (1 << 20) }

// startSoakProfile profiles the validators (BENCH_PROFILE) from now into
// files named by prefix; the returned function waits for the profiles.
func startSoakProfile(b *testing.B, c *ledgerCluster, prefix string) (wait func()) {
	seconds := profileSeconds(b, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.profile(context.Background(), time.Duration(seconds)*time.Second, filepath.Join(profileDir(), prefix)); err != nil {
			b.Logf("profile: %v", err)
		}
	}()
	return func() { <-done }
}
