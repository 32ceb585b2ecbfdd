package headreport

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestBookIsBoundedByMembership: a report of an id that is not a member is
// not kept, and the reports of removed members are forgotten.
func TestBookIsBoundedByMembership(t *testing.T) {
	b := NewBook()
	at := time.Unix(100, 0)
	b.Put(api.HeadUpdate{NodeID: 2, AppliedIndex: 5}, at, []uint64{1, 2, 3})
	b.Put(api.HeadUpdate{NodeID: 9, AppliedIndex: 5}, at, []uint64{1, 2, 3})
	if _, ok := b.Get(9); ok {
		t.Fatal("kept the report of a non-member")
	}
	b.Put(api.HeadUpdate{NodeID: 2, AppliedIndex: 6}, at.Add(time.Second), []uint64{1, 2, 3})
	if r, ok := b.Get(2); !ok || r.AppliedIndex != 6 || !r.At.Equal(at.Add(time.Second)) {
		t.Fatalf("member 2: %+v %v, want its newest report", r, ok)
	}
	b.Put(api.HeadUpdate{NodeID: 3, AppliedIndex: 6}, at, []uint64{1, 3})
	if _, ok := b.Get(2); ok {
		t.Fatal("kept the report of a removed member")
	}
	if len(b.reports) != 1 {
		t.Fatalf("%d reports held, want 1", len(b.reports))
	}
}

type fixedChain struct {
	applied, seg uint64
	hash         [32]byte
}

func (c fixedChain) AppliedIndex() uint64 { return c.applied }
func (c fixedChain) SegmentHead(index uint64) (uint64, [32]byte, bool, error) {
	if c.seg == 0 || index < c.seg {
		return 0, [32]byte{}, false, nil
	}
	return c.seg, c.hash, true, nil
}

type follower struct{ leaderURL string }

func (f follower) Status() api.ConsensusStatus { return api.ConsensusStatus{NodeID: 2, Leader: 1} }
func (f follower) Members() []api.Member {
	return []api.Member{{ID: 1, APIURL: f.leaderURL}, {ID: 2, APIURL: "http://127.0.0.1:1"}}
}

// TestReporterSendsItsHead: a follower posts its head, with the token, as
// JSON to the leader's route; the leader's answer other than 200 is an
// error.
func TestReporterSendsItsHead(t *testing.T) {
	got := make(chan api.HeadUpdate, 1)
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u api.HeadUpdate
		if r.URL.Path != Path || r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" ||
			json.NewDecoder(r.Body).Decode(&u) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got <- u
		w.WriteHeader(status)
	}))
	defer srv.Close()
	chain := fixedChain{applied: 12, seg: 10, hash: [32]byte{0xab}}
	r := NewReporter(Config{NodeID: 2, Token: func() string { return "tok" }}, chain, follower{leaderURL: srv.URL})
	if err := r.ReportOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	u := <-got
	if u.NodeID != 2 || u.AppliedIndex != 12 || u.SegmentIndex != 10 || u.SegmentHash != "0xab"+"00000000000000000000000000000000000000000000000000000000000000"[:62] {
		t.Fatalf("reported %+v", u)
	}
	if a, err := Agreement(u, chain); err != nil || a != api.HeadAgrees {
		t.Fatalf("agreement with its own chain: %s %v", a, err)
	}
	status = http.StatusServiceUnavailable
	if err := r.ReportOnce(context.Background()); err == nil {
		t.Fatal("a 503 is not an error")
	}
}
