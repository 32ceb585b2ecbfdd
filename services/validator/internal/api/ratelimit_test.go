package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
)

// allowN admits the first n requests of each identifier.
type allowN struct {
	mu   sync.Mutex
	n    int
	seen map[string]int
}

func (a *allowN) Allow(id string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = map[string]int{}
	}
	a.seen[id]++
	return a.seen[id] <= a.n, nil
}

// leaderCluster is a cluster whose node 1 leads and node 2 is a member at
// 10.0.0.2; only Status and Members are called here.
type leaderCluster struct{ Cluster }

func (leaderCluster) Status() api.ConsensusStatus {
	return api.ConsensusStatus{NodeID: 1, Leader: 1, Role: api.RoleLeader}
}

func (leaderCluster) Members() []api.Member {
	return []api.Member{{ID: 1, APIURL: "http://10.0.0.1:8090"}, {ID: 2, APIURL: "http://10.0.0.2:8090"}}
}

func TestIPLimit(t *testing.T) {
	limiter := &allowN{n: 1}
	e := New(Config{IPLimiter: limiter}, Deps{Proposals: instantProposals{}, Cluster: leaderCluster{}}, zap.NewNop())
	send := func(remote, forwardedBy string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/propose-write", strings.NewReader("proposalId=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", "203.0.113.9") // never trusted
		req.RemoteAddr = remote
		if forwardedBy != "" {
			req.Header.Set(forwardedHeader, forwardedBy)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	// The bad form fails after the limit: 400 means admitted.
	if rec := send("192.0.2.1:1000", ""); rec.Code != http.StatusBadRequest {
		t.Fatalf("first from 192.0.2.1: %d %s", rec.Code, rec.Body)
	}
	rec := send("192.0.2.1:1001", "")
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"rate_limited"`) || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("second from 192.0.2.1: %d %s", rec.Code, rec.Body)
	}
	if rec := send("192.0.2.2:1000", ""); rec.Code != http.StatusBadRequest {
		t.Fatalf("another address: %d", rec.Code)
	}
	// Forwarded by member 2 from its own address: counted there, not here.
	for range 3 {
		if rec := send("10.0.0.2:5000", "2"); rec.Code != http.StatusBadRequest {
			t.Fatalf("forwarded by a member: %d %s", rec.Code, rec.Body)
		}
	}
	// The header from anywhere else counts like any request.
	if rec := send("192.0.2.1:1002", "2"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a client claiming to be member 2: %d", rec.Code)
	}
	if rec := send("10.0.0.2:5001", "1"); rec.Code != http.StatusBadRequest {
		t.Fatalf("first request of 10.0.0.2 as itself: %d", rec.Code)
	}
	if rec := send("10.0.0.2:5002", "1"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("member 2's address claiming to forward for member 1: %d", rec.Code)
	}
}
