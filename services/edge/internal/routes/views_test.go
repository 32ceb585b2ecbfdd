package routes

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/metrics"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// clock is a settable time for the cache, safe across the edge's handlers.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *clock) String() string          { return c.now().String() }

func sourcesOf(data map[string]any) []any {
	s, _ := data["sources"].([]any)
	return s
}

// asked reports whether data.sources[] has an attempt at route.
func asked(data map[string]any, route string) bool {
	for _, s := range sourcesOf(data) {
		if s.(map[string]any)["route"] == route {
			return true
		}
	}
	return false
}

func numberAt(data map[string]any, k string) float64 {
	f, _ := data[k].(float64)
	return f
}

// keptEdge is cachedEdge with the cache's clock given and the leader kept
// for the test's length.
func keptEdge(t testing.TB, ttl time.Duration, clk *clock, urls ...string) *httptest.Server {
	t.Helper()
	m := metrics.New("test")
	pool, err := upstream.NewPool(upstream.Config{URLs: urls, Timeout: time.Second, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	cache := upstream.NewCache(pool, upstream.CacheConfig{TTL: ttl, Entries: 256, Shared: 5 * time.Second, Observer: m, Now: clk.now})
	docs, contract := documents(t)
	srv := httptest.NewServer(New(Config{ClusterID: "test", EdgeDocument: docs.EdgeYAML, SourceDocument: docs.SourceYAML,
		LeaderRefresh: time.Hour, Metrics: m}, cache, contract, zap.NewNop()))
	t.Cleanup(srv.Close)
	return srv
}

// TestKeptViewFollowsItsSources: a kept view is answered with the present
// age of every answer it was composed of, and a source that changes is seen
// once its answer's TTL has passed.
func TestKeptViewFollowsItsSources(t *testing.T) {
	fc := newCluster(t, 3)
	var queued atomic.Int64
	queued.Store(3)
	leader := fc.nodes[0]
	leader.answer(srcQueueStats, func(w http.ResponseWriter, r *http.Request) {
		_, body := leader.body(r)
		q := body.(api.QueueStats)
		q.QueuedProposals = int(queued.Load())
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(q)
	})
	clk := newClock()
	srv := keptEdge(t, time.Second, clk, fc.urls()...)
	docs, _ := documents(t)

	ask := func(wantQueued float64, wantAge int64) map[string]any {
		t.Helper()
		status, header, raw := fetch(t, http.MethodGet, srv.URL+"/ops/v1/queue", "")
		validate(t, docs.Edge, "/ops/v1/queue", status, header, raw, nil)
		if got := header.Get("Content-Length"); got != strconv.Itoa(len(raw)) {
			t.Errorf("Content-Length %q, body of %d bytes", got, len(raw))
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		data := assertEnvelope(t, status, body)
		if got := numberAt(data, "queuedProposals"); got != wantQueued {
			t.Errorf("at %v: queuedProposals %v, want %v", clk, got, wantQueued)
		}
		srcs := sourcesOf(data)
		if len(srcs) == 0 {
			t.Fatalf("no sources: %v", data)
		}
		for _, s := range srcs {
			s := s.(map[string]any)
			if s["route"] == srcLeader {
				continue // asked for this request alone
			}
			if s["cacheAgeMs"] != float64(wantAge) || s["ok"] != true {
				t.Errorf("at %v: source %v, want cacheAgeMs %d", clk, s, wantAge)
			}
		}
		return data
	}

	first := ask(3, 0) // composed, the leader asked for it, and kept
	if !asked(first, srcLeader) {
		t.Errorf("the first answer does not show the leader being asked: %v", first["sources"])
	}
	if again := ask(3, 0); asked(again, srcLeader) {
		t.Errorf("an answer from the kept view shows the leader asked: %v", again["sources"])
	}
	queued.Store(7)
	clk.advance(400 * time.Millisecond)
	kept := ask(3, 400) // the kept view, its answers 400 ms old
	clk.advance(599 * time.Millisecond)
	ask(3, 999)
	clk.advance(time.Millisecond) // the TTL has passed: the change is seen
	changed := ask(7, 0)
	ask(7, 0)
	if asked(changed, srcLeader) {
		t.Errorf("the leader was asked again within %s: %v", time.Hour, changed["sources"])
	}
	delete(first, "sources")
	delete(kept, "sources")
	if !reflect.DeepEqual(first, kept) {
		t.Errorf("the kept view differs from the composed one:\n%v\n%v", first, kept)
	}
	if numberAt(changed, "pending") != numberAt(kept, "pending") {
		t.Errorf("pending %v, want %v", changed["pending"], kept["pending"])
	}
	// Composed twice (the first answer, and once the TTL had passed),
	// answered from the kept view four times.
	_, _, raw := fetch(t, http.MethodGet, srv.URL+"/metrics", "")
	for result, want := range map[string]string{"composed": "2", "kept": "4"} {
		series := `edge_views_total{result="` + result + `",route="/ops/v1/queue"} `
		at := strings.Index(string(raw), series)
		if at < 0 {
			t.Errorf("/metrics has no %s", series)
			continue
		}
		got, _, _ := strings.Cut(string(raw[at+len(series):]), "\n")
		if got != want {
			t.Errorf("%s%s, want %s", series, got, want)
		}
	}
}

// TestKeptViewsMatchTheDocument: every route answered from kept answers, and
// again from its kept view, is within the document and says the same.
func TestKeptViewsMatchTheDocument(t *testing.T) {
	docs, _ := documents(t)
	fc := newCluster(t, 3)
	clk := newClock()
	srv := keptEdge(t, time.Minute, clk, fc.urls()...)
	for _, r := range table(t) {
		if !strings.HasPrefix(r.path, opsPrefix) {
			continue
		}
		var answers []any
		for i := range 3 { // the leader asked; composed and kept; the kept view
			status, header, raw := fetch(t, http.MethodGet, srv.URL+example(r.path), "")
			validate(t, docs.Edge, r.path, status, header, raw, nil)
			var body map[string]any
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			if i > 0 {
				answers = append(answers, normalise(body))
			}
			clk.advance(time.Millisecond)
		}
		if !reflect.DeepEqual(answers[0], answers[1]) {
			t.Errorf("%s: the kept view differs:\n%v\n%v", r.path, answers[0], answers[1])
		}
	}
}
