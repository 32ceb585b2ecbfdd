package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
)

// FuzzOpsEventsLimit: whatever the query, limit is refused or is the one
// integer given, within its bounds.
func FuzzOpsEventsLimit(f *testing.F) {
	for _, s := range []string{"", "limit=1", "limit=1000", "limit=0", "limit=1001", "limit=07", "limit=-1", "limit=%2B5", "limit=1&limit=1",
		"limit=", "limit=1e3", "other=2", "limit=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		n, err := opsEventsLimit(q)
		values, given := q["limit"]
		switch {
		case !given:
			if err != nil || n != api.DefaultOpsEventsLimit {
				t.Fatalf("%q: absent limit gave %d %v", raw, n, err)
			}
		case err != nil:
			if e := apierror.As(err); e == nil || e.Code != apierror.InvalidField || e.Details["field"] != "limit" {
				t.Fatalf("%q: %v", raw, err)
			}
		default:
			want, perr := strconv.Atoi(values[0])
			if len(values) != 1 || perr != nil || n != want || n < 1 || n > api.MaxOpsEventsLimit {
				t.Fatalf("%q: took %d", raw, n)
			}
		}
	})
}

// TestOpsEventBodies renders a recorder's events and counts through the
// handlers: newest first, cut at limit, every type and severity counted.
func TestOpsEventBodies(t *testing.T) {
	rec := opsevents.New(opsevents.Options{Capacity: 3})
	rec.LeaderChanged(2, 1, "LEADER")
	rec.Backpressure(true, 4, 4)
	rec.Backpressure(false, 1, 4)
	rec.Snapshots(opsevents.SnapshotSent, 3, 1)
	srv := httptest.NewServer(New(Config{NodeID: 7}, Deps{OpsEvents: rec}, zap.NewNop()))
	t.Cleanup(srv.Close)

	var recent api.OpsEventsRecent
	if code := getJSON(t, srv.URL+"/v1/events/recent?limit=2", &recent); code != http.StatusOK || recent.NodeID != 7 || recent.Capacity != 3 ||
		recent.Recorded != 4 || len(recent.Events) != 2 || recent.Events[0].Type != "snapshot.sent" || recent.Events[1].Type != "backpressure.off" ||
		*recent.Events[0].Attributes.Peer != 3 || *recent.Events[1].Attributes.InFlight != 1 {
		t.Fatalf("recent: %d %+v", code, recent)
	}
	if code := getJSON(t, srv.URL+"/v1/events/recent", &recent); code != http.StatusOK || len(recent.Events) != 3 {
		t.Fatalf("past the ring: %d %d events", code, len(recent.Events))
	}
	var stats api.OpsEventStats
	if code := getJSON(t, srv.URL+"/v1/events/stats", &stats); code != http.StatusOK || stats.Total != 4 || stats.Retained != 3 ||
		stats.BySeverity[api.SeverityWarn] != 1 || stats.BySeverity[api.SeverityInfo] != 3 || stats.BySeverity[api.SeverityCritical] != 0 ||
		stats.ByType["leader.changed"].Total != 1 || stats.ByType["leader.changed"].LastAt == nil || stats.ByType["storage.write_stall"].LastAt != nil {
		t.Fatalf("stats: %d %+v", code, stats)
	}
	raw, _ := json.Marshal(stats)
	if !strings.Contains(string(raw), `"gc.writes_blocked":{"total":0,"last24h":0,"lastAt":null,"byReason":{}}`) {
		t.Errorf("a type never seen is not shown as such: %s", raw)
	}
}

// getJSON reads a JSON answer into out and returns its status code.
func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %s: %v", url, body, err)
	}
	return resp.StatusCode
}
