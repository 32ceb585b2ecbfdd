package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestDeepHealth: /health/deep asks every part now, takes no token, and
// turns 503 naming the part that fails; a single validator is its own
// quorum.
func TestDeepHealth(t *testing.T) {
	var failing atomic.Bool
	var asked atomic.Int64
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if failing.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		_, _ = w.Write([]byte{0x0a, 0x02, 0x08, 0x01})
	}))
	t.Cleanup(gw.Close)
	base := startMockWith(t, func(c *Config) {
		c.IPFSGateway = gw.URL + "/"
		c.AuthToken = "s3cret"
	})

	// Without a token: statuses only; with the ops-read lane's: the details.
	var h api.DeepHealth
	if code := getJSON(t, base+"/health/deep", &h); code != http.StatusOK || h.Status != "ok" || h.NodeID != 0 || h.Checks["wal"].Status != "ok" ||
		h.Checks["wal"].Detail != "" {
		t.Fatalf("deep health without a token: %d %+v", code, h)
	}
	if code := getJSONWith(t, base+"/health/deep", "s3cret", &h); code != http.StatusOK || h.Status != "ok" || h.NodeID != 1 || h.CheckedAt.IsZero() {
		t.Fatalf("deep health: %d %+v", code, h)
	}
	for _, name := range []string{"wal", "state", "raft", "peers", "gateway"} {
		c, ok := h.Checks[name]
		if !ok || c.Status != "ok" || c.Detail == "" || c.LatencyMs < 0 {
			t.Fatalf("check %s: %+v (all: %+v)", name, c, h.Checks)
		}
	}
	if _, ok := h.Checks["nats"]; ok {
		t.Fatalf("a NATS check in MOCK mode: %+v", h.Checks)
	}
	if _, ok := h.Checks["chain"]; ok {
		t.Fatalf("a chain check in MOCK mode: %+v", h.Checks)
	}
	if !strings.Contains(h.Checks["peers"].Detail, "1 of 1") {
		t.Fatalf("peers: %+v", h.Checks["peers"])
	}

	// The gateway fails: the next fresh answer is 503 and says which part.
	failing.Store(true)
	before := asked.Load()
	var code int
	waitFor(t, func() bool {
		code = getJSONWith(t, base+"/health/deep", "s3cret", &h)
		return h.Checks["gateway"].Status == "failing"
	})
	if code != http.StatusServiceUnavailable || h.Status != "unavailable" || !strings.Contains(h.Checks["gateway"].Detail, "502") ||
		h.Checks["wal"].Status != "ok" || asked.Load() == before {
		t.Fatalf("deep health with the gateway down: %d %+v", code, h)
	}
	// /health stays as it was: it does not ask the gateway.
	var shallow map[string]any
	if code := getJSON(t, base+"/health", &shallow); code != http.StatusOK {
		t.Fatalf("health with the gateway down: %d %v", code, shallow)
	}
}
