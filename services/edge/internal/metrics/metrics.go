// Package metrics holds the edge's Prometheus metrics. They live in a
// registry owned by the edge (not the client library's global one), so
// that two edges in one process, as in the tests, count apart.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the edge's metrics. Its methods are the observers the
// routes (Request) and the upstream pool and cache (Call, Lookup) declare.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	upstream *prometheus.CounterVec
	// upstreamLatency is the time of the calls sent to validators.
	upstreamLatency *prometheus.HistogramVec
	cache           *prometheus.CounterVec
	views           *prometheus.CounterVec

	// byRoute holds each route's series (*routeSeries), found once:
	// WithLabelValues hashes and copies its labels on every call, and
	// nearly every request counts into the same few series.
	byRoute sync.Map
}

// routeSeries are one route's request series.
type routeSeries struct {
	latency prometheus.Observer
	mu      sync.Mutex
	status  map[int]prometheus.Counter
	views   map[string]prometheus.Counter
}

// New returns the metrics in a new registry, with the Go runtime's and
// the process's, and edge_build_info naming version (pkg/buildinfo).
func New(version string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_requests_total",
			Help: "Requests answered, by route (as /openapi.yaml writes it) and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edge_request_duration_seconds",
			Help: "Time to answer a request, by route.",
			// From a cached answer (well under a millisecond) to a
			// validator timing out (seconds).
			Buckets: []float64{.0005, .001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_upstream_requests_total",
			Help: "Calls to validators, by source route template and outcome (ok, unavailable, rejected, busy: no slot in time, not sent).",
		}, []string{"route", "outcome"}),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edge_upstream_request_duration_seconds",
			Help: "Time of a call sent to a validator, from the request to the end of its answer or its failure, by source route template.",
			// From a validator on the same host (well under a millisecond)
			// to UPSTREAM_TIMEOUT (2s by default) and beyond.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_cache_lookups_total",
			Help: "Reads of source routes, by source route template and result (hit: a kept answer; shared: joined a call in flight; miss: made the call).",
		}, []string{"route", "result"}),
		views: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_views_total",
			Help: "Ops views answered, by route and how (kept: the view composed earlier, every source answer it read still kept; composed: composed for this request).",
		}, []string{"route", "result"}),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "edge_build_info",
		Help:        "Always 1; the label names the software version.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo, m.requests, m.latency, m.upstream, m.upstreamLatency, m.cache, m.views,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Request counts one answered request.
func (m *Metrics) Request(route string, status int, took time.Duration) {
	rs := m.route(route)
	rs.latency.Observe(took.Seconds())
	rs.mu.Lock()
	c, ok := rs.status[status]
	if !ok {
		c = m.requests.WithLabelValues(route, strconv.Itoa(status))
		rs.status[status] = c
	}
	rs.mu.Unlock()
	c.Inc()
}

// route returns the series of route, made at its first request.
func (m *Metrics) route(route string) *routeSeries {
	if rs, ok := m.byRoute.Load(route); ok {
		return rs.(*routeSeries)
	}
	rs, _ := m.byRoute.LoadOrStore(route, &routeSeries{latency: m.latency.WithLabelValues(route),
		status: map[int]prometheus.Counter{}, views: map[string]prometheus.Counter{}})
	return rs.(*routeSeries)
}

// Call counts one call to a validator.
func (m *Metrics) Call(template, outcome string) {
	m.upstream.WithLabelValues(template, outcome).Inc()
}

// CallLatency times one call sent to a validator.
func (m *Metrics) CallLatency(template string, took time.Duration) {
	m.upstreamLatency.WithLabelValues(template).Observe(took.Seconds())
}

// Lookup counts one read through the cache.
func (m *Metrics) Lookup(template, result string) {
	m.cache.WithLabelValues(template, result).Inc()
}

// View counts one ops view answered, kept or composed.
func (m *Metrics) View(route, result string) {
	rs := m.route(route)
	rs.mu.Lock()
	c, ok := rs.views[result]
	if !ok {
		c = m.views.WithLabelValues(route, result)
		rs.views[result] = c
	}
	rs.mu.Unlock()
	c.Inc()
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
