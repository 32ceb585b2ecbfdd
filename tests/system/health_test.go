package system

import (
	"encoding/json"
	"net/http"
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
