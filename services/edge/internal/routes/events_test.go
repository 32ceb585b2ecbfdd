package routes

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
)

// TestEventsRecent: every validator's events merged newest first, each
// named by its validator, cut at limit; a validator down is named and
// passed over; every limit reads the same 50 from each validator.
func TestEventsRecent(t *testing.T) {
	fc := newCluster(t, 3)
	var mu sync.Mutex
	var asked []string
	first := fc.nodes[0]
	first.answer(srcEventsRecent, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RawQuery)
		mu.Unlock()
		status, body := first.body(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	})
	dead := deadURL(t)
	srv := edge(t, auth.Lanes{}, append(fc.urls(), dead)...)

	data := getData(t, srv.URL+"/ops/v1/events/recent?limit=7")
	events := data["events"].([]any)
	if data["limit"] != float64(7) || len(events) != 7 {
		t.Fatalf("limit 7: %v", data)
	}
	// The newest: every validator's event 30, validator 3's a second after
	// validator 2's, then their events 29.
	epoch := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var got []string
	for i, e := range events {
		e := e.(map[string]any)
		at, _ := time.Parse(time.RFC3339Nano, e["at"].(string))
		got = append(got, e["validator"].(string)+" "+at.Sub(epoch).String())
		if e["id"] != float64(30-i/3) || e["type"] != "intake.refused" || e["attributes"].(map[string]any)["reason"] != "invalid_signature" {
			t.Errorf("event %d: %v", i, e)
		}
	}
	want := []string{"validator-3 4m53s", "validator-2 4m52s", "validator-1 4m51s", "validator-3 4m43s", "validator-2 4m42s",
		"validator-1 4m41s", "validator-3 4m33s"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	vs := data["validators"].([]any)
	if len(vs) != 4 || vs[0].(map[string]any)["nodeId"] != "validator-1" || vs[0].(map[string]any)["recorded"] != float64(fakeEvents) ||
		vs[3].(map[string]any)["url"] != dead || vs[3].(map[string]any)["reachable"] != false || vs[3].(map[string]any)["error"] == "" {
		t.Fatalf("validators %v", vs)
	}
	if len(data["sources"].([]any)) != 4 || len(data["gaps"].([]any)) != 0 {
		t.Fatalf("sources and gaps %v", data)
	}

	getData(t, srv.URL+"/ops/v1/events/recent")
	getData(t, srv.URL+"/ops/v1/events/recent?limit=50")
	mu.Lock()
	if !slices.Equal(asked, []string{"limit=50", "limit=50", "limit=50"}) {
		t.Errorf("the validator was asked %v", asked)
	}
	mu.Unlock()
	if data := getData(t, srv.URL+"/ops/v1/events/recent?limit=50"); len(data["events"].([]any)) != 50 {
		t.Errorf("limit 50: %d events", len(data["events"].([]any)))
	}
}

// TestEventsAtOneTime: events of the same time are ordered by validator,
// then id, newest first, so that replicas agree.
func TestEventsAtOneTime(t *testing.T) {
	fc := newCluster(t, 3)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, f := range slices.Backward(fc.nodes) {
		f.answer(srcEventsRecent, func(w http.ResponseWriter, _ *http.Request) {
			body := api.OpsEventsRecent{ContractVersion: api.OpsEventsRecentVersion, NodeID: f.id, Limit: 50, Capacity: 1000, Recorded: 2,
				Events: []api.OpsEvent{
					{ID: 2, At: at, Type: "backpressure.off", Severity: api.SeverityInfo, Message: "off", Count: 1},
					{ID: 1, At: at, Type: "backpressure.on", Severity: api.SeverityWarn, Message: "on", Count: 1},
				}}
			_ = json.NewEncoder(w).Encode(body)
		})
	}
	srv := edge(t, auth.Lanes{}, fc.nodes[2].srv.URL, fc.nodes[0].srv.URL, fc.nodes[1].srv.URL)
	var got []string
	for _, e := range getData(t, srv.URL+"/ops/v1/events/recent")["events"].([]any) {
		e := e.(map[string]any)
		got = append(got, e["validator"].(string)+" "+e["type"].(string))
	}
	want := []string{"validator-1 backpressure.off", "validator-1 backpressure.on", "validator-2 backpressure.off",
		"validator-2 backpressure.on", "validator-3 backpressure.off", "validator-3 backpressure.on"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestEventsStats: the validators' counts summed, with each validator's
// beside them; a validator down is not counted, and says so.
func TestEventsStats(t *testing.T) {
	fc := newCluster(t, 3)
	dead := deadURL(t)
	srv := edge(t, auth.Lanes{}, append(fc.urls(), dead)...)
	data := getData(t, srv.URL+"/ops/v1/events/stats")
	// Validator n counts 1 leader change and 10n refusals, n of them in
	// the last 24 hours.
	if data["total"] != float64(63) || data["last24h"] != float64(9) || data["validatorsCounted"] != float64(3) {
		t.Fatalf("sums %v", data)
	}
	if sev := data["bySeverity"].(map[string]any); sev["info"] != float64(60) || sev["warn"] != float64(3) || sev["critical"] != float64(0) {
		t.Errorf("by severity %v", sev)
	}
	if sev := data["bySeverity24h"].(map[string]any); sev["info"] != float64(6) || sev["warn"] != float64(3) {
		t.Errorf("by severity, 24 h %v", sev)
	}
	byType := data["byType"].(map[string]any)
	refused := byType["intake.refused"].(map[string]any)
	if refused["total"] != float64(60) || refused["last24h"] != float64(6) || refused["byReason"].(map[string]any)["invalid_signature"] != float64(60) ||
		refused["lastAt"] != "2026-03-01T12:05:03Z" {
		t.Errorf("refusals %v", refused)
	}
	if leader := byType["leader.changed"].(map[string]any); leader["total"] != float64(3) || leader["lastAt"] != "2026-03-01T12:00:00Z" {
		t.Errorf("leader changes %v", leader)
	}
	if snap := byType["snapshot.sent"].(map[string]any); snap["total"] != float64(0) || snap["lastAt"] != nil {
		t.Errorf("snapshots %v", snap)
	}
	vs := data["validators"].([]any)
	second := vs[1].(map[string]any)
	if len(vs) != 4 || second["nodeId"] != "validator-2" || second["total"] != float64(21) ||
		second["byType"].(map[string]any)["intake.refused"].(map[string]any)["total"] != float64(20) || second["since"] != "2026-03-01T11:00:00Z" {
		t.Fatalf("validators %v", vs)
	}
	if down := vs[3].(map[string]any); down["reachable"] != false || down["url"] != dead || down["total"] != nil {
		t.Fatalf("the validator down: %v", down)
	}
}
