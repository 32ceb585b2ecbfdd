package app

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/relay"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// metrics are the watcher's Prometheus series, in a registry of its own
// (one per Run: several watchers can live in one test process).
type metrics struct {
	reg         *prometheus.Registry
	blocksRead  prometheus.Counter
	published   *prometheus.CounterVec
	retractions *prometheus.CounterVec
	// delay is block time to the stream's acknowledgement of a log it
	// stored: the confirmations waited for, plus the watcher's own lag.
	delay     *prometheus.HistogramVec
	rangeSize prometheus.Gauge
	head      prometheus.Gauge
	cursor    prometheus.Gauge
	lag       prometheus.Gauge
	heads     prometheus.Counter
	// Epochs: the figures of the last update the stream acknowledged.
	epochCurrent, epochFinalized prometheus.Gauge
	epochUpdates                 *prometheus.CounterVec
	epochErrors, epochBehind     prometheus.Counter
	// Chain status (internal/chainstatus): the figures last read.
	safe, finalized, pending prometheus.Gauge
	statusWrites             prometheus.Counter
	statusErrors             prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		blocksRead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chainwatcher_blocks_read_total",
			Help: "Blocks covered by the eth_getLogs ranges handed to the relay (a range read again after a failure counts again).",
		}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainwatcher_logs_published_total",
			Help: "Payment contract logs acknowledged by the stream, by event and by whether the stream stored them or already held their message id.",
		}, []string{"event", "result"}),
		heads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chainwatcher_new_heads_total",
			Help: "New heads announced by WebSocket subscriptions; each wakes the relay before its next poll.",
		}),
		retractions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainwatcher_retractions_published_total",
			Help: "Retractions (removed = true) of logs a reorg dropped, acknowledged by the stream, by event and result.",
		}, []string{"event", "result"}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chainwatcher_publish_delay_seconds",
			Help: "From the timestamp of a log's block to the stream's acknowledgement of it (stored, not a duplicate or a retraction), by event: the confirmations waited for plus the watcher's lag. Whole seconds of block time.",
			// From a dev chain's immediate blocks to hours behind.
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 180, 300, 600, 1800, 3600},
		}, []string{"event"}),
		rangeSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_block_range_size",
			Help: "Blocks the next eth_getLogs range asks for at most (shrinks on the provider's range errors).",
		}),
		head: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_head_block",
			Help: "Chain head block number last seen.",
		}),
		cursor: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_cursor_block",
			Help: "Last block whose logs are all in the stream (the checkpoint).",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_lag_blocks",
			Help: "Head minus cursor, in blocks; at least the confirmations when caught up.",
		}),
		epochCurrent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_epoch_current",
			Help: "Current epoch of the last update published on chain.<chainId>.epochs.",
		}),
		epochFinalized: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_epoch_finalized",
			Help: "Finalized epoch of the last update published on chain.<chainId>.epochs.",
		}),
		epochUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainwatcher_epoch_updates_published_total",
			Help: "Epoch updates acknowledged by the stream, by whether it stored them or already held their message id.",
		}, []string{"result"}),
		epochErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chainwatcher_epoch_errors_total",
			Help: "Epoch source reads or epoch publications that failed (retried after a backoff).",
		}),
		epochBehind: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chainwatcher_epoch_readings_behind_total",
			Help: "Epoch readings with a figure below the published one (a lagging endpoint); that figure is not published.",
		}),
		safe: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_safe_block",
			Help: "Newest block the watcher may read (head minus confirmations, or the finalized block), as the chain status last read it.",
		}),
		finalized: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_finalized_block",
			Help: "The chain's finalized block as the chain status last read it; 0 when the endpoint does not answer the tag.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chainwatcher_pending_payments",
			Help: "ProposalPaid logs seen on chain above the cursor (or the safe block), not published yet.",
		}),
		statusWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chainwatcher_status_writes_total",
			Help: "Chain statuses written to the key-value bucket (status-<chainId>): on change, or when unchanged for 30 s.",
		}),
		statusErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chainwatcher_status_errors_total",
			Help: "Chain status steps that failed to read the chain or write the status (retried every poll interval).",
		}),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "chainwatcher_build_info",
		Help:        "Always 1; the label names the software version.",
		ConstLabels: prometheus.Labels{"version": buildinfo.Version()},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo, m.blocksRead, m.heads, m.published, m.retractions, m.delay, m.rangeSize, m.head, m.cursor, m.lag,
		m.epochCurrent, m.epochFinalized, m.epochUpdates, m.epochErrors, m.epochBehind,
		m.safe, m.finalized, m.pending, m.statusWrites, m.statusErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// progress records the cursor and, when known (non-zero), the head.
func (m *metrics) progress(c watch.Cursor, head uint64) {
	m.cursor.Set(float64(c.Block))
	if head > 0 {
		m.head.Set(float64(head))
		m.lag.Set(float64(head - min(head, c.Block)))
	}
}

// chainStatus records a step of the chain status loop.
func (m *metrics) chainStatus(s payment.WatcherStatus, written bool, err error) {
	if err != nil {
		m.statusErrors.Inc()
		return
	}
	m.safe.Set(float64(s.Safe))
	m.finalized.Set(0)
	if s.Finalized != nil {
		m.finalized.Set(float64(*s.Finalized))
	}
	m.pending.Set(float64(len(s.Pending)))
	if written {
		m.statusWrites.Inc()
	}
}

func (m *metrics) acked(event string, removed bool, blockTime uint64, res publish.Result) {
	result := "stored"
	if res.Duplicate {
		result = "duplicate"
	}
	if removed {
		m.retractions.WithLabelValues(event, result).Inc()
		return
	}
	m.published.WithLabelValues(event, result).Inc()
	if !res.Duplicate {
		// A block stamped ahead of this clock (dev chains do) counts as 0.
		delay := time.Since(time.Unix(int64(min(blockTime, math.MaxInt64)), 0))
		m.delay.WithLabelValues(event).Observe(max(0, delay.Seconds()))
	}
}

// epochPublished records an acknowledged epoch update.
func (m *metrics) epochPublished(u payment.EpochUpdate, res publish.Result) {
	m.epochCurrent.Set(float64(u.Current))
	m.epochFinalized.Set(float64(u.Finalized))
	result := "stored"
	if res.Duplicate {
		result = "duplicate"
	}
	m.epochUpdates.WithLabelValues(result).Inc()
}

// countingPublisher counts what the stream acknowledged.
type countingPublisher struct {
	next relay.BatchPublisher
	m    *metrics
}

func (p countingPublisher) Publish(ctx context.Context, pay payment.ProposalPaid) (publish.Result, error) {
	res, err := p.next.Publish(ctx, pay)
	if err == nil {
		p.m.acked("proposal_paid", pay.Removed, pay.Timestamp, res)
	}
	return res, err
}

func (p countingPublisher) PublishDebt(ctx context.Context, d payment.DebtPaid) (publish.Result, error) {
	res, err := p.next.PublishDebt(ctx, d)
	if err == nil {
		p.m.acked("debt_paid", d.Removed, d.Timestamp, res)
	}
	return res, err
}

// PublishLogs keeps the relay's batches (relay.BatchPublisher) and counts
// each log acknowledged.
func (p countingPublisher) PublishLogs(ctx context.Context, logs []publish.Log) ([]publish.Result, error) {
	res, err := p.next.PublishLogs(ctx, logs)
	for i, r := range res {
		if d := logs[i].Debt; d != nil {
			p.m.acked("debt_paid", d.Removed, d.Timestamp, r)
		} else {
			p.m.acked("proposal_paid", logs[i].Payment.Removed, logs[i].Payment.Timestamp, r)
		}
	}
	return res, err
}

// countingReader counts the blocks of the ranges read.
type countingReader struct {
	relay.Reader
	m *metrics
}

func (r countingReader) Next(ctx context.Context, next uint64, parent common.Hash) (watch.Batch, bool, error) {
	b, ok, err := r.Reader.Next(ctx, next, parent)
	if err == nil && ok {
		r.m.blocksRead.Add(float64(b.To - b.From + 1))
		r.m.head.Set(float64(b.Head))
	}
	return b, ok, err
}

// endpointCollector reports the RPC endpoints' records at every scrape.
type endpointCollector struct {
	health                                  func() []rpcpool.EndpointHealth
	calls, errors, up, score, currentlyUsed *prometheus.Desc
}

func newEndpointCollector(health func() []rpcpool.EndpointHealth) *endpointCollector {
	label := []string{"endpoint"}
	return &endpointCollector{
		health: health,
		calls: prometheus.NewDesc("chainwatcher_rpc_endpoint_calls_total",
			"JSON-RPC calls made to the endpoint.", label, nil),
		errors: prometheus.NewDesc("chainwatcher_rpc_endpoint_errors_total",
			"JSON-RPC calls to the endpoint that failed through its fault (transport, HTTP, timeout, server errors).", label, nil),
		up: prometheus.NewDesc("chainwatcher_rpc_endpoint_up",
			"1 when the endpoint is not passed over after failures and serves the watcher's chain.", label, nil),
		score: prometheus.NewDesc("chainwatcher_rpc_endpoint_score",
			"Health score from 0 to 1 that orders the endpoints (recent errors and latency).", label, nil),
		currentlyUsed: prometheus.NewDesc("chainwatcher_rpc_endpoint_current",
			"1 for the endpoint calls go to first.", label, nil),
	}
}

func (c *endpointCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.calls, c.errors, c.up, c.score, c.currentlyUsed} {
		ch <- d
	}
}

func (c *endpointCollector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range c.health() {
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(h.Calls), h.Name)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(h.Errors), h.Name)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, boolValue(h.Up), h.Name)
		ch <- prometheus.MustNewConstMetric(c.score, prometheus.GaugeValue, h.Score, h.Name)
		ch <- prometheus.MustNewConstMetric(c.currentlyUsed, prometheus.GaugeValue, boolValue(h.Current), h.Name)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
