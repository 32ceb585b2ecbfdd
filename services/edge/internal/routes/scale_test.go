package routes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/metrics"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// cachedEdge runs an edge as app.Run builds it: the pool behind the cache,
// the leader kept, its own metrics.
func cachedEdge(t *testing.T, ttl, leaderRefresh time.Duration, urls ...string) *httptest.Server {
	t.Helper()
	m := metrics.New("test")
	pool, err := upstream.NewPool(upstream.Config{URLs: urls, Timeout: time.Second, PerValidator: 4, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	cache := upstream.NewCache(pool, upstream.CacheConfig{TTL: ttl, Entries: 64, Shared: 5 * time.Second, Observer: m})
	docs, contract := documents(t)
	srv := httptest.NewServer(New(Config{ClusterID: "test", EdgeDocument: docs.EdgeYAML, SourceDocument: docs.SourceYAML,
		LeaderRefresh: leaderRefresh, Metrics: m}, cache, contract, zap.NewNop()))
	t.Cleanup(srv.Close)
	return srv
}

// normalise drops what differs between two answers to the same question
// by design: when the answer (or a validator's part of it) was made, how
// long its calls took or how old the kept ones were, and the order in
// which validators asked at once answered.
func normalise(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			switch k {
			case "generatedAt", "lastSeenAt", "latencyMs", "cacheAgeMs":
				continue
			}
			out[k] = normalise(x)
			if k == "sources" {
				slices.SortFunc(out[k].([]any), func(a, b any) int {
					return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
				})
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalise(x)
		}
		return out
	}
	return v
}

// TestReplicasAnswerAlike: two edges behind a round-robin proxy, in front
// of the same validators, give the same answers: every request of the
// sequence is asked twice in a row, once of each replica.
func TestReplicasAnswerAlike(t *testing.T) {
	fc := newCluster(t, 3)
	// The leader is looked up once per replica (its first request) and
	// kept for the whole test: a replica whose lookup expired between the
	// two requests of a pair would name that lookup among its sources, and
	// the other would not, on a slow machine.
	replicas := []*httptest.Server{
		cachedEdge(t, 200*time.Millisecond, time.Minute, fc.urls()...),
		cachedEdge(t, 200*time.Millisecond, time.Minute, fc.urls()...),
	}
	var next atomic.Int64
	served := make([]atomic.Int64, len(replicas))
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		i := int(next.Add(1)-1) % len(replicas)
		served[i].Add(1)
		u, _ := url.Parse(replicas[i].URL)
		r.SetURL(u)
	}})
	t.Cleanup(proxy.Close)

	var paths []string
	for _, r := range table(t) {
		if strings.HasPrefix(r.path, opsPrefix) {
			paths = append(paths, example(r.path))
		}
	}
	paths = append(paths, "/ops/v1/explorer/proposal/"+unknownID, "/ops/v1/events/recent?limit=51", "/ops/v1/nothing")
	for range 2 { // the second round meets answers the replicas keep
		for _, p := range paths {
			var got [2]any
			var status [2]int
			for i := range got {
				var raw []byte
				status[i], _, raw = fetch(t, http.MethodGet, proxy.URL+p, "")
				if err := json.Unmarshal(raw, &got[i]); err != nil {
					t.Fatalf("%s: %v", p, err)
				}
			}
			if status[0] != status[1] || !reflect.DeepEqual(normalise(got[0]), normalise(got[1])) {
				t.Errorf("%s: the replicas differ:\n%d %v\n%d %v", p, status[0], got[0], status[1], got[1])
			}
		}
	}
	if served[0].Load() == 0 || served[0].Load() != served[1].Load() {
		t.Errorf("the proxy sent %d and %d requests", served[0].Load(), served[1].Load())
	}
}

// TestCacheAgeIsShown: a second read within the TTL is answered from the
// kept answers, without a call, and says how old they are.
func TestCacheAgeIsShown(t *testing.T) {
	fc := newCluster(t, 3)
	srv := cachedEdge(t, time.Minute, time.Minute, fc.urls()...)
	first := getData(t, srv.URL+"/ops/v1/queue")
	hits := fc.hits()
	time.Sleep(20 * time.Millisecond)
	second := getData(t, srv.URL+"/ops/v1/queue")
	if fc.hits() != hits {
		t.Errorf("%d validator calls for a kept answer", fc.hits()-hits)
	}
	for _, s := range first["sources"].([]any) {
		if s.(map[string]any)["cacheAgeMs"] != float64(0) {
			t.Errorf("first read: %v", s)
		}
	}
	for _, s := range second["sources"].([]any) {
		if age := s.(map[string]any)["cacheAgeMs"].(float64); age < 20 {
			t.Errorf("second read: %v", s)
		}
	}
}

// TestLeaderIsKept: the leader is asked once per LeaderRefresh, not per
// request; a failed read from it, or the end of the interval, asks again.
func TestLeaderIsKept(t *testing.T) {
	fc := newCluster(t, 3)
	var leader atomic.Int64 // index into fc.nodes
	var asked atomic.Int64
	for _, f := range fc.nodes {
		f.answer(srcLeader, func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			l := fc.nodes[leader.Load()]
			raw, _ := json.Marshal(api.LeaderInfo{ContractVersion: api.ConsensusLeaderVersion, Known: true, LeaderID: l.id,
				LeaderName: l.name(), LeaderURL: l.srv.URL, Term: 3})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(raw)
		})
	}
	leader.Store(1)
	srv := cachedEdge(t, 0, 300*time.Millisecond, fc.urls()...)
	answeredBy := func() string {
		t.Helper()
		for _, s := range getData(t, srv.URL+"/ops/v1/queue")["sources"].([]any) {
			if s := s.(map[string]any); s["ok"] == true && s["route"] == srcQueueStats {
				return s["nodeId"].(string)
			}
		}
		t.Fatal("no source answered the queue")
		return ""
	}
	for range 5 {
		if got := answeredBy(); got != fc.nodes[1].srv.URL {
			t.Fatalf("queue read from %s, want the leader %s", got, fc.nodes[1].srv.URL)
		}
	}
	if asked.Load() != 1 {
		t.Errorf("the leader was asked %d times for 5 requests", asked.Load())
	}

	// The leader fails: that request is answered by another validator,
	// and the next one asks who leads.
	leader.Store(2)
	fc.nodes[1].set(failing)
	if got := answeredBy(); got == fc.nodes[1].srv.URL {
		t.Fatalf("read from the failing validator")
	}
	if got := answeredBy(); got != fc.nodes[2].srv.URL || asked.Load() != 2 {
		t.Fatalf("after a failed read: from %s, leader asked %d times", got, asked.Load())
	}

	// A leader change without a failure is seen after LeaderRefresh.
	fc.nodes[1].set(healthy)
	leader.Store(0)
	if got := answeredBy(); got != fc.nodes[2].srv.URL {
		t.Fatalf("leader changed before the refresh: %s", got)
	}
	time.Sleep(350 * time.Millisecond)
	if got := answeredBy(); got != fc.nodes[0].srv.URL || asked.Load() != 3 {
		t.Fatalf("after the refresh: from %s, leader asked %d times", got, asked.Load())
	}
}

// TestMetrics: /metrics counts requests by route and status, calls to
// validators by source route and outcome, and cache lookups (the signals
// read the overview's sources again; a view answered from its kept
// composition looks nothing up).
func TestMetrics(t *testing.T) {
	fc := newCluster(t, 3)
	srv := cachedEdge(t, time.Minute, time.Minute, fc.urls()...)
	getData(t, srv.URL+"/ops/v1/overview")
	getData(t, srv.URL+"/ops/v1/overview")
	getData(t, srv.URL+"/ops/v1/signals")
	fetch(t, http.MethodGet, srv.URL+"/ops/v1/explorer/wallets/0x12", "")
	fetch(t, http.MethodGet, srv.URL+"/nowhere", "")
	status, header, raw := fetch(t, http.MethodGet, srv.URL+"/metrics", "")
	if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %s", status, header.Get("Content-Type"))
	}
	for _, want := range []string{
		`edge_requests_total{route="/ops/v1/overview",status="200"} 2`,
		`edge_requests_total{route="/ops/v1/explorer/wallets/{walletAddress}",status="404"} 1`,
		`edge_requests_total{route="unmatched",status="404"} 1`,
		`edge_request_duration_seconds_count{route="/ops/v1/overview"} 2`,
		`edge_upstream_requests_total{outcome="ok",route="/v1/proposals/queue/stats"} 1`,
		`edge_upstream_requests_total{outcome="ok",route="/v1/consensus/leader"} 1`,
		`edge_upstream_request_duration_seconds_count{route="/v1/proposals/queue/stats"} 1`,
		`edge_upstream_request_duration_seconds_count{route="/v1/consensus/leader"} 1`,
		`edge_upstream_request_duration_seconds_bucket{route="/v1/consensus/leader",le="+Inf"} 1`,
		`edge_build_info{version="test"} 1`,
		`edge_cache_lookups_total{result="hit",route="/health/cluster"} 1`,
		`edge_cache_lookups_total{result="miss",route="/health/cluster"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(string(raw), want+"\n") && !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
