package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/headreport"
)

// FuzzParseRegisterClient: any body is parsed or refused with a 400
// naming what is wrong, never a panic; what is accepted is well formed.
func FuzzParseRegisterClient(f *testing.F) {
	sig := "0x" + strings.Repeat("11", 64) + "1b"
	for _, s := range []string{"", "{}", `{"clientId":"app-1","wallet":"0x` + strings.Repeat("ab", 20) + `","signature":"` + sig + `"}`,
		`{"clientId":"a/b"}`, `{"clientId":1}`, `[]`, `{"clientId":"x","extra":1}`, `{"clientId":"x"}{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		req, err := parseRegisterClient([]byte(raw))
		if err != nil {
			if e := apierror.As(err); e == nil || e.Status() != http.StatusBadRequest {
				t.Fatalf("%q: %v is not a 400", raw, err)
			}
			return
		}
		if signing.CheckClientID(req.clientID) != nil || len(req.signature) != signing.SignatureLen || req.wallet == (common.Address{}) && !strings.Contains(raw, "0x0000") {
			t.Fatalf("%q accepted as %+v", raw, req)
		}
	})
}

// FuzzParseHeadUpdate: a head report is parsed or refused with a 400.
func FuzzParseHeadUpdate(f *testing.F) {
	hash := "0x" + strings.Repeat("ab", 32)
	for _, s := range []string{"", "{}", `{"nodeId":2,"appliedIndex":9,"segmentIndex":7,"segmentHash":"` + hash + `"}`,
		`{"nodeId":2,"appliedIndex":1,"segmentIndex":7}`, `{"nodeId":2,"appliedIndex":1,"segmentHash":"0x"}`, `{"nodeId":-1}`, `{"nodeId":2}x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := parseHeadUpdate([]byte(raw))
		if err != nil {
			if e := apierror.As(err); e == nil || e.Status() != http.StatusBadRequest {
				t.Fatalf("%q: %v is not a 400", raw, err)
			}
			return
		}
		if _, err := headreport.CheckUpdate(r); err != nil || r.NodeID == 0 {
			t.Fatalf("%q accepted as %+v", raw, r)
		}
	})
}

// FuzzParsePublicURL: a public URL is an absolute http(s) URL without user
// information, or "" (cleared), or refused with a 400.
func FuzzParsePublicURL(f *testing.F) {
	for _, s := range []string{"", "{}", `{"url":""}`, `{"url":"https://v1.example.ngrok.app"}`, `{"url":"ftp://x"}`,
		`{"url":"https://user:pw@x"}`, `{"url":"/relative"}`, `{"url":"http://x/#frag"}`, `{"url":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := parsePublicURL([]byte(raw))
		if err != nil {
			if e := apierror.As(err); e == nil || e.Status() != http.StatusBadRequest {
				t.Fatalf("%q: %v is not a 400", raw, err)
			}
			return
		}
		if got == "" {
			return
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || len(got) > api.MaxPublicURLLen {
			t.Fatalf("%q accepted as %q", raw, got)
		}
	})
}

// replicatingLeader is a leader of members 1 (itself) and 2 and 3.
type replicatingLeader struct{ leaderCluster }

func (replicatingLeader) Members() []api.Member {
	return []api.Member{{ID: 1, APIURL: "http://10.0.0.1:8090"}, {ID: 2, APIURL: "http://10.0.0.2:8090"}, {ID: 3, APIURL: "http://10.0.0.3:8090"}}
}

func (replicatingLeader) Replication() api.ReplicationLag {
	return api.ReplicationLag{NodeID: 1, IsLeader: true, Leader: 1, Nodes: []api.ReplicationNode{{NodeID: 1}, {NodeID: 2}, {NodeID: 3}}}
}

// chainHeads is a segment chain with a segment at every index of segs.
type chainHeads struct {
	applied uint64
	segs    map[uint64][32]byte
}

func (h chainHeads) AppliedIndex() uint64 { return h.applied }
func (h chainHeads) StateHash() [32]byte  { return [32]byte{9} }
func (h chainHeads) SegmentHead(index uint64) (uint64, [32]byte, bool, error) {
	for i := min(index, h.applied); i > 0; i-- {
		if hash, ok := h.segs[i]; ok {
			return i, hash, true, nil
		}
	}
	return 0, [32]byte{}, false, nil
}

func hexHash(h [32]byte) string { return "0x" + hex.EncodeToString(h[:]) }

// TestFollowerHeadUpdate: the leader keeps a member's report from that
// member's address, shows it in both replication views with its agreement
// (agrees, diverged, unknown), and refuses a report for another member,
// from another address, or without the operator's token.
func TestFollowerHeadUpdate(t *testing.T) {
	heads := chainHeads{applied: 10, segs: map[uint64][32]byte{3: {3}, 7: {7}}}
	e := New(Config{Access: lifecycleTokens()}, Deps{Cluster: replicatingLeader{}, Heads: heads, HeadReports: headreport.NewBook()}, zap.NewNop())
	report := func(from string, r api.HeadUpdate, token string) *httptest.ResponseRecorder {
		body, _ := json.Marshal(r)
		req := httptest.NewRequest(http.MethodPost, "/v1/follower/head-update", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.RemoteAddr = from + ":5000"
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	for _, c := range []struct {
		name  string
		from  string
		r     api.HeadUpdate
		token string
		want  int
	}{
		{"no token", "10.0.0.2", api.HeadUpdate{NodeID: 2, AppliedIndex: 8, SegmentIndex: 7, SegmentHash: hexHash([32]byte{7})}, "", http.StatusUnauthorized},
		{"an ops-read token", "10.0.0.2", api.HeadUpdate{NodeID: 2, AppliedIndex: 8}, opsReadToken, http.StatusForbidden},
		{"another member's address", "10.0.0.3", api.HeadUpdate{NodeID: 2, AppliedIndex: 8}, operatorToken, http.StatusForbidden},
		{"the leader itself", "10.0.0.1", api.HeadUpdate{NodeID: 1, AppliedIndex: 8}, operatorToken, http.StatusBadRequest},
		{"no member", "10.0.0.9", api.HeadUpdate{NodeID: 9, AppliedIndex: 8}, operatorToken, http.StatusBadRequest},
	} {
		if rec := report(c.from, c.r, c.token); rec.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, rec.Code, rec.Body, c.want)
		}
	}
	var got api.FollowerHead
	rec := report("10.0.0.2", api.HeadUpdate{NodeID: 2, AppliedIndex: 8, SegmentIndex: 7, SegmentHash: hexHash([32]byte{7})}, operatorToken)
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got.Agreement != api.HeadAgrees {
		t.Fatalf("member 2's report: %d %s", rec.Code, rec.Body)
	}
	if rec := report("10.0.0.3", api.HeadUpdate{NodeID: 3, AppliedIndex: 5, SegmentIndex: 3, SegmentHash: hexHash([32]byte{4})}, operatorToken); rec.Code != http.StatusOK {
		t.Fatalf("member 3's report: %d %s", rec.Code, rec.Body)
	}
	var lag api.ReplicationLag
	rec = send(e, http.MethodGet, "/v1/msgbus/replication-lag", opsReadToken, "")
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &lag) != nil {
		t.Fatalf("replication-lag: %d %s", rec.Code, rec.Body)
	}
	want := map[uint64]string{1: api.HeadAgrees, 2: api.HeadAgrees, 3: api.HeadDiverged}
	for _, n := range lag.Nodes {
		if n.Head == nil || n.Head.Agreement != want[n.NodeID] {
			t.Errorf("node %d's head %+v, want agreement %s", n.NodeID, n.Head, want[n.NodeID])
		}
	}
	var snap api.ReplicationSnapshot
	rec = send(e, http.MethodGet, "/v1/ops/snapshots/replication", opsReadToken, "")
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &snap) != nil || len(snap.Replication.Nodes) != 3 ||
		snap.Replication.Nodes[2].Head == nil || snap.Replication.Nodes[2].Head.Agreement != api.HeadDiverged {
		t.Fatalf("replication snapshot: %d %s", rec.Code, rec.Body)
	}
	// A follower ahead of the leader's apply: unknown.
	if rec := report("10.0.0.3", api.HeadUpdate{NodeID: 3, AppliedIndex: 11}, operatorToken); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"unknown"`) {
		t.Fatalf("a report ahead: %d %s", rec.Code, rec.Body)
	}
}

// fakeClients records registrations.
type fakeClients struct {
	calls int
	err   error
}

func (f *fakeClients) Register(_ context.Context, id string, w common.Address, _ []byte) (api.ClientRegistration, error) {
	f.calls++
	return api.ClientRegistration{ClientID: id, Wallet: strings.ToLower(w.Hex()), RegisteredAt: time.Unix(0, 0)}, f.err
}

func (f *fakeClients) Binding(id string) (api.ClientRegistration, bool, error) {
	return api.ClientRegistration{ClientID: id}, id == "known", nil
}

// TestRegisterClientRoute: a malformed body is refused before the
// pipeline is asked; the pipeline's refusals keep their status.
func TestRegisterClientRoute(t *testing.T) {
	clients := &fakeClients{}
	e := New(Config{}, Deps{Cluster: leaderCluster{}, ClientRegistrations: clients}, zap.NewNop())
	sig := "0x" + strings.Repeat("11", 64) + "1b"
	good := `{"clientId":"app-1","wallet":"0x` + strings.Repeat("ab", 20) + `","signature":"` + sig + `"}`
	for _, body := range []string{"", `{"clientId":"a b","wallet":"0x` + strings.Repeat("ab", 20) + `","signature":"` + sig + `"}`,
		`{"clientId":"app-1","wallet":"0x12","signature":"` + sig + `"}`, `{"clientId":"app-1","wallet":"0x` + strings.Repeat("ab", 20) + `","signature":"0x12"}`} {
		if rec := send(e, http.MethodPost, "/v1/register-client", "", body); rec.Code != http.StatusBadRequest {
			t.Errorf("%q: %d %s", body, rec.Code, rec.Body)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/register-client", strings.NewReader(good))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || clients.calls != 0 {
		t.Fatalf("a form post: %d %s, %d calls", rec.Code, rec.Body, clients.calls)
	}
	if rec := send(e, http.MethodPost, "/v1/register-client", "", good); rec.Code != http.StatusOK || clients.calls != 1 {
		t.Fatalf("a good registration: %d %s", rec.Code, rec.Body)
	}
	clients.err = apierror.New(apierror.ClientBoundElsewhere, "bound elsewhere")
	if rec := send(e, http.MethodPost, "/v1/register-client", "", good); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "client_bound_elsewhere") {
		t.Fatalf("bound elsewhere: %d %s", rec.Code, rec.Body)
	}
	// Registrations take the proposals' per-client rate.
	limited := New(Config{IPLimiter: &allowN{n: 1}}, Deps{Cluster: leaderCluster{}, ClientRegistrations: &fakeClients{}}, zap.NewNop())
	if rec := send(limited, http.MethodPost, "/v1/register-client", "", good); rec.Code != http.StatusOK {
		t.Fatalf("the first registration of a client: %d %s", rec.Code, rec.Body)
	}
	if rec := send(limited, http.MethodPost, "/v1/register-client", "", good); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("past the client's rate: %d %s", rec.Code, rec.Body)
	}
	if rec := send(e, http.MethodGet, "/v1/register-client/known", "", ""); rec.Code != http.StatusOK {
		t.Errorf("a known client: %d %s", rec.Code, rec.Body)
	}
	if rec := send(e, http.MethodGet, "/v1/register-client/unknown", "", ""); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown client: %d %s", rec.Code, rec.Body)
	}
}
