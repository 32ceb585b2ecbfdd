package system

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// The attack suite: each attack the trust boundaries are built against,
// performed against validator processes in TESTNET mode with the production
// defaults, while an author keeps making paid writes. Every attack ends the
// same way: the documented refusal, nothing it aimed at changed, every
// validator still up and agreeing on the state hash, and every paid write
// acknowledged during the attack committed.

// submitToken is the token of the submit lane of the attacked cluster: a
// credential an author's application holds, used here on the operator's
// routes.
const submitToken = "system-submit-token-0123456789"

// attackedCluster is a TESTNET cluster under attack, with an author
// writing through it.
type attackedCluster struct {
	*cluster
	author *paidWriter
}

// newAttackedCluster starts three TESTNET validators whose operator and
// submit lanes are guarded (the ops-read lane is open: they listen on
// loopback), and an author making paid writes through them until the test
// ends.
func newAttackedCluster(t *testing.T) *attackedCluster {
	t.Helper()
	c := newCluster(t, 3, "TESTNET", "SVC_VALIDATOR_SUBMIT_TOKENS="+submitToken)
	c.waitLeader()
	a := &attackedCluster{cluster: c, author: startPaidWriter(t, c)}
	a.author.waitCommitted(t, 1)
	return a
}

// paidWriter pays for writes on chain and submits them, one after the
// other through each validator in turn, recording the acknowledged ones.
type paidWriter struct {
	key    *ecdsa.PrivateKey
	wallet common.Address
	mu     sync.Mutex
	acked  []common.Hash // answered 202
	done   map[common.Hash]bool
	errs   []string
}

func startPaidWriter(t *testing.T, c *cluster) *paidWriter {
	t.Helper()
	key := devchain.DevAccounts[3].MustKey()
	w := &paidWriter{key: key, wallet: crypto.PubkeyToAddress(key.PublicKey), done: map[common.Hash]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		for i := 0; ctx.Err() == nil; i++ {
			w.writeOne(ctx, c, c.nodes[i%len(c.nodes)])
		}
	}()
	return w
}

// writeOne pays for one write and submits it through n.
func (w *paidWriter) writeOne(ctx context.Context, c *cluster, n *node) {
	client := c.client(n)
	client.Token = submitToken
	cfg, err := client.BlockchainConfig(ctx)
	if err != nil {
		return // the validator may be busy; the next round tries another
	}
	p := &ledgerclient.Proposal{Message: []byte(`{"title":"written during an attack"}`), ContentType: "page", ID: ledgerclient.NewProposalID()}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	receipt, err := ledgerclient.Pay(pctx, c.net.Chain.Client(), w.key, c.net.Chain.ChainID, c.net.Chain.PaymentLedger, p.ID, p.Class)
	if err != nil {
		return
	}
	form, _, err := ledgerclient.Form(cfg, w.key, p, receipt.TxHash)
	if err != nil {
		w.problem("form: %v", err)
		return
	}
	sub, err := client.Submit(pctx, proposal.Write, form)
	if err != nil || sub.HTTPStatus != http.StatusAccepted {
		if ctx.Err() == nil {
			w.problem("a paid write through validator %d: %d %v", n.id, sub.HTTPStatus, err)
		}
		return
	}
	w.mu.Lock()
	w.acked = append(w.acked, p.ID)
	w.mu.Unlock()
	if s, err := client.WaitFinal(pctx, p.ID, nil); err == nil && api.Committed(s.Status) {
		w.mu.Lock()
		w.done[p.ID] = true
		w.mu.Unlock()
	}
}

func (w *paidWriter) problem(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, fmt.Sprintf(format, a...))
}

// waitCommitted waits until at least n more writes than now committed.
func (w *paidWriter) waitCommitted(t *testing.T, n int) {
	t.Helper()
	w.mu.Lock()
	want := len(w.done) + n
	w.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		w.mu.Lock()
		got, errs := len(w.done), slices.Clone(w.errs)
		w.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("the author's writes failed during the attack: %v", errs)
		}
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the author's writes stalled: %d committed, want %d", got, want)
		}
		time.Sleep(50 * time.Millisecond) // polling the writer's record
	}
}

// unharmed checks the end of every attack: the members, the author's GC
// account and writes unchanged by it, every validator up and agreeing, and
// every write acknowledged so far committed.
func (a *attackedCluster) unharmed(t *testing.T, members ledgerclient.Members, account api.GcAccount) {
	t.Helper()
	for _, n := range a.nodes {
		if !n.alive() {
			t.Fatalf("validator %d is down", n.id)
		}
	}
	a.author.waitCommitted(t, 2) // writes go on, through every validator in turn
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range a.nodes {
		now, err := a.client(n).ClusterMembers(ctx)
		if err != nil || !slices.Equal(now.Voters, members.Voters) || !slices.Equal(now.Learners, members.Learners) || len(now.Members) != len(members.Members) {
			t.Fatalf("membership on validator %d: %+v %v, want %+v", n.id, now, err, members)
		}
	}
	acc := a.account(t)
	if acc.Limit != account.Limit || acc.ExecutedDebt != account.ExecutedDebt || acc.PendingDebt != account.PendingDebt || acc.Paid != account.Paid {
		t.Fatalf("the author's GC account changed: %+v, was %+v", acc, account)
	}
	a.converged(a.nodes...)
	a.author.mu.Lock()
	acked := slices.Clone(a.author.acked)
	a.author.mu.Unlock()
	client := a.client(a.nodes[0])
	client.Token = submitToken
	for _, id := range acked {
		s, err := client.WaitFinal(ctx, id, nil)
		if err != nil || !api.Committed(s.Status) {
			t.Fatalf("paid write %s acknowledged during the attack: %s %v", id.Hex(), s.Status, err)
		}
	}
}

func (a *attackedCluster) account(t *testing.T) api.GcAccount {
	t.Helper()
	client := a.client(a.nodes[0])
	client.Token = submitToken
	acc, err := client.GcAccount(context.Background(), a.author.wallet)
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

func (a *attackedCluster) members(t *testing.T) ledgerclient.Members {
	t.Helper()
	m, err := a.client(a.nodes[0]).ClusterMembers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// attackRequest sends one request of an attacker to validator n.
func attackRequest(t *testing.T, n *node, method, path, contentType, token, body string) (int, apierror.Body) {
	t.Helper()
	req, err := http.NewRequest(method, n.url()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e apierror.Body
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e
}

// TestAttackOperatorLane: the operator's routes of a TESTNET cluster, tried
// by someone without the operator's token — no token, an author's submit
// token, a made-up one, and a cross-site form post — through every
// validator. Each is refused as the contract says (401 without a token, 403
// with one not permitted, 400 for what a browser form can send) and
// changes nothing: without the lanes, the first request set the author's
// limit and blocked its writes.
func TestAttackOperatorLane(t *testing.T) {
	a := newAttackedCluster(t)
	members, account := a.members(t), a.account(t)
	wallet := strings.ToLower(a.author.wallet.Hex())
	phantom := `{"id":9,"peerAddr":"127.0.0.1:1","apiUrl":"http://127.0.0.1:1"}`
	routes := []struct{ name, method, path, body string }{
		{"set-limit", http.MethodPost, "/v1/gc/account/" + wallet + "/set-limit", `{"limit":"0.000001"}`},
		{"set-limit in the query", http.MethodPost, "/v1/gc/account/" + wallet + "/set-limit?limit=0.000001", ""},
		{"execute-pending", http.MethodPost, "/v1/gc/account/" + wallet + "/execute-pending", `{}`},
		{"pay", http.MethodPost, "/v1/gc/account/" + wallet + "/pay", `{"txHash":"` + common.HexToHash("0x1").Hex() + `"}`},
		{"add a phantom member", http.MethodPost, "/v1/cluster/members", phantom},
		{"remove a member", http.MethodDelete, "/v1/cluster/members/3", ""},
	}
	callers := []struct {
		name, token, contentType string
		want                     int
		code                     apierror.Code
	}{
		{"no token", "", "application/json", http.StatusUnauthorized, apierror.Unauthorized},
		{"a submit token", submitToken, "application/json", http.StatusForbidden, apierror.Forbidden},
		{"a wrong token", "attacker-token-0123456789", "application/json", http.StatusForbidden, apierror.Forbidden},
		// A form on another site: a browser sends no bearer token with it.
		{"a cross-site form post", "", "application/x-www-form-urlencoded", http.StatusUnauthorized, apierror.Unauthorized},
		// Even with the operator's token (a proxy that adds it), what a
		// form can send is refused.
		{"a form post with the operator token", operatorToken, "application/x-www-form-urlencoded", http.StatusBadRequest, apierror.InvalidField},
	}
	for _, caller := range callers {
		t.Run(caller.name, func(t *testing.T) {
			for _, r := range routes {
				for _, n := range a.nodes {
					code, e := attackRequest(t, n, r.method, r.path, caller.contentType, caller.token, r.body)
					if code != caller.want || e.Error == nil || e.Error.Code != caller.code {
						t.Errorf("%s through validator %d: %d %+v, want %d %s", r.name, n.id, code, e.Error, caller.want, caller.code)
					}
				}
			}
			a.unharmed(t, members, account)
		})
	}
}

// fromAddress is an HTTP client whose connections come from the loopback
// address local (127.0.0.0/8 is all this host's), so that an attacker's
// connections do not share the author's client budget.
func fromAddress(local string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
}

// TestAttackHTTPPort: the HTTP port of a TESTNET validator under a
// slow-body flood and spoofed client addresses. 1,000 connections from one
// address that each declare a 1 MB proposal and trickle it hold at most the
// per-client connection cap (the rest are closed at once); event streams
// are counted per client across both stream routes, and X-Forwarded-For
// from an address that is not a trusted proxy does not make a client
// someone else. Without the caps every trickling connection stayed open
// and grew a buffer to its declared length; without the shared budget the
// 11th stream, on the other route, was served; and a follower that streamed
// the trickling bodies on to the leader used up its connections there, so
// that every write forwarded through it failed.
func TestAttackHTTPPort(t *testing.T) {
	a := newAttackedCluster(t)
	members, account := a.members(t), a.account(t)
	// A follower: it forwards proposals to the leader, so a flood of it
	// must not reach the leader's connections.
	leader := a.waitLeader()
	target := a.others(leader)[0]

	t.Run("1,000 trickling connections", func(t *testing.T) {
		const flood = 1000
		rssBefore, err := harness.ProcMemory(target.cmd.Process.Pid, "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
		conns := make([]net.Conn, 0, flood)
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range flood {
			c, err := dialer.Dial("tcp", target.httpAddr)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			conns = append(conns, c)
			// A 1 MB proposal announced (with an author's token, so the
			// validator reads it), one byte of it sent.
			_, _ = io.WriteString(c, "POST /v1/propose-write HTTP/1.1\r\nHost: validator\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
				"Authorization: Bearer "+submitToken+"\r\nContent-Length: 1000000\r\n\r\nm")
		}
		// A connection over the cap is closed by the validator: its read
		// ends (EOF or reset). One within it stays open (the read times out).
		open := 0
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				open++
			}
		}
		if open == 0 || open > 256 {
			t.Fatalf("%d of %d trickling connections are open, want between 1 and the per-client cap 256", open, flood)
		}
		// What is held is what arrived, not what was announced: 256 × 1 MB
		// would be 256 MB.
		rss, err := harness.ProcMemory(target.cmd.Process.Pid, "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d of %d trickling connections held open; validator RSS %d → %d KiB", open, flood, rssBefore>>10, rss>>10)
		if rss-rssBefore > 64<<20 {
			t.Fatalf("the validator's RSS grew by %d MiB during the flood", (rss-rssBefore)>>20)
		}
		// Meanwhile the validator answers everyone else.
		var h map[string]any
		if err := harness.GetJSON(fromAddress("127.0.0.3"), 5*time.Second, target.url()+"/health", &h); err != nil || h["status"] != "ok" {
			t.Fatalf("health during the flood: %v %v", err, h)
		}
		a.unharmed(t, members, account)
	})

	t.Run("11 streams across both routes with spoofed addresses", func(t *testing.T) {
		client := fromAddress("127.0.0.4")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		open := func(route string, i int) (int, apierror.Body) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.url()+route, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Each claims to be another client: not believed from an
			// address that is not a trusted proxy.
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e apierror.Body
			if resp.StatusCode != http.StatusOK {
				_ = json.NewDecoder(resp.Body).Decode(&e)
				resp.Body.Close()
			}
			return resp.StatusCode, e // an open stream's body stays open until ctx ends
		}
		routes := []string{"/v1/events/stream", "/v1/ops/events/stream"}
		for i := range 10 {
			if code, e := open(routes[i%2], i); code != http.StatusOK {
				t.Fatalf("stream %d on %s: %d %+v", i+1, routes[i%2], code, e.Error)
			}
		}
		for i, route := range routes {
			if code, e := open(route, 10+i); code != http.StatusTooManyRequests || e.Error == nil || e.Error.Code != apierror.RateLimited {
				t.Fatalf("an 11th stream on %s: %d %+v, want 429 rate_limited", route, code, e.Error)
			}
		}
		// Another client still gets its streams.
		if code, e := func() (int, apierror.Body) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target.url()+routes[0], nil)
			resp, err := fromAddress("127.0.0.5").Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, apierror.Body{}
		}(); code != http.StatusOK {
			t.Fatalf("another client's stream: %d %+v", code, e.Error)
		}
		a.unharmed(t, members, account)
	})
}
