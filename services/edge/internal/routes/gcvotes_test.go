package routes

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
)

// TestGcHashDisagreementSignal: validators agreeing on every GC run's
// state hash give 0 (ok); one reporting another hash for a run they share
// makes the signal critical; a run only some hold is no disagreement; with
// one validator answering the signal is unknown, with a gap.
func TestGcHashDisagreementSignal(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	d := getData(t, srv.URL+"/ops/v1/signals")
	if s := signalByID(t, d, "gcHashDisagreement"); s["value"] != float64(0) || s["severity"] != "ok" || s["source"] != srcGcVote {
		t.Fatalf("agreeing: %v", s)
	}

	votes := func(f *fake, v ...api.GcVote) {
		f.answer(srcGcVote, func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(api.GcVotes{ContractVersion: api.GcVotesVersion, NodeID: f.id, AppliedIndex: 30, Votes: v})
		})
	}
	// Node 3 is ahead with run 2, which the others lack: not counted.
	votes(fc.nodes[2], api.GcVote{Run: 1, Epoch: 5, CommitIndex: 9, StateHash: "0xbb"}, api.GcVote{Run: 2, Epoch: 6, CommitIndex: 20, StateHash: "0xcc"})
	if s := signalByID(t, getData(t, edge(t, auth.Lanes{}, fc.urls()...).URL+"/ops/v1/signals"), "gcHashDisagreement"); s["value"] != float64(0) {
		t.Fatalf("a run only one holds: %v", s)
	}
	// Node 2 reports another hash for run 1.
	votes(fc.nodes[1], api.GcVote{Run: 1, Epoch: 5, CommitIndex: 9, StateHash: "0xdd"})
	d = getData(t, edge(t, auth.Lanes{}, fc.urls()...).URL+"/ops/v1/signals")
	if s := signalByID(t, d, "gcHashDisagreement"); s["value"] != float64(1) || s["severity"] != "critical" || d["status"] != "critical" {
		t.Fatalf("disagreeing: %v, status %v", s, d["status"])
	}

	one := edge(t, auth.Lanes{}, fc.nodes[0].srv.URL)
	d = getData(t, one.URL+"/ops/v1/signals")
	if s := signalByID(t, d, "gcHashDisagreement"); s["value"] != nil || s["severity"] != "unknown" {
		t.Fatalf("one validator: %v", s)
	}
	found := false
	for _, g := range gapFields(d) {
		found = found || g == "signals.gcHashDisagreement"
	}
	if !found {
		t.Fatalf("no gap for the signal: %v", gapFields(d))
	}
}
