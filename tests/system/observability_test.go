package system

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
)

// deepHealth asks a validator's /health/deep, whatever its status code.
func deepHealth(t *testing.T, n *node) (int, api.DeepHealth) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(n.url() + "/health/deep")
	if err != nil {
		t.Fatalf("validator %d: /health/deep: %v", n.id, err)
	}
	defer resp.Body.Close()
	var h api.DeepHealth
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("validator %d: /health/deep: %v", n.id, err)
	}
	return resp.StatusCode, h
}

// metricLines scrapes a validator's /metrics and returns its series lines
// (name{labels} value), comments left out.
func metricLines(t *testing.T, n *node) map[string]string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(n.url() + "/metrics")
	if err != nil {
		t.Fatalf("validator %d: /metrics: %v", n.id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("validator %d: /metrics: %s %v", n.id, resp.Status, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}
