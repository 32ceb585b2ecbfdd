package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// TestOpsEventRoutes: a refused proposal is an event of the validator that
// refused it, at once, with its reason and wallet, and counted; limit is
// checked.
func TestOpsEventRoutes(t *testing.T) {
	base := startMock(t)
	a, other := newAuthor(t), newAuthor(t)
	id := common.HexToHash("0x0e")
	if code, body := post(t, base, a.form(t, id, "x", other.key)); code != http.StatusUnauthorized {
		t.Fatalf("forged: %d %v", code, body)
	}

	var recent api.OpsEventsRecent
	if code := getJSON(t, base+"/v1/events/recent", &recent); code != http.StatusOK || recent.ContractVersion != api.OpsEventsRecentVersion ||
		recent.NodeID != 1 || recent.Limit != api.DefaultOpsEventsLimit || recent.Capacity != opsevents.DefaultCapacity ||
		recent.Recorded < 1 || len(recent.Events) == 0 {
		t.Fatalf("recent: %d %+v", code, recent)
	}
	var refused *api.OpsEvent
	for i, e := range recent.Events {
		if i > 0 && e.ID >= recent.Events[i-1].ID {
			t.Errorf("not newest first: id %d after %d", e.ID, recent.Events[i-1].ID)
		}
		if e.Type == "intake.refused" {
			refused = &recent.Events[i]
		}
	}
	if refused == nil || refused.Attributes.Reason != string(apierror.InvalidSignature) || refused.Severity != api.SeverityInfo ||
		refused.Attributes.Wallet != strings.ToLower(a.wallet.Hex()) || refused.Attributes.ProposalID != id.Hex() || refused.Count != 1 ||
		refused.Message != "a proposal was refused at intake: invalid_signature" {
		t.Fatalf("the refusal: %+v in %+v", refused, recent.Events)
	}

	var stats api.OpsEventStats
	if code := getJSON(t, base+"/v1/events/stats", &stats); code != http.StatusOK || stats.ContractVersion != api.OpsEventStatsVersion ||
		stats.NodeID != 1 || stats.ByType["intake.refused"].ByReason[string(apierror.InvalidSignature)] != 1 ||
		stats.ByType["intake.refused"].Total != 1 || stats.Total < 1 || stats.Last24h != stats.Total || stats.Recorded < 1 {
		t.Fatalf("stats: %d %+v", code, stats)
	}

	if code := getJSON(t, base+"/v1/events/recent?limit=1", &recent); code != http.StatusOK || recent.Limit != 1 || len(recent.Events) != 1 {
		t.Fatalf("limit=1: %d %+v", code, recent)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=abc", "limit=", "limit=1&limit=2", "limit=1.5"} {
		var e apierror.Body
		if code := getJSON(t, base+"/v1/events/recent?"+q, &e); code != http.StatusBadRequest || e.Error == nil ||
			e.Error.Code != apierror.InvalidField || e.Error.Details["field"] != "limit" {
			t.Errorf("%s: %d %+v", q, code, e.Error)
		}
	}
}

// TestOpsEventBodies renders a recorder's events and counts through the
// handlers: newest first, cut at limit, every type and severity counted.
func TestOpsEventBodies(t *testing.T) {
	rec := opsevents.New(opsevents.Options{Capacity: 3})
	rec.LeaderChanged(2, 1, "LEADER")
	rec.Backpressure(true, 4, 4)
	rec.Backpressure(false, 1, 4)
	rec.Snapshots(opsevents.SnapshotSent, 3, 1)
	e := echo.New()
	opsEventViews{nodeID: 7, rec: rec}.register(e)
	srv := httptest.NewServer(e)
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

// TestOpsCounterWatch: snapshot transfers and write stalls become events
// as their counters move, by peer; a counter that starts again counts from
// zero.
func TestOpsCounterWatch(t *testing.T) {
	rec := opsevents.New(opsevents.Options{})
	peers := map[uint64]transport.PeerStats{2: {SnapshotsSent: 1}, 3: {}}
	var stalls storage.WriteStalls
	w := newOpsCounterWatch(rec, func() map[uint64]transport.PeerStats { return peers }, func() storage.WriteStalls { return stalls })
	w.look()
	peers = map[uint64]transport.PeerStats{2: {SnapshotsSent: 3, SnapshotsFailed: 1}, 3: {SnapshotsReceived: 1}}
	stalls = storage.WriteStalls{Count: 2, LastReason: "L0 file count limit exceeded"}
	w.look()
	w.look()                                                      // nothing moved
	peers = map[uint64]transport.PeerStats{2: {SnapshotsSent: 1}} // removed and added again; 3 removed
	w.look()

	got, _ := rec.Recent(100)
	var seen []string
	for i := len(got) - 1; i >= 0; i-- {
		e := got[i]
		seen = append(seen, e.Type.String()+" peer="+strconv.FormatUint(e.Peer, 10)+" count="+strconv.FormatUint(e.Count, 10)+" "+e.Reason)
	}
	want := []string{
		"snapshot.sent peer=2 count=1 ",
		// The second look: peers in map order, then the stalls.
		"snapshot.received peer=3 count=1 ",
		"snapshot.sent peer=2 count=2 ",
		"snapshot.failed peer=2 count=1 ",
		"storage.write_stall peer=0 count=2 L0 file count limit exceeded",
		"snapshot.sent peer=2 count=1 ",
	}
	if len(seen) != len(want) {
		t.Fatalf("events %v, want %v", seen, want)
	}
	// Within one look peers come in map order: compare the second look as
	// a set.
	second := map[string]bool{seen[1]: true, seen[2]: true, seen[3]: true}
	if seen[0] != want[0] || !second[want[1]] || !second[want[2]] || !second[want[3]] || seen[4] != want[4] || seen[5] != want[5] {
		t.Fatalf("events %v, want %v", seen, want)
	}
	if s := rec.Stats(); s.ByReason[opsevents.WriteStall]["L0 file count limit exceeded"] != 2 {
		t.Fatalf("stalls by reason %v", s.ByReason[opsevents.WriteStall])
	}
}

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

// TestOpsCounterWatchRuns: run looks at once, then every interval, and
// returns when its context ends.
func TestOpsCounterWatchRuns(t *testing.T) {
	rec := opsevents.New(opsevents.Options{})
	changed := rec.Changed()
	w := newOpsCounterWatch(rec, func() map[uint64]transport.PeerStats { return nil },
		func() storage.WriteStalls {
			return storage.WriteStalls{Count: 1, LastReason: "memtable count limit reached"}
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx, time.Hour); close(done) }()
	<-changed // the first look, without waiting an hour
	cancel()
	<-done
	if got, _ := rec.Recent(10); len(got) != 1 || got[0].Type != opsevents.WriteStall {
		t.Fatalf("events %+v", got)
	}
}
