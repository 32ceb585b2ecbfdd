package app

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
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
