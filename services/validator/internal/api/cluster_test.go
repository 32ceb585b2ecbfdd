package api

import (
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

func TestSummarizeComparesHashesAtOneIndex(t *testing.T) {
	node := func(id, applied uint64, compared string) api.NodeHealth {
		return api.NodeHealth{ID: id, Reachable: true, AppliedIndex: applied, StateHash: "now-" + compared, ComparedHash: compared}
	}
	down := api.NodeHealth{ID: 3, Error: "connection refused"}
	for _, tc := range []struct {
		name       string
		nodes      []api.NodeHealth
		leader     uint64
		agree      bool
		status     string
		comparedAt uint64
	}{
		{"all agree at different indexes", []api.NodeHealth{node(1, 10, "a"), node(2, 12, "a"), node(3, 15, "a")}, 1, true, "ok", 10},
		{"one differs", []api.NodeHealth{node(1, 10, "a"), node(2, 12, "b"), node(3, 15, "a")}, 1, false, "unavailable", 10},
		{"a member far ahead is left out", []api.NodeHealth{node(1, 10, "a"), node(2, 12, "a"), node(3, 9000, "")}, 1, true, "ok", 10},
		{"one down", []api.NodeHealth{node(1, 10, "a"), node(2, 12, "a"), down}, 1, true, "degraded", 10},
		{"no leader", []api.NodeHealth{node(1, 10, "a"), node(2, 12, "a"), down}, 0, true, "unavailable", 10},
		{"no quorum", []api.NodeHealth{node(1, 10, "a"), {ID: 2}, down}, 1, true, "unavailable", 10},
	} {
		comparedAt := lowestApplied(tc.nodes)
		h := summarize(tc.nodes, tc.leader, comparedAt)
		if h.StateHashAgreement != tc.agree || h.Status != tc.status || h.ComparedAt != tc.comparedAt {
			t.Errorf("%s: agreement %t, status %s, compared at %d; want %t, %s, %d",
				tc.name, h.StateHashAgreement, h.Status, h.ComparedAt, tc.agree, tc.status, tc.comparedAt)
		}
	}
}
