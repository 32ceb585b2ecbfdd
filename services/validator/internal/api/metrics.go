package api

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

	"github.com/contentledger/contentledger/pkg/api"
)

// The validator's Prometheus metrics (/metrics, and /api/metrics in JSON),
// in a registry of their own per Server, so that several validators in one
// process count apart. This file counts the HTTP requests as they are
// answered, labelled by the route table's paths; every other series comes
// from the collectors the validator gives (internal/metrics), read at
// scrape time.

// httpMetrics counts the requests answered.
type httpMetrics struct {
	reg      *prometheus.Registry
	handler  http.Handler // the text format
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics(extra []prometheus.Collector) *httpMetrics {
	m := &httpMetrics{
		reg: prometheus.NewRegistry(),
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
	m.reg.MustRegister(append([]prometheus.Collector{m.requests, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, extra...)...)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// count counts every request, rejections by the authentication and rate
// limits included: it runs before routing and writes errors itself, so that
// it sees the status sent. The route label is the route table's path of
// the route that answered, "unmatched" when none did.
func (m *httpMetrics) count(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		// Deferred: an answer cut short ends the handler with a panic
		// (handleError), and it is counted too.
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
}

// prometheusMetrics serves GET /metrics in Prometheus's text format.
func (s *Server) prometheusMetrics(c echo.Context) error {
	s.metrics.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// jsonMetrics serves GET /api/metrics: the same gathering as /metrics, as
// JSON.
func (s *Server) jsonMetrics(c echo.Context) error {
	families, err := s.metrics.reg.Gather()
	if err != nil {
		return err
	}
	out := api.MetricsJSON{NodeID: s.cfg.NodeID, At: time.Now().UTC(), Families: make([]api.MetricFamily, 0, len(families))}
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
