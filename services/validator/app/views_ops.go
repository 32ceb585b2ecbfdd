package app

import (
	"errors"
	"io/fs"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/labstack/echo/v4"
	dto "github.com/prometheus/client_model/go"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	httpapi "github.com/contentledger/contentledger/services/validator/internal/api"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// opsViews serves the read-only source routes of storage, GC,
// fragmentation and the runtime. Every answer is computed from applied
// state, the database's and the runtime's own figures; nothing is written.
type opsViews struct {
	cfg       Config
	node      *consensus.Node
	db        *storage.DB
	segments  *segments.Catalog
	nats      []httpapi.NATSClient
	gateway   *blobgateway.Checker // nil: no IPFS gateway configured
	startedAt time.Time
	now       func() time.Time
}

// register adds the routes to the API's echo instance, behind its
// authentication and error handling (internal/api).
func (v *opsViews) register(e *echo.Echo) {
	e.GET("/v1/ops/snapshots/storage", v.storageSnapshot)
	e.GET("/v1/ops/snapshots/runtime", v.runtimeSnapshot)
	e.GET("/v1/gc/status", v.gcStatus)
	e.GET("/v1/gc/estimate", v.gcEstimate)
	e.GET("/v1/compaction/proposals", v.compactionProposals)
	e.GET("/v1/fragmentation/metrics", v.fragmentationMetrics)
	e.GET("/v1/fragmentation/metrics/:wallet", v.fragmentationWallet)
	e.GET("/v1/fragmentation/top", v.fragmentationTop)
	v.registerSegments(e)
	v.registerCIDs(e)
	v.registerStorageFiles(e)
}

// storageSnapshot serves GET /v1/ops/snapshots/storage[?detail=tars].
func (v *opsViews) storageSnapshot(c echo.Context) error {
	detail := c.QueryParam("detail")
	if detail != "" && detail != "tars" {
		return apierror.Field("detail", "must be tars, or absent")
	}
	st, err := v.segments.Storage(detail == "tars")
	if err != nil {
		return err
	}
	out := api.StorageSnapshot{ContractVersion: api.StorageSnapshotVersion, NodeID: v.cfg.NodeID, AppliedIndex: st.AppliedIndex,
		At: v.now().UTC(), Pebble: pebbleMetrics(v.db), Segments: st.Segments, Tars: st.Tars, TarFiles: st.TarFiles, Gaps: []api.Gap{}}
	if out.Tars.PackingEfficiency == nil {
		out.Gaps = append(out.Gaps, api.Gap{Field: "tars.packingEfficiency", Reason: "no TAR file is closed yet: the newest one is still filling"})
	}
	if out.Pebble.Fsync.Count == 0 {
		out.Gaps = append(out.Gaps, api.Gap{Field: "pebble.fsync", Reason: "no WAL fsync measured since the database was opened"})
	}
	if d, ok := diskUsage(v.db.Dir()); ok {
		out.Disk = &d
	} else {
		out.Gaps = append(out.Gaps, api.Gap{Field: "disk", Reason: "this platform does not report file system usage to the validator"})
	}
	first, last, snap := v.node.LogBounds()
	out.Raft = api.RaftStorage{FirstIndex: first, LastIndex: last, SnapshotIndex: snap}
	if md := v.node.Storage().SnapshotMetadata(); md != nil {
		out.Raft.SnapshotTerm = md.GetTerm()
	}
	if out.Raft.SnapshotFiles, out.Raft.SnapshotBytes, err = dirSize(v.db); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// dirSize counts the files in the raft snapshot directory and their bytes.
func dirSize(db *storage.DB) (int, uint64, error) {
	dir := db.SnapshotDir()
	names, err := db.FS().List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var n int
	var size uint64
	for _, name := range names {
		info, err := db.FS().Stat(db.FS().PathJoin(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // replaced by a newer snapshot meanwhile
		}
		if err != nil {
			return 0, 0, err
		}
		if !info.IsDir() {
			n++
			size += uint64(info.Size())
		}
	}
	return n, size, nil
}

// pebbleMetrics renders the database's own figures.
func pebbleMetrics(db *storage.DB) api.PebbleMetrics {
	m := db.Pebble().Metrics()
	var out api.PebbleMetrics
	out.DiskSpaceUsageBytes = m.DiskSpaceUsage()
	out.Levels = make([]api.PebbleLevel, len(m.Levels))
	for i, l := range m.Levels {
		out.Levels[i] = api.PebbleLevel{Level: i, Tables: l.TablesCount, Bytes: l.TablesSize, Sublevels: l.Sublevels, Score: finite(l.Score)}
	}
	out.L0Files, out.L0Sublevels, out.ReadAmp = m.Levels[0].TablesCount, m.Levels[0].Sublevels, m.ReadAmp()
	cp := &out.Compactions
	cp.Count, cp.DefaultCount, cp.MoveCount, cp.DeleteOnlyCount = m.Compact.Count, m.Compact.DefaultCount, m.Compact.MoveCount, m.Compact.DeleteOnlyCount
	cp.ElisionOnlyCount, cp.ReadCount, cp.RewriteCount, cp.MultiLevelCount = m.Compact.ElisionOnlyCount, m.Compact.ReadCount, m.Compact.RewriteCount, m.Compact.MultiLevelCount
	cp.InProgress, cp.Failed, cp.Cancelled = m.Compact.NumInProgress, m.Compact.FailedCount, m.Compact.CancelledCount
	cp.EstimatedDebtBytes, cp.DurationMs = m.Compact.EstimatedDebt, m.Compact.Duration.Milliseconds()
	out.Flushes = m.Flush.Count
	out.MemTable.SizeBytes, out.MemTable.Count = m.MemTable.Size, m.MemTable.Count
	out.WAL.Files, out.WAL.SizeBytes, out.WAL.PhysicalSizeBytes = m.WAL.Files, m.WAL.Size, m.WAL.PhysicalSize
	out.WAL.BytesIn, out.WAL.BytesWritten = m.WAL.BytesIn, m.WAL.BytesWritten
	out.BlockCache.SizeBytes, out.BlockCache.Hits, out.BlockCache.Misses = m.BlockCache.Size, m.BlockCache.Hits, m.BlockCache.Misses
	out.Tombstones = m.Keys.TombstoneCount
	stalls := db.WriteStalls()
	out.WriteStalls = &stalls.Count
	out.WriteStallMs = float64(stalls.Total.Microseconds()) / 1000
	out.Stalled = !stalls.Since.IsZero()
	if h := m.LogWriter.FsyncLatency; h != nil {
		var pm dto.Metric
		if h.Write(&pm) == nil && pm.GetHistogram() != nil {
			hist := pm.GetHistogram()
			out.Fsync.Count = hist.GetSampleCount()
			out.Fsync.P50Ms = promQuantileMs(hist, 0.50)
			out.Fsync.P99Ms = promQuantileMs(hist, 0.99)
		}
	}
	return out
}

// finite maps Pebble's infinite level scores (a level with nothing to
// compact into) to 0: JSON has no infinity.
func finite(f float64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0
	}
	return f
}

// promQuantileMs is the upper bound, in ms, of the bucket of a histogram of
// nanoseconds holding quantile q; nil without samples. A quantile beyond
// the last bucket is given as its bound (the histogram knows no more).
func promQuantileMs(h *dto.Histogram, q float64) *float64 {
	total := h.GetSampleCount()
	if total == 0 {
		return nil
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var bound float64
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			break
		}
		bound = b.GetUpperBound()
		if b.GetCumulativeCount() >= rank {
			break
		}
	}
	ms := bound / float64(time.Millisecond)
	return &ms
}

// runtimeSnapshot serves GET /v1/ops/snapshots/runtime.
func (v *opsViews) runtimeSnapshot(c echo.Context) error {
	now := v.now()
	out := api.RuntimeSnapshot{ContractVersion: api.RuntimeSnapshotVersion, NodeID: v.cfg.NodeID, At: now.UTC(),
		StartedAt: v.startedAt.UTC(), UptimeMs: now.Sub(v.startedAt).Milliseconds(), Go: goRuntime(), Gaps: []api.Gap{}}
	out.Process, out.Gaps = processFigures(out.Gaps)
	out.NATS = natsConnections(v.nats)
	cids, err := v.segments.CIDStats()
	if err != nil {
		return err
	}
	out.Blobstore = api.Blobstore{CidMappings: cids.NodesWithCID, AppliedIndex: cids.AppliedIndex, ComputedAt: cids.ComputedAt}
	out.Gaps = gatewayFigures(&out.Blobstore, v.gateway, out.Gaps)
	return c.JSON(http.StatusOK, out)
}

// gatewayFigures fills in the IPFS gateway and its last check, and the
// gaps of what is not known: the gateway when none is configured, the
// check before the first ends. It reads the checker's last outcome and
// never waits for a check.
func gatewayFigures(b *api.Blobstore, gateway *blobgateway.Checker, gaps []api.Gap) []api.Gap {
	if gateway == nil {
		return append(gaps,
			api.Gap{Field: "blobstore.gatewayUrl", Reason: "this validator is configured with no IPFS gateway (SVC_VALIDATOR_IPFS_GATEWAY)"},
			api.Gap{Field: "blobstore.lastCheck", Reason: "no IPFS gateway is configured, so none is checked"})
	}
	u := gateway.URL()
	b.GatewayURL = &u
	last, ok := gateway.Last()
	if !ok {
		return append(gaps, api.Gap{Field: "blobstore.lastCheck", Reason: "the first check of the IPFS gateway has not ended yet"})
	}
	at := last.At.UTC()
	b.LastCheck = &at
	b.Check = &api.GatewayCheck{OK: last.OK, LatencyMs: float64(last.Latency.Microseconds()) / 1000, Error: last.Err}
	if last.StatusCode != 0 {
		b.Check.StatusCode = &last.StatusCode
	}
	return gaps
}

// goRuntime reads the Go runtime's figures through runtime/metrics, which,
// unlike runtime.ReadMemStats, does not stop the world.
func goRuntime() api.GoRuntime {
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

// processFigures reads the process's own figures; those the platform does
// not report are nil, with a gap each.
func processFigures(gaps []api.Gap) (api.Process, []api.Gap) {
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
