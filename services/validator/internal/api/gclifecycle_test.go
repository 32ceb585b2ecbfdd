package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/access"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
)

// fakeCompactions answers as the leader's GC proposal manager and keeps
// what it was asked.
type fakeCompactions struct {
	mu      sync.Mutex
	waits   []time.Duration
	arms    int
	applied bool  // Propose answers the run applied
	refuse  error // Propose answers this
}

func (f *fakeCompactions) Propose(_ context.Context, wait time.Duration) (api.GcProposal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, wait)
	if f.refuse != nil {
		return api.GcProposal{}, f.refuse
	}
	out := api.GcProposal{ContractVersion: api.GcProposalVersion, NodeID: 1, Epoch: 12, State: api.GcProposalProposed}
	if f.applied {
		out.State, out.Run, out.CommitIndex, out.StateHash = api.GcProposalApplied, 3, 4567, "0xab"
	}
	return out, nil
}

func (f *fakeCompactions) Arm() (api.GcTrigger, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arms++
	return api.GcTrigger{ContractVersion: api.GcTriggerVersion, NodeID: 1, Term: 4, Armed: true, AfterEpoch: 12}, nil
}

func (f *fakeCompactions) calls() ([]time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...), f.arms
}

// gcRunViews is the segment store's GC run views, with the runs asked.
type gcRunViews struct {
	Segments
	asked []int
}

func (g *gcRunViews) GcVotes(runs int) (api.GcVotes, error) {
	g.asked = append(g.asked, runs)
	return api.GcVotes{ContractVersion: api.GcVotesVersion, NodeID: 1, AppliedIndex: 90,
		Votes: []api.GcVote{{Run: 3, Epoch: 12, CommitIndex: 4567, StateHash: "0xab"}}}, nil
}

func (g *gcRunViews) GcLog(runs int) (segments.GcLog, error) {
	g.asked = append(g.asked, runs)
	return segments.GcLog{AppliedIndex: 90, Lines: []string{"a compaction", "a cleanup", "done"}}, nil
}

// lifecycleTokens guards the operator and ops-read lanes.
func lifecycleTokens() access.Tokens {
	var tokens access.Tokens
	tokens.Add(access.OpsRead, opsReadToken)
	tokens.Add(access.Operator, operatorToken)
	return tokens
}

// send makes a request to h with a lane's token ("" none) and a JSON body.
func send(h http.Handler, method, url, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errorCode is the code of an error body, "" for another body.
func errorCode(rec *httptest.ResponseRecorder) (apierror.Code, string) {
	var body apierror.Body
	if json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error == nil {
		return "", ""
	}
	field, _ := body.Error.Details["field"].(string)
	return body.Error.Code, field
}

// TestProposeGcRoutes: on the leader, propose-gc and gc/execute are one
// route (202 proposed, 200 applied within the wait, 409 gc_refused),
// gc/trigger arms; bad bodies and a missing token are refused before the
// manager is asked.
func TestProposeGcRoutes(t *testing.T) {
	gc := &fakeCompactions{}
	e := New(Config{Access: lifecycleTokens(), MaxStatusWait: 10 * time.Second}, Deps{Cluster: leaderCluster{}, Compactions: gc}, zap.NewNop())

	rec := send(e, http.MethodPost, "/v1/propose-gc", operatorToken, "")
	var out api.GcProposal
	if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out.State != api.GcProposalProposed || out.Epoch != 12 {
		t.Fatalf("propose-gc: %d %s", rec.Code, rec.Body)
	}
	gc.applied = true
	rec = send(e, http.MethodPost, "/v1/gc/execute", operatorToken, `{"wait":"1m"}`)
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out.Run != 3 || out.StateHash != "0xab" {
		t.Fatalf("gc/execute: %d %s", rec.Code, rec.Body)
	}
	if waits, _ := gc.calls(); len(waits) != 2 || waits[0] != 0 || waits[1] != 10*time.Second {
		t.Fatalf("waits asked %v, want none and the cap", waits)
	}

	for _, tc := range []struct {
		url, token, body string
		status           int
		code             apierror.Code
		field            string
	}{
		{"/v1/propose-gc", "", "{}", http.StatusUnauthorized, apierror.Unauthorized, ""},
		{"/v1/propose-gc", opsReadToken, "{}", http.StatusForbidden, apierror.Forbidden, ""},
		{"/v1/propose-gc", operatorToken, `{"wait":"soon"}`, http.StatusBadRequest, apierror.InvalidField, "wait"},
		{"/v1/propose-gc", operatorToken, `{"wait":"-1s"}`, http.StatusBadRequest, apierror.InvalidField, "wait"},
		{"/v1/propose-gc", operatorToken, `{"epoch":3}`, http.StatusBadRequest, apierror.InvalidField, ""},
		{"/v1/propose-gc", operatorToken, `[]`, http.StatusBadRequest, apierror.InvalidField, ""},
		{"/v1/propose-gc?wait=1s", operatorToken, `{}`, http.StatusBadRequest, apierror.InvalidField, "wait"},
		{"/v1/gc/trigger", operatorToken, `{"now":true}`, http.StatusBadRequest, apierror.InvalidField, ""},
	} {
		rec := send(e, http.MethodPost, tc.url, tc.token, tc.body)
		if code, field := errorCode(rec); rec.Code != tc.status || code != tc.code || field != tc.field {
			t.Errorf("%s %s: %d %s, want %d %s (field %q)", tc.url, tc.body, rec.Code, rec.Body, tc.status, tc.code, tc.field)
		}
	}
	if waits, arms := gc.calls(); len(waits) != 2 || arms != 0 {
		t.Fatalf("refused requests reached the manager: %v, %d arms", waits, arms)
	}

	gc.refuse = apierror.New(apierror.GcRefused, "GC run 3 already compacted epoch 12").WithDetail("reason", "run_exists")
	if rec := send(e, http.MethodPost, "/v1/propose-gc", operatorToken, "{}"); rec.Code != http.StatusConflict ||
		!strings.Contains(rec.Body.String(), `"code":"gc_refused"`) || !strings.Contains(rec.Body.String(), `"reason":"run_exists"`) {
		t.Fatalf("a run of the epoch exists: %d %s", rec.Code, rec.Body)
	}

	rec = send(e, http.MethodPost, "/v1/gc/trigger", operatorToken, "")
	var armed api.GcTrigger
	if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &armed) != nil || !armed.Armed || armed.AfterEpoch != 12 {
		t.Fatalf("gc/trigger: %d %s", rec.Code, rec.Body)
	}
}

// followerCluster: node 2 follows node 1, whose API is at leaderURL.
type followerCluster struct {
	Cluster
	leaderURL string
}

func (followerCluster) Status() api.ConsensusStatus {
	return api.ConsensusStatus{NodeID: 2, Leader: 1, Role: api.RoleFollower}
}

func (f followerCluster) Members() []api.Member {
	return []api.Member{{ID: 1, APIURL: f.leaderURL}, {ID: 2, APIURL: "http://10.0.0.2:8090"}}
}

// TestFollowerForwardsGcProposals: a follower forwards propose-gc and
// gc/trigger, body and token, to the leader, whose manager answers.
func TestFollowerForwardsGcProposals(t *testing.T) {
	atLeader := &fakeCompactions{}
	leader := httptest.NewServer(New(Config{Access: lifecycleTokens(), MaxStatusWait: 10 * time.Second},
		Deps{Cluster: leaderCluster{}, Compactions: atLeader}, zap.NewNop()))
	t.Cleanup(leader.Close)
	atFollower := &fakeCompactions{}
	follower := New(Config{Access: lifecycleTokens(), MaxStatusWait: 10 * time.Second},
		Deps{Cluster: followerCluster{leaderURL: leader.URL}, Compactions: atFollower}, zap.NewNop())

	if rec := send(follower, http.MethodPost, "/v1/propose-gc", operatorToken, `{"wait":"2s"}`); rec.Code != http.StatusAccepted ||
		!strings.Contains(rec.Body.String(), `"state":"proposed"`) {
		t.Fatalf("propose-gc at a follower: %d %s", rec.Code, rec.Body)
	}
	if rec := send(follower, http.MethodPost, "/v1/gc/trigger", operatorToken, `{}`); rec.Code != http.StatusAccepted ||
		!strings.Contains(rec.Body.String(), `"armed":true`) {
		t.Fatalf("gc/trigger at a follower: %d %s", rec.Code, rec.Body)
	}
	if waits, arms := atLeader.calls(); len(waits) != 1 || waits[0] != 2*time.Second || arms != 1 {
		t.Fatalf("the leader was asked %v and %d arms", waits, arms)
	}
	if waits, arms := atFollower.calls(); len(waits) != 0 || arms != 0 {
		t.Fatalf("the follower answered itself: %v, %d arms", waits, arms)
	}
}

// TestGcVoteAndLog: the validator's own runs, as JSON and as text, with
// ?runs= bounded; the ops-read lane's token required.
func TestGcVoteAndLog(t *testing.T) {
	views := &gcRunViews{}
	e := New(Config{Access: lifecycleTokens()}, Deps{Cluster: leaderCluster{}, Segments: views}, zap.NewNop())

	rec := send(e, http.MethodGet, "/v1/gc/vote", opsReadToken, "")
	var votes api.GcVotes
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &votes) != nil || len(votes.Votes) != 1 || votes.Votes[0].StateHash != "0xab" {
		t.Fatalf("gc/vote: %d %s", rec.Code, rec.Body)
	}
	rec = send(e, http.MethodGet, "/gc.log?runs=2", opsReadToken, "")
	if rec.Code != http.StatusOK || rec.Body.String() != "a compaction\na cleanup\ndone\n" || rec.Header().Get("X-Applied-Index") != "90" ||
		!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("gc.log: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	if len(views.asked) != 2 || views.asked[0] != api.DefaultGcRuns || views.asked[1] != 2 {
		t.Fatalf("runs asked %v", views.asked)
	}
	for _, url := range []string{"/v1/gc/vote?runs=0", "/gc.log?runs=x", "/gc.log?runs=10001", "/v1/gc/vote?runs=1&runs=2"} {
		rec := send(e, http.MethodGet, url, opsReadToken, "")
		if code, field := errorCode(rec); rec.Code != http.StatusBadRequest || code != apierror.InvalidField || field != "runs" {
			t.Errorf("%s: %d %s", url, rec.Code, rec.Body)
		}
	}
	if rec := send(e, http.MethodGet, "/gc.log", "", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("gc.log without a token: %d", rec.Code)
	}
	if len(views.asked) != 2 {
		t.Fatalf("refused requests reached the views: %v", views.asked)
	}
}

// FuzzGcRoutesInput: whatever the operator's body to propose-gc and the
// query of gc/vote, the answer is the route's own (propose-gc: 202 with a
// wait within MaxStatusWait) or a 400 invalid_field error body; nothing
// else reaches the manager.
func FuzzGcRoutesInput(f *testing.F) {
	for _, s := range []struct{ body, query string }{
		{"", ""}, {"{}", "runs=5"}, {`{"wait":"30s"}`, "runs=0"}, {`{"wait":"-1s"}`, "runs=10001"}, {`{"wait":"1h"}`, "runs=1&runs=2"},
		{`{"wait":3}`, "runs="}, {`{"wait":"30s"}{}`, "runs=%2B5"}, {`[]`, "runs=99999999999999999999"}, {`{"x":1}`, "other=1"},
	} {
		f.Add(s.body, s.query)
	}
	const maxWait = 10 * time.Second
	f.Fuzz(func(t *testing.T, body, query string) {
		gc := &fakeCompactions{}
		views := &gcRunViews{}
		e := New(Config{Access: lifecycleTokens(), MaxStatusWait: maxWait}, Deps{Cluster: leaderCluster{}, Compactions: gc, Segments: views}, zap.NewNop())

		rec := send(e, http.MethodPost, "/v1/propose-gc", operatorToken, body)
		waits, _ := gc.calls()
		switch code, _ := errorCode(rec); {
		case rec.Code == http.StatusAccepted:
			if len(waits) != 1 || waits[0] < 0 || waits[0] > maxWait {
				t.Fatalf("body %q: accepted with waits %v", body, waits)
			}
		case rec.Code == http.StatusBadRequest && code == apierror.InvalidField:
			if len(waits) != 0 {
				t.Fatalf("body %q: refused, yet the manager was asked", body)
			}
		default:
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		}

		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		rec = send(e, http.MethodGet, "/v1/gc/vote?"+q.Encode(), opsReadToken, "")
		switch code, field := errorCode(rec); {
		case rec.Code == http.StatusOK:
			if len(views.asked) != 1 || views.asked[0] < 1 || views.asked[0] > api.MaxGcRuns {
				t.Fatalf("query %q: answered with runs %v", query, views.asked)
			}
		case rec.Code == http.StatusBadRequest && code == apierror.InvalidField && field == "runs":
			if len(views.asked) != 0 {
				t.Fatalf("query %q: refused, yet the views were asked", query)
			}
		default:
			t.Fatalf("query %q: %d %s", query, rec.Code, rec.Body)
		}
	})
}
