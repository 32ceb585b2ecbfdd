package routes

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// clusterNode is one validator in the cluster view (OPS-DATA: cluster).
type clusterNode struct {
	NodeID       string `json:"nodeId"`
	ID           uint64 `json:"id,omitempty"`
	URL          string `json:"url"`
	Role         string `json:"role,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	Reachable    bool   `json:"reachable"`
	AppliedIndex uint64 `json:"appliedIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	StateHash    string `json:"stateHash,omitempty"`
	// ComparedHash is the node's state hash at the view's comparedAt.
	ComparedHash string `json:"comparedHash,omitempty"`
	LastSeenAt   string `json:"lastSeenAt,omitempty"`
	Error        string `json:"error,omitempty"`
}

// cluster asks every validator for its consensus status at once.
func (s *server) cluster(c echo.Context) error {
	urls := s.up.URLs()
	nodes := make([]clusterNode, len(urls))
	sources := make([]upstream.Source, len(urls))
	var wg sync.WaitGroup
	for i, base := range urls {
		wg.Go(func() {
			resp, src := s.up.GetFrom(c.Request().Context(), base, "/v1/consensus/status")
			n := clusterNode{NodeID: base, URL: base}
			var st api.ConsensusStatus
			switch {
			case !src.OK:
				n.Error = src.Error
			case resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &st) != nil || st.ContractVersion != api.ConsensusStatusVersion:
				src.OK, src.Error = false, "answer is not a "+api.ConsensusStatusVersion+" body"
				n.Error = src.Error
			default:
				n = clusterNode{NodeID: st.Name, ID: st.NodeID, URL: base, Role: st.Role, Term: st.Term, Reachable: true,
					AppliedIndex: st.AppliedIndex, CommitIndex: st.CommitIndex, StateHash: st.StateHash,
					LastSeenAt: s.cfg.Now().UTC().Format(time.RFC3339Nano)}
			}
			nodes[i], sources[i] = n, src
		})
	}
	wg.Wait()

	var leader string
	var term uint64
	var comparedAt uint64 // the lowest applied index among the reachable
	reachable := 0
	for _, n := range nodes {
		if !n.Reachable {
			continue
		}
		reachable++
		if n.Role == api.RoleLeader && n.Term >= term {
			leader, term = n.NodeID, n.Term
		}
		if n.AppliedIndex > 0 && (comparedAt == 0 || n.AppliedIndex < comparedAt) {
			comparedAt = n.AppliedIndex
		}
	}
	// Validators are rarely at the same index under load: each is asked
	// for its hash at comparedAt, which all of them have applied.
	if comparedAt > 0 {
		route := "/v1/consensus/state-hash?index=" + strconv.FormatUint(comparedAt, 10)
		for i, base := range urls {
			if !nodes[i].Reachable {
				continue
			}
			wg.Go(func() {
				resp, src := s.up.GetFrom(c.Request().Context(), base, route)
				var at api.StateHashAt
				if src.OK && resp.Status == http.StatusOK && json.Unmarshal(resp.Body, &at) == nil &&
					at.ContractVersion == api.StateHashVersion && at.Index == comparedAt {
					nodes[i].ComparedHash = at.StateHash
				}
			})
		}
		wg.Wait()
	}
	agreement, first := true, ""
	for _, n := range nodes {
		switch {
		case n.ComparedHash == "":
		case first == "":
			first = n.ComparedHash
		case n.ComparedHash != first:
			agreement = false
		}
	}
	return s.envelope(c, map[string]any{
		"nodes":              nodes,
		"leaderNodeId":       leader,
		"term":               term,
		"quorum":             len(urls)/2 + 1,
		"reachable":          reachable,
		"stateHashAgreement": agreement,
		"comparedAt":         comparedAt,
		"sources":            sources,
	})
}
