package app

import (
	"net/http"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/blob"
)

type cidStatsAnswer struct{ api.CIDStats }

func (s *cidStatsAnswer) applied() uint64 { return s.AppliedIndex }

func TestCIDRoutes(t *testing.T) {
	const otherCID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"
	base := startMock(t)
	a := newAuthor(t)
	commit(t, base, a.formAt(t, pageID(0xf1), "one", `{"title":"one","ledger:cid":"`+testCID+`"}`))
	commit(t, base, a.formAt(t, pageID(0xf2), "two", `{"title":"two","ledger:cid":"`+testCID+`"}`))
	commit(t, base, a.formAt(t, pageID(0xf3), "three", `{"title":"three","ledger:cid":"`+otherCID+`"}`))
	last := commit(t, base, a.formAt(t, pageID(0xf4), "four", `{"title":"no binary, but the text `+testCID+`"}`))

	var s cidStatsAnswer
	getAt(t, base+"/api/cid/stats", last, &s)
	if s.NodesWithCID != 3 || s.DistinctCIDs != 2 || s.StoredBytes != 3*blob.MaxCIDBytes || s.NodeID != 1 || s.ComputedAt.IsZero() {
		t.Fatalf("CID stats %+v", s.CIDStats)
	}

	var r api.CIDReverse
	if code := getJSON(t, base+"/api/cid/reverse/"+testCID, &r); code != http.StatusOK || r.CID != testCID || r.Truncated ||
		len(r.Nodes) != 2 || r.AppliedIndex < last {
		t.Fatalf("reverse %s: %d %+v", testCID, code, r)
	}
	for i, sub := range []string{"one", "two"} {
		n := r.Nodes[i]
		if !strings.HasSuffix(n.Path, "/"+sub) || !strings.EqualFold(n.Wallet, a.wallet.Hex()) || n.ProposalID != pageID(0xf1+byte(i)).Hex() || n.CommitIndex == 0 {
			t.Fatalf("reference %d: %+v", i, n)
		}
	}
	var e apierror.Body
	if code := getJSON(t, base+"/api/cid/reverse/QmNLei78zWmzUdbeRB3CiUfAizWUrbeeZh5K1rhAQKCh51", &e); code != http.StatusNotFound ||
		e.Error == nil || e.Error.Code != apierror.NotFound {
		t.Fatalf("an unreferenced CID: %d %+v", code, e.Error)
	}
	if code := getJSON(t, base+"/api/cid/reverse/not-a-cid", &e); code != http.StatusBadRequest || e.Error.Details["field"] != "cid" {
		t.Fatalf("a malformed CID: %d %+v", code, e.Error)
	}
}
