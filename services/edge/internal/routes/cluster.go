package routes

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// eachValidator runs fn for every validator of the edge at once. The views
// built this way report each validator's answer, or why there is none.
func (s *server) eachValidator(fn func(i int, base string)) {
	var wg sync.WaitGroup
	for i, base := range s.up.URLs() {
		wg.Go(func() { fn(i, base) })
	}
	wg.Wait()
}

// clusterNode is one validator in the cluster view (openapi.yaml: ClusterData).
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

// cluster asks every validator of the edge for its consensus status at
// once, then for its state hash at the lowest applied index among them.
func (s *server) cluster(c echo.Context) error {
	r := s.reader(c)
	r.uncacheable() // lastSeenAt is the time of the request
	nodes := make([]clusterNode, len(s.up.URLs()))
	errs := make([]error, len(nodes))
	s.eachValidator(func(i int, base string) {
		var st api.ConsensusStatus
		if _, err := r.readFrom(base, at(srcStatus), &st); err != nil {
			nodes[i], errs[i] = clusterNode{NodeID: base, URL: base, Error: err.Error()}, err
			return
		}
		nodes[i] = clusterNode{NodeID: st.Name, ID: st.NodeID, URL: base, Role: st.Role, Term: st.Term, Reachable: true,
			AppliedIndex: st.AppliedIndex, CommitIndex: st.CommitIndex, StateHash: st.StateHash,
			LastSeenAt: s.cfg.Now().UTC().Format(time.RFC3339Nano)}
	})

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
	if reachable == 0 {
		return r.noneAnswered(at(srcStatus), errs)
	}
	// Validators are rarely at the same index under load: each is asked
	// for its hash at comparedAt, which all of them have applied.
	if comparedAt > 0 {
		hashAt := at(srcStateHash)
		hashAt.path += "?index=" + strconv.FormatUint(comparedAt, 10)
		s.eachValidator(func(i int, base string) {
			if !nodes[i].Reachable {
				return
			}
			var h api.StateHashAt
			if status, err := r.readFrom(base, hashAt, &h); err == nil && status == http.StatusOK && h.Index == comparedAt {
				nodes[i].ComparedHash = h.StateHash
			}
		})
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
		"quorum":             len(nodes)/2 + 1,
		"reachable":          reachable,
		"stateHashAgreement": agreement,
		"comparedAt":         comparedAt,
		"sources":            r.attempts(),
	})
}

// healthAnswer is one validator's /health body, nil when it gave none.
type healthAnswer struct {
	url   string
	body  *validatorHealth
	error string
}

// validatorHealth is the body of a validator's /health (200 or 503).
type validatorHealth struct {
	Status string                `json:"status"`
	Checks map[string]healthItem `json:"checks"`
}

type healthItem struct {
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// healthOfAll asks every validator for /health at once.
func (s *server) healthOfAll(r *reader) []healthAnswer {
	answers := make([]healthAnswer, len(s.up.URLs()))
	s.eachValidator(func(i int, base string) {
		// /health answers 503 with the same body when a check fails: both
		// are answers.
		var h validatorHealth
		if _, err := r.readFrom(base, at(srcHealth), &h); err != nil {
			answers[i] = healthAnswer{url: base, error: err.Error()}
			return
		}
		answers[i] = healthAnswer{url: base, body: &h}
	})
	return answers
}

// health is the edge-owned health contract: every validator's /health,
// rolled up. It answers even when no validator does, since saying so is
// its job.
func (s *server) health(c echo.Context) error {
	r := s.reader(c)
	answers := s.healthOfAll(r)
	reachable, healthy := 0, 0
	validators := make([]map[string]any, 0, len(answers))
	for _, a := range answers {
		if a.body == nil {
			validators = append(validators, map[string]any{"url": a.url, "reachable": false, "error": a.error})
			continue
		}
		reachable++
		if a.body.Status == "ok" {
			healthy++
		}
		validators = append(validators, map[string]any{"url": a.url, "reachable": true, "status": a.body.Status, "checks": a.body.Checks})
	}
	quorum := len(answers)/2 + 1
	status := "healthy"
	switch {
	case healthy < quorum:
		status = "critical"
	case healthy < len(answers):
		status = "degraded"
	}
	check := func(ok bool, detail string) healthItem {
		if ok {
			return healthItem{"ok", detail}
		}
		return healthItem{"failing", detail}
	}
	checks := map[string]healthItem{
		"cluster": check(healthy >= quorum, strconv.Itoa(healthy)+" healthy validators of "+strconv.Itoa(len(answers))+" configured"),
		"api":     check(true, "edge serving"),
	}
	for _, name := range []string{"storage", "chain", "nats"} {
		checks[name] = componentCheck(name, answers)
	}
	return s.envelope(c, map[string]any{
		"status":     status,
		"checks":     checks,
		"validators": validators,
		"quorum":     quorum,
		"reachable":  reachable,
		"sources":    r.attempts(),
	})
}

// componentCheck reduces the validators' own checks of one component:
// failing if any validator that answered reports it failing.
func componentCheck(name string, answers []healthAnswer) healthItem {
	out := healthItem{"unknown", "no validator reported it"}
	for _, a := range answers {
		if a.body == nil {
			continue
		}
		c, ok := a.body.Checks[name]
		if !ok {
			continue
		}
		if out.Status == "unknown" || c.Status != "ok" {
			out = c
		}
	}
	return out
}
