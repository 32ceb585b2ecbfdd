package app

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/consensus/cluster"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// The validator's Prometheus metrics (/metrics), in a registry of its own
// per Run, so that several validators in one process count apart. Nearly
// every series is read at scrape time from figures the validator keeps
// anyway (raft's status, the pipeline's and the transport's counters,
// Pebble's metrics, the replicated proposal counts): the hot paths carry
// no metric code. Only HTTP requests are counted as they are answered.
// Labels are bounded: route templates, raft ids, rejection reasons.

// metricSources are what a scrape reads.
type metricSources struct {
	cfg        Config
	version    string
	node       *consensus.Node
	machine    *state.Machine
	db         *storage.DB
	pipe       *pipeline.Pipeline
	peers      *transport.Transport
	leadership *cluster.LeadershipLog
	index      *payments.Index // nil: payments not verified (MOCK)
}

type validatorMetrics struct {
	nodeID   uint64
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newValidatorMetrics(src metricSources) *validatorMetrics {
	m := &validatorMetrics{
		nodeID: src.cfg.NodeID,
		reg:    prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "validator_http_requests_total",
			Help: "HTTP requests answered, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "validator_http_request_duration_seconds",
			Help: "Time to answer an HTTP request, by route template and method (event streams last as long as their client).",
			// From a point read (well under a millisecond) to a status
			// long poll (?wait=, up to a minute).
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
	}
	m.reg.MustRegister(m.requests, m.latency, newScrapeCollector(src),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// register serves /metrics and counts every request, rejections by the
// authentication and rate limits included: the middleware runs first and
// writes errors itself, so that it sees the status sent.
func (m *validatorMetrics) register(e *echo.Echo) {
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})))
	e.GET("/api/metrics", m.serveJSON)
	e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			// Deferred: an answer cut short ends the handler with a panic
			// (internal/api's error handler), and it is counted too.
			defer func() {
				route := c.Path() // empty when no route matched
				if route == "" {
					route = "unmatched"
				}
				method := c.Request().Method
				m.requests.WithLabelValues(route, method, strconv.Itoa(c.Response().Status)).Inc()
				m.latency.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
			}()
			if err := next(c); err != nil {
				c.Error(err)
			}
			return nil
		}
	})
}

// serveJSON serves GET /api/metrics: the same gathering as /metrics, as
// JSON.
func (m *validatorMetrics) serveJSON(c echo.Context) error {
	families, err := m.reg.Gather()
	if err != nil {
		return err
	}
	out := api.MetricsJSON{NodeID: m.nodeID, At: time.Now().UTC(), Families: make([]api.MetricFamily, 0, len(families))}
	for _, f := range families {
		fam := api.MetricFamily{Name: f.GetName(), Type: strings.ToLower(f.GetType().String()), Help: f.GetHelp(),
			Series: make([]api.MetricSeries, 0, len(f.GetMetric()))}
		for _, mt := range f.GetMetric() {
			s := api.MetricSeries{Labels: make(map[string]string, len(mt.GetLabel()))}
			for _, l := range mt.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case mt.GetHistogram() != nil:
				h := mt.GetHistogram()
				count, sum := h.GetSampleCount(), h.GetSampleSum()
				s.Count, s.Sum = &count, &sum
				for _, b := range h.GetBucket() {
					if !math.IsInf(b.GetUpperBound(), 1) {
						s.Buckets = append(s.Buckets, api.MetricBucket{Le: b.GetUpperBound(), Count: b.GetCumulativeCount()})
					}
				}
			case mt.GetSummary() != nil:
				count, sum := mt.GetSummary().GetSampleCount(), mt.GetSummary().GetSampleSum()
				s.Count, s.Sum = &count, &sum
			case mt.GetCounter() != nil:
				v := mt.GetCounter().GetValue()
				s.Value = &v
			case mt.GetGauge() != nil:
				v := mt.GetGauge().GetValue()
				s.Value = &v
			default:
				v := mt.GetUntyped().GetValue()
				s.Value = &v
			}
			fam.Series = append(fam.Series, s)
		}
		out.Families = append(out.Families, fam)
	}
	return c.JSON(http.StatusOK, out)
}

// scrapeCollector reads the validator's figures at each scrape.
type scrapeCollector struct {
	src metricSources

	buildInfo                                           *prometheus.Desc
	term, leader, isLeader, commit, applied             *prometheus.Desc
	logFirst, logLast, snapshot, leaderChanges          *prometheus.Desc
	committed, finalized, rejected, orphaned            *prometheus.Desc
	writes, deletes, lastCommit                         *prometheus.Desc
	pending, queued, inFlight, backpressure             *prometheus.Desc
	accepted, verified, pipeRejected, batches           *prometheus.Desc
	reproposed, backpressureEvents                      *prometheus.Desc
	peerConnected, peerSentMsgs, peerSentBytes          *prometheus.Desc
	peerRecvMsgs, peerRecvBytes, peerDropped            *prometheus.Desc
	peerReconnects, peerQueue                           *prometheus.Desc
	diskUsage, readAmp, l0Files, compactions, compDebt  *prometheus.Desc
	flushes, walWritten, stalls, stallSeconds           *prometheus.Desc
	cacheHits, cacheMisses, fsync                       *prometheus.Desc
	payIndexed, payMessages, payRetracted, debtsIndexed *prometheus.Desc
}

func newScrapeCollector(src metricSources) *scrapeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &scrapeCollector{src: src,
		buildInfo: d("validator_build_info", "Always 1; the labels name the software version, the mode and the node.", "version", "mode", "node"),

		term:          d("validator_raft_term", "Raft term this node is in."),
		leader:        d("validator_raft_leader", "Raft id of the leader this node knows; 0 when none."),
		isLeader:      d("validator_raft_is_leader", "1 when this node is the raft leader."),
		commit:        d("validator_raft_commit_index", "Highest raft index known committed."),
		applied:       d("validator_raft_applied_index", "Raft index applied to the state."),
		logFirst:      d("validator_raft_log_first_index", "First raft index still in the log."),
		logLast:       d("validator_raft_log_last_index", "Last raft index in the log."),
		snapshot:      d("validator_raft_snapshot_index", "Raft index of the newest snapshot."),
		leaderChanges: d("validator_raft_leadership_changes_total", "Changes of this node's leader, role or term it has seen since it started (the leadership history)."),

		committed:  d("validator_proposals_committed_total", "Proposals committed (replicated: the same on every validator at one applied index)."),
		finalized:  d("validator_proposals_finalized_total", "Committed proposals whose epoch is final on chain."),
		rejected:   d("validator_proposals_rejected_total", "Proposals rejected, by reason (replicated).", "reason"),
		orphaned:   d("validator_proposals_payment_orphaned", "Committed proposals whose payment a reorg has orphaned, now."),
		writes:     d("validator_content_writes_total", "Committed writes (replicated)."),
		deletes:    d("validator_content_deletes_total", "Committed deletes (replicated)."),
		lastCommit: d("validator_last_commit_timestamp_seconds", "When the batch of the last committed proposal was sealed, unix seconds; 0 before the first."),

		pending:            d("validator_pipeline_pending", "Proposals accepted by this node and not yet decided."),
		queued:             d("validator_pipeline_queued", "Decided proposals waiting for the sender."),
		inFlight:           d("validator_pipeline_in_flight", "Proposals proposed to raft and not yet applied."),
		backpressure:       d("validator_pipeline_backpressure", "1 while proposals wait because in-flight proposals are at MAX_PENDING_MESSAGES."),
		backpressureEvents: d("validator_pipeline_backpressure_events_total", "Times backpressure began."),
		accepted:           d("validator_pipeline_accepted_total", "Proposals accepted at intake by this node."),
		verified:           d("validator_pipeline_verified_total", "Proposals whose payment this node verified."),
		pipeRejected:       d("validator_pipeline_rejected_total", "Proposals this node decided to reject."),
		batches:            d("validator_pipeline_batches_total", "Batches this node proposed to raft."),
		reproposed:         d("validator_pipeline_reproposed_total", "Proposals proposed again after raft dropped them."),

		peerConnected:  d("validator_peer_connected", "1 while the stream to (out) or from (in) the peer is established.", "peer", "direction"),
		peerSentMsgs:   d("validator_peer_sent_messages_total", "Raft messages written to the peer's stream.", "peer"),
		peerSentBytes:  d("validator_peer_sent_bytes_total", "Bytes of the raft messages written to the peer's stream.", "peer"),
		peerRecvMsgs:   d("validator_peer_received_messages_total", "Raft messages received from the peer.", "peer"),
		peerRecvBytes:  d("validator_peer_received_bytes_total", "Bytes of the raft messages received from the peer.", "peer"),
		peerDropped:    d("validator_peer_dropped_messages_total", "Raft messages that never reached the peer's connection (queue full, unreachable, too large).", "peer"),
		peerReconnects: d("validator_peer_reconnects_total", "Outbound connections to the peer established after the first.", "peer"),
		peerQueue:      d("validator_peer_queue_depth", "Raft messages waiting in the peer's send queue.", "peer"),

		diskUsage:    d("validator_pebble_disk_usage_bytes", "Disk space Pebble uses."),
		readAmp:      d("validator_pebble_read_amplification", "Pebble's read amplification."),
		l0Files:      d("validator_pebble_l0_files", "Tables in Pebble's L0."),
		compactions:  d("validator_pebble_compactions_total", "Compactions Pebble has run."),
		compDebt:     d("validator_pebble_compaction_debt_bytes", "Pebble's estimated compaction debt."),
		flushes:      d("validator_pebble_flushes_total", "Memtable flushes."),
		walWritten:   d("validator_pebble_wal_bytes_written_total", "Bytes written to the WAL."),
		stalls:       d("validator_pebble_write_stalls_total", "Write stalls Pebble reported."),
		stallSeconds: d("validator_pebble_write_stall_seconds_total", "Time writes were stalled."),
		cacheHits:    d("validator_pebble_block_cache_hits_total", "Block cache hits."),
		cacheMisses:  d("validator_pebble_block_cache_misses_total", "Block cache misses."),
		fsync:        d("validator_wal_fsync_duration_seconds", "Latency of the WAL's fsyncs (raft log, hard state and applied state are synced through it)."),

		payIndexed:   d("validator_payments_indexed", "Payments in the payment index."),
		payMessages:  d("validator_payment_messages_total", "Payment messages read from the stream, retractions included."),
		payRetracted: d("validator_payments_retracted", "Proposal ids whose payment a retraction named."),
		debtsIndexed: d("validator_debt_payments_indexed", "Debt payments in the payment index."),
	}
}

// Describe sends nothing: the collector is unchecked, because the label
// values of some series (peers, rejection reasons) are known only at
// scrape time.
func (c *scrapeCollector) Describe(chan<- *prometheus.Desc) {}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	s := c.src
	gauge(c.buildInfo, 1, s.version, string(s.cfg.Mode), strconv.FormatUint(s.cfg.NodeID, 10))

	st := s.node.Status()
	gauge(c.term, float64(st.Term))
	gauge(c.leader, float64(st.Leader))
	gauge(c.isLeader, bit(st.Role == consensus.RoleLeader))
	gauge(c.commit, float64(st.CommitIndex))
	gauge(c.applied, float64(st.AppliedIndex))
	first, last, snap := s.node.LogBounds()
	gauge(c.logFirst, float64(first))
	gauge(c.logLast, float64(last))
	gauge(c.snapshot, float64(snap))
	_, changes := s.leadership.History()
	counter(c.leaderChanges, float64(changes))

	if counts, _ := s.machine.Counts(); counts != nil {
		counter(c.committed, float64(counts.GetCommitted()))
		counter(c.finalized, float64(counts.GetFinalized()))
		for reason, n := range counts.GetRejectedByReason() {
			counter(c.rejected, float64(n), reason)
		}
		gauge(c.orphaned, float64(counts.GetPaymentOrphaned()))
		counter(c.writes, float64(counts.GetWrites()))
		counter(c.deletes, float64(counts.GetDeletes()))
		gauge(c.lastCommit, float64(counts.GetLastCommitAtMs())/1000)
	}

	ps := s.pipe.Stats()
	gauge(c.pending, float64(ps.Pending))
	gauge(c.queued, float64(ps.Queued))
	gauge(c.inFlight, float64(ps.InFlight))
	gauge(c.backpressure, bit(ps.BackpressureActive))
	counter(c.backpressureEvents, float64(ps.BackpressureEvents))
	counter(c.accepted, float64(ps.Accepted))
	counter(c.verified, float64(ps.Verified))
	counter(c.pipeRejected, float64(ps.Rejected))
	counter(c.batches, float64(ps.Batches))
	counter(c.reproposed, float64(ps.Reproposed))

	for id, p := range s.peers.Stats() {
		peer := strconv.FormatUint(id, 10)
		gauge(c.peerConnected, bit(p.Connected), peer, "out")
		gauge(c.peerConnected, bit(p.InboundConnected), peer, "in")
		counter(c.peerSentMsgs, float64(p.MsgsSent), peer)
		counter(c.peerSentBytes, float64(p.BytesSent), peer)
		counter(c.peerRecvMsgs, float64(p.MsgsRecv), peer)
		counter(c.peerRecvBytes, float64(p.BytesRecv), peer)
		counter(c.peerDropped, float64(p.Dropped), peer)
		counter(c.peerReconnects, float64(p.Reconnects), peer)
		gauge(c.peerQueue, float64(p.QueueDepth), peer)
	}

	pm := s.db.Pebble().Metrics()
	gauge(c.diskUsage, float64(pm.DiskSpaceUsage()))
	gauge(c.readAmp, float64(pm.ReadAmp()))
	gauge(c.l0Files, float64(pm.Levels[0].TablesCount))
	counter(c.compactions, float64(pm.Compact.Count))
	gauge(c.compDebt, float64(pm.Compact.EstimatedDebt))
	counter(c.flushes, float64(pm.Flush.Count))
	counter(c.walWritten, float64(pm.WAL.BytesWritten))
	stalls := s.db.WriteStalls()
	counter(c.stalls, float64(stalls.Count))
	counter(c.stallSeconds, stalls.Total.Seconds())
	counter(c.cacheHits, float64(pm.BlockCache.Hits))
	counter(c.cacheMisses, float64(pm.BlockCache.Misses))
	if h := pm.LogWriter.FsyncLatency; h != nil {
		var out dto.Metric
		if h.Write(&out) == nil && out.GetHistogram() != nil {
			if m, ok := constHistogram(c.fsync, out.GetHistogram()); ok {
				ch <- m
			}
		}
	}

	if s.index != nil {
		is := s.index.Stats()
		gauge(c.payIndexed, float64(is.Indexed))
		counter(c.payMessages, float64(is.Observed))
		gauge(c.payRetracted, float64(is.Retracted))
		gauge(c.debtsIndexed, float64(is.Debts))
	}
}

// constHistogram re-labels a latency histogram Pebble keeps in
// nanoseconds (pebble.FsyncLatencyBuckets) under this registry's name, in
// seconds.
func constHistogram(d *prometheus.Desc, h *dto.Histogram) (prometheus.Metric, bool) {
	const perSecond = float64(time.Second)
	buckets := make(map[float64]uint64, len(h.GetBucket()))
	for _, b := range h.GetBucket() {
		buckets[b.GetUpperBound()/perSecond] = b.GetCumulativeCount()
	}
	m, err := prometheus.NewConstHistogram(d, h.GetSampleCount(), h.GetSampleSum()/perSecond, buckets)
	return m, err == nil
}
