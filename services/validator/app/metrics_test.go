package app

import (
	"context"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/contentledger/contentledger/pkg/api"
)

// scrape reads /metrics with token (none when empty).
func scrape(t *testing.T, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// value is the value of the series of family with every label of want.
func value(t *testing.T, families map[string]*dto.MetricFamily, family string, want map[string]string) (float64, bool) {
	t.Helper()
	f, ok := families[family]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	const token = "s3cret"
	base := startMockWith(t, func(c *Config) { c.AuthToken = token })
	a := newAuthor(t)
	form := a.form(t, pageID(0xe1), `{"title":"counted"}`, a.key)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/propose-write", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, path := range []string{"/metrics", "/no/such/route/0x1234"} {
		if r, err := http.Get(base + path); err != nil || r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s without the token: %v %v", path, r, err)
		} else {
			r.Body.Close()
		}
	}

	var families map[string]*dto.MetricFamily
	waitFor(t, func() bool {
		families = scrape(t, base, token)
		n, _ := value(t, families, "validator_proposals_committed_total", nil)
		return n >= 1
	})
	expect := []struct {
		family string
		labels map[string]string
		least  float64
	}{
		{"validator_build_info", map[string]string{"mode": "MOCK", "node": "1"}, 1},
		{"validator_raft_is_leader", nil, 1},
		{"validator_raft_leader", nil, 1},
		{"validator_raft_applied_index", nil, 2},
		{"validator_raft_leadership_changes_total", nil, 1},
		{"validator_content_writes_total", nil, 1},
		{"validator_pipeline_accepted_total", nil, 1},
		{"validator_pipeline_batches_total", nil, 1},
		// The leader's announcement of its term is a change.
		{"validator_pipeline_changes_total", nil, 1},
		// The submission's 202 came once its commit was applied.
		{"validator_proposal_commit_latency_seconds", nil, 1},
		{"validator_pebble_wal_bytes_written_total", nil, 1},
		{"validator_pebble_disk_usage_bytes", nil, 1},
		{"validator_wal_fsync_duration_seconds", nil, 1},
		{"validator_http_requests_total", map[string]string{"route": "/v1/propose-write", "method": "POST", "code": "202"}, 1},
		// Rejected by the token before any handler: still counted, under
		// the route's template or "unmatched", never the raw path.
		{"validator_http_requests_total", map[string]string{"route": "/metrics", "code": "401"}, 1},
		{"validator_http_requests_total", map[string]string{"route": "unmatched", "code": "401"}, 1},
		{"validator_http_request_duration_seconds", map[string]string{"route": "/v1/propose-write"}, 1},
		{"go_goroutines", nil, 1},
	}
	for _, e := range expect {
		v, ok := value(t, families, e.family, e.labels)
		if !ok || v < e.least {
			t.Errorf("%s%v = %v (present %v), want at least %v", e.family, e.labels, v, ok, e.least)
		}
	}
	for _, m := range families["validator_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && strings.Contains(l.GetValue(), "0x1234") {
				t.Fatalf("a raw path as a route label: %v", m)
			}
		}
	}
	lat := families["validator_proposal_commit_latency_seconds"].GetMetric()[0].GetHistogram()
	if lat.GetSampleCount() != 1 || lat.GetSampleSum() <= 0 || lat.GetSampleSum() > 10 || len(lat.GetBucket()) == 0 {
		t.Fatalf("commit latency histogram %v", lat)
	}
	if _, ok := families["validator_event_publisher_lag_events"]; ok {
		t.Fatal("event publisher series on a validator that does not publish")
	}
	// Pebble keeps fsync latencies in nanoseconds; the series is in seconds.
	h := families["validator_wal_fsync_duration_seconds"].GetMetric()[0].GetHistogram()
	if mean := h.GetSampleSum() / float64(h.GetSampleCount()); mean <= 0 || mean > 1 {
		t.Fatalf("mean WAL fsync of %v s", mean)
	}
	if _, ok := families["validator_peer_connected"]; ok {
		t.Fatal("peer series on a single validator")
	}
	if _, ok := families["validator_payments_indexed"]; ok {
		t.Fatal("payment index series in MOCK mode")
	}
	if _, ok := families["validator_payment_hold_waiting"]; ok {
		t.Fatal("payment hold series in MOCK mode, where nothing is held")
	}

	// /api/metrics: the same gathering, as JSON.
	var j api.MetricsJSON
	if code := getJSONWith(t, base+"/api/metrics", token, &j); code != http.StatusOK || j.NodeID != 1 {
		t.Fatalf("/api/metrics: %d, node %d", code, j.NodeID)
	}
	byName := map[string]api.MetricFamily{}
	for _, f := range j.Families {
		byName[f.Name] = f
	}
	if f := byName["validator_raft_is_leader"]; f.Type != "gauge" || len(f.Series) != 1 || f.Series[0].Value == nil || *f.Series[0].Value != 1 {
		t.Fatalf("validator_raft_is_leader as JSON: %+v", f)
	}
	if f := byName["validator_proposals_committed_total"]; f.Type != "counter" || f.Series[0].Value == nil || *f.Series[0].Value < 1 {
		t.Fatalf("validator_proposals_committed_total as JSON: %+v", f)
	}
	f := byName["validator_wal_fsync_duration_seconds"]
	if f.Type != "histogram" || len(f.Series) != 1 || f.Series[0].Count == nil || *f.Series[0].Count == 0 || len(f.Series[0].Buckets) == 0 {
		t.Fatalf("validator_wal_fsync_duration_seconds as JSON: %+v", f)
	}
	if b := f.Series[0].Buckets; b[len(b)-1].Count > *f.Series[0].Count {
		t.Fatalf("a bucket holds more than the count: %+v", f.Series[0])
	}
}

// TestEventStreamSubscribersMetric: the SSE subscriber gauge of a stream
// route rises while a stream is open on it, only on that route, and falls
// when the client leaves.
func TestEventStreamSubscribersMetric(t *testing.T) {
	const token = "s3cret"
	base := startMockWith(t, func(c *Config) { c.AuthToken = token })
	open := func(families map[string]*dto.MetricFamily, route string) float64 {
		t.Helper()
		v, ok := value(t, families, "validator_event_stream_subscribers", map[string]string{"route": route})
		if !ok {
			t.Fatalf("no validator_event_stream_subscribers{route=%q}", route)
		}
		return v
	}
	families := scrape(t, base, token)
	if open(families, "/v1/events/stream") != 0 || open(families, "/v1/ops/events/stream") != 0 {
		t.Fatal("streams counted before any opened")
	}
	if _, ok := value(t, families, "validator_event_stream_dropped_events_total", map[string]string{"route": "/v1/events/stream"}); !ok {
		t.Fatal("no validator_event_stream_dropped_events_total")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", resp, err)
	}
	waitFor(t, func() bool {
		families = scrape(t, base, token)
		return open(families, "/v1/events/stream") == 1
	})
	if n := open(families, "/v1/ops/events/stream"); n != 0 {
		t.Fatalf("%v streams counted on the operational route", n)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { return open(scrape(t, base, token), "/v1/events/stream") == 0 })
}
