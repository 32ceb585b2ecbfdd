package api

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"
	dto "github.com/prometheus/client_model/go"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/sysinfo"
)

// The storage routes: the storage snapshot (source), and the segment
// store's local diagnostics: the TAR files listed (/api/segments/tars), the
// newest segments (/api/segments/recent), each TAR file streamed out as a
// real tar archive (/segments/{name}, pkg/segarchive) for backups and
// offline checks of the hash chain, and the storage files (ADR 0021),
// plain text for curl, diff and grep: /manifest (what the store is) and
// /journal.log (the segment chain, a line per segment). internal/segments
// computes them; the CID, fragmentation and GC views of the same store are
// in cid.go, fragmentation.go and gc.go.

// Segments is the segment store's views (segments.Catalog).
type Segments interface {
	Storage(withFiles bool) (segments.Storage, error)
	Tars() (api.SegmentTars, error)
	Recent(limit int) (api.RecentSegments, error)
	// OpenArchive fails with not_found for a name that is no TAR file of
	// this validator.
	OpenArchive(name string) (*segments.Archive, error)
	Manifest() (segments.Manifest, error)
	OpenJournal(from uint64) (*segments.Journal, error)
	CIDStats() (api.CIDStats, error)
	// CIDReferences fails with not_found when no live node references cid.
	CIDReferences(cid string) (api.CIDReverse, error)
	Fragmentation() (api.FragmentationMetrics, error)
	// WalletFragmentation fails with not_found for a wallet that wrote
	// nothing.
	WalletFragmentation(wallet common.Address) (api.FragmentationWallet, error)
	TopFragmented(limit int) (api.FragmentationTop, error)
	GcStatus() (api.GcStatus, error)
	GcEstimate() (api.GcEstimate, error)
	WalletGcEstimate(wallet common.Address) (api.GcEstimate, error)
	CompactionProposals() (api.CompactionProposals, error)
	// GcVotes and GcLog read the newest runs GC runs (gclifecycle.go).
	GcVotes(runs int) (api.GcVotes, error)
	GcLog(runs int) (segments.GcLog, error)
}

// Database is the Pebble database's figures (storage.DB).
type Database interface {
	Pebble() *pebble.DB
	WriteStalls() storage.WriteStalls
	// Dir is where the database lives: the disk figures are its file
	// system's.
	Dir() string
	SnapshotFiles() (files int, bytes uint64, err error)
	KeySpaceUsage() ([]storage.KeySpaceBytes, error)
}

// RaftLog is the stored raft log's bounds (consensus.Node).
type RaftLog interface {
	LogBounds() (first, last, snapshot uint64)
	SnapshotTerm() uint64
}

// storageSnapshot serves GET /v1/ops/snapshots/storage[?detail=tars].
func (s *Server) storageSnapshot(c echo.Context) error {
	detail := c.QueryParam("detail")
	if detail != "" && detail != "tars" {
		return apierror.Field("detail", "must be tars, or absent")
	}
	if !s.opsReader(c) {
		return c.JSON(http.StatusOK, api.StorageSnapshot{ContractVersion: api.StorageSnapshotVersion, At: s.now().UTC(), Gaps: publicViewGaps()})
	}
	st, err := s.deps.Segments.Storage(detail == "tars")
	if err != nil {
		return err
	}
	db := s.deps.Database
	pm, err := pebbleMetrics(db)
	if err != nil {
		return err
	}
	out := api.StorageSnapshot{ContractVersion: api.StorageSnapshotVersion, NodeID: s.cfg.NodeID, AppliedIndex: st.AppliedIndex,
		At: s.now().UTC(), Pebble: pm, Segments: st.Segments, Tars: st.Tars, TarFiles: st.TarFiles, Gaps: []api.Gap{}}
	if out.Tars.PackingEfficiency == nil {
		out.Gaps = append(out.Gaps, api.Gap{Field: "tars.packingEfficiency", Reason: "no TAR file is closed yet: the newest one is still filling"})
	}
	if out.Pebble.Fsync.Count == 0 {
		out.Gaps = append(out.Gaps, api.Gap{Field: "pebble.fsync", Reason: "no WAL fsync measured since the database was opened"})
	}
	if d, ok := sysinfo.DiskUsage(db.Dir()); ok {
		out.Disk = &d
	} else {
		out.Gaps = append(out.Gaps, api.Gap{Field: "disk", Reason: "this platform does not report file system usage to the validator"})
	}
	first, last, snap := s.deps.RaftLog.LogBounds()
	out.Raft = api.RaftStorage{FirstIndex: first, LastIndex: last, SnapshotIndex: snap, SnapshotTerm: s.deps.RaftLog.SnapshotTerm()}
	if out.Raft.SnapshotFiles, out.Raft.SnapshotBytes, err = db.SnapshotFiles(); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// pebbleMetrics renders the database's own figures.
func pebbleMetrics(db Database) (api.PebbleMetrics, error) {
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
	cp.BlobFileRewriteCount = m.Compact.BlobFileRewriteCount
	cp.InProgress, cp.Failed, cp.Cancelled = m.Compact.NumInProgress, m.Compact.FailedCount, m.Compact.CancelledCount
	cp.EstimatedDebtBytes, cp.DurationMs = m.Compact.EstimatedDebt, m.Compact.Duration.Milliseconds()
	out.Flushes = m.Flush.Count
	out.MemTable.SizeBytes, out.MemTable.Count = m.MemTable.Size, m.MemTable.Count
	out.MemTable.ZombieSizeBytes, out.MemTable.ZombieCount = m.MemTable.ZombieSize, m.MemTable.ZombieCount
	out.WAL.Files, out.WAL.SizeBytes, out.WAL.PhysicalSizeBytes = m.WAL.Files, m.WAL.Size, m.WAL.PhysicalSize
	out.WAL.BytesIn, out.WAL.BytesWritten = m.WAL.BytesIn, m.WAL.BytesWritten
	out.BlockCache.SizeBytes, out.BlockCache.Hits, out.BlockCache.Misses = m.BlockCache.Size, m.BlockCache.Hits, m.BlockCache.Misses
	out.BlobFiles.Count, out.BlobFiles.SizeBytes = m.BlobFiles.LiveCount, m.BlobFiles.LiveSize
	out.BlobFiles.ValueBytes, out.BlobFiles.ReferencedValueBytes = m.BlobFiles.ValueSize, m.BlobFiles.ReferencedValueSize
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
	spaces, err := db.KeySpaceUsage()
	if err != nil {
		return out, err
	}
	out.KeySpaces = make([]api.PebbleKeySpace, len(spaces))
	for i, ks := range spaces {
		out.KeySpaces[i] = api.PebbleKeySpace{Name: ks.Name, Bytes: ks.Bytes}
	}
	return out, nil
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

// segmentTars serves GET /api/segments/tars.
func (s *Server) segmentTars(c echo.Context) error {
	out, err := s.deps.Segments.Tars()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// recentSegments serves GET /api/segments/recent[?limit=N].
func (s *Server) recentSegments(c echo.Context) error {
	limit := api.DefaultRecentSegments
	if values, given := c.QueryParams()["limit"]; given {
		n, err := strconv.Atoi(values[0])
		if len(values) != 1 || err != nil || n < 1 || n > api.MaxRecentSegments {
			return apierror.Field("limit", "must be one integer from 1 to %d", api.MaxRecentSegments)
		}
		limit = n
	}
	out, err := s.deps.Segments.Recent(limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// segmentArchive serves GET /segments/{name}: the TAR file's segments as
// of now, as a segment archive. A closed TAR file never changes; the newest
// one is archived up to its newest segment, a prefix of what it will hold.
func (s *Server) segmentArchive(c echo.Context) error {
	name := c.Param("name")
	a, err := s.deps.Segments.OpenArchive(name)
	if err != nil {
		return err
	}
	defer a.Close()
	m := a.Manifest
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/x-tar")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	h.Set("X-Segments-First", strconv.FormatUint(m.FirstIndex, 10))
	h.Set("X-Segments-Last", strconv.FormatUint(m.LastIndex, 10))
	h.Set("X-Segments-Head", m.HeadHash)
	// The head hash names the bytes: a closed file's never change.
	h.Set("ETag", `"`+m.HeadHash+`"`)
	if a.Closed {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	arm, done := streamOK(c)
	defer done()
	return a.Write(c.Response(), arm)
}

// manifestVersion numbers the manifest's keys: a reader that finds a
// higher one may meet keys it does not know.
const manifestVersion = 1

// manifest serves GET /manifest: key=value lines in a fixed order, read
// at one applied index: this validator's own, then the segment store's.
func (s *Server) manifest(c echo.Context) error {
	store, err := s.deps.Segments.Manifest()
	if err != nil {
		return err
	}
	chain := s.cfg.Blockchain
	contract := "none"
	if a := common.HexToAddress(chain.ContractAddress); a != (common.Address{}) {
		contract = strings.ToLower(a.Hex())
	}
	lines := append([]segments.KeyValue{
		{Key: "manifest.version", Value: strconv.Itoa(manifestVersion)},
		{Key: "node.id", Value: strconv.FormatUint(s.cfg.NodeID, 10)},
		{Key: "applied.index", Value: strconv.FormatUint(store.AppliedIndex, 10)},
		{Key: "mode", Value: chain.Mode},
		{Key: "content.root", Value: s.cfg.Form.ContentRoot},
		{Key: "chain.id", Value: strconv.FormatUint(chain.ChainID, 10)},
		{Key: "chain.contract", Value: contract},
	}, store.Lines...)
	var b strings.Builder
	b.WriteString("# contentledger store manifest (ADR 0021)\n")
	for _, kv := range lines {
		b.WriteString(kv.Key)
		b.WriteByte('=')
		b.WriteString(kv.Value)
		b.WriteByte('\n')
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, echo.MIMETextPlainCharsetUTF8, []byte(b.String()))
}

// journal serves GET /journal.log[?from=N]: a line per segment with index
// >= N (default: all), oldest first, streamed from one Pebble snapshot.
func (s *Server) journal(c echo.Context) error {
	from := uint64(1)
	if values, given := c.QueryParams()["from"]; given {
		n, err := strconv.ParseUint(values[0], 10, 64)
		if len(values) != 1 || err != nil || n < 1 {
			return apierror.Field("from", "must be one raft index, an integer of at least 1")
		}
		from = n
	}
	j, err := s.deps.Segments.OpenJournal(from)
	if err != nil {
		return err
	}
	defer j.Close()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextPlainCharsetUTF8)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Applied-Index", strconv.FormatUint(j.AppliedIndex, 10))
	arm, done := streamOK(c)
	defer done()
	return j.Write(c.Response(), arm)
}

// streamWriteTimeout cuts off a client that takes no bytes of a streamed
// answer for this long: the stream reads through a Pebble snapshot, which
// a stalled client would otherwise hold open.
const streamWriteTimeout = 30 * time.Second

// streamOK sends status 200 with the headers set so far, and returns arm,
// which gives the client streamWriteTimeout from now to take the next
// bytes, to be called before each write; and done, which clears that
// deadline. A failure from here on cuts the answer short: handleError
// drops the connection, so the reader never takes a part for the whole.
//
// The server's read and write timeouts are lifted first: an archive may
// take longer than a request may (httpserver.LiftDeadlines).
func streamOK(c echo.Context) (arm, done func()) {
	httpserver.LiftDeadlines(c.Response())
	c.Response().WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.Response())
	arm = func() { _ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }
	arm()
	return arm, func() { _ = rc.SetWriteDeadline(time.Time{}) }
}
