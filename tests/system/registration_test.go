package system

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/tests/harness"
)

// callAs sends a JSON body with a bearer token ("" none) and returns the
// status and the body.
func callAs(t testing.TB, method, u, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// errorCodeOf is the code of an error body, "" for another body.
func errorCodeOf(body []byte) apierror.Code {
	var e apierror.Body
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return ""
	}
	return e.Error.Code
}

// TestRegistrationAcrossTheCluster (docs/adr/0038) on three validator
// processes: a client registration sent to a follower is bound on every
// validator and survives a kill -9 and restart; the same client id for
// another wallet is refused 409 and a signature not the wallet's 401, and
// neither changes any validator; each follower's head report appears in
// the leader's replication views, agreeing with the leader's segment
// chain; a validator's public URL is set with the operator's token only,
// and survives its restart.
func TestRegistrationAcrossTheCluster(t *testing.T) {
	c := newCluster(t, 3, "MOCK", "SVC_VALIDATOR_HEAD_REPORT_INTERVAL=200ms")
	leader := c.waitLeaderKnown(c.nodes)
	follower := c.others(leader)[0]
	var cfg api.BlockchainConfig
	if err := get(follower.url()+"/v1/blockchain/config", &cfg); err != nil {
		t.Fatal(err)
	}
	signer, _ := signing.NewSigner(signing.Domain{ChainID: cfg.ChainID, VerifyingContract: common.HexToAddress(cfg.ContractAddress)})
	aliceKey, _ := crypto.GenerateKey()
	bobKey, _ := crypto.GenerateKey()
	alice, bob := crypto.PubkeyToAddress(aliceKey.PublicKey), crypto.PubkeyToAddress(bobKey.PublicKey)
	register := func(n *node, clientID string, wallet common.Address, key *ecdsa.PrivateKey) (int, []byte) {
		t.Helper()
		sig, err := signer.SignClientRegistration(signing.ClientRegistration{ClientID: clientID, Wallet: wallet}, key)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(api.RegisterClientRequest{ClientID: clientID, Wallet: wallet.Hex(), Signature: hexutil.Encode(sig)})
		return callAs(t, http.MethodPost, n.url()+"/v1/register-client", "", string(body))
	}
	bindingOn := func(n *node, clientID string) (api.ClientRegistration, int) {
		var reg api.ClientRegistration
		code, body := callAs(t, http.MethodGet, n.url()+"/v1/register-client/"+clientID, "", "")
		_ = json.Unmarshal(body, &reg)
		return reg, code
	}

	// Through a follower, which forwards to the leader.
	code, body := register(follower, "mobile-app-1", alice, aliceKey)
	var bound api.ClientRegistration
	if code != http.StatusOK || json.Unmarshal(body, &bound) != nil || bound.Wallet != strings.ToLower(alice.Hex()) {
		t.Fatalf("registering through validator %d: %d %s", follower.id, code, body)
	}
	for _, n := range c.nodes {
		harness.Eventually(t, 20*time.Second, func() bool {
			got, code := bindingOn(n, "mobile-app-1")
			return code == http.StatusOK && got == bound
		})
	}
	if code, body := register(leader, "mobile-app-1", alice, aliceKey); code != http.StatusOK || !bytes.Contains(body, []byte(`"index":`)) {
		t.Fatalf("registering again: %d %s", code, body)
	}
	if code, body := register(follower, "mobile-app-1", bob, bobKey); code != http.StatusConflict || errorCodeOf(body) != apierror.ClientBoundElsewhere {
		t.Fatalf("another wallet: %d %s", code, body)
	}
	if code, body := register(follower, "mobile-app-2", alice, bobKey); code != http.StatusUnauthorized || errorCodeOf(body) != apierror.InvalidSignature {
		t.Fatalf("a signature not the wallet's: %d %s", code, body)
	}
	index, _ := c.converged(c.nodes...)
	for _, n := range c.nodes {
		if got, code := bindingOn(n, "mobile-app-1"); code != http.StatusOK || got != bound {
			t.Errorf("validator %d after the refusals: %d %+v", n.id, code, got)
		}
		if _, code := bindingOn(n, "mobile-app-2"); code != http.StatusNotFound {
			t.Errorf("validator %d bound a forged registration: %d", n.id, code)
		}
	}
	t.Logf("converged at index %d", index)

	// Every follower's head on the leader's views, agreeing.
	for _, view := range []string{"/v1/msgbus/replication-lag", "/v1/ops/snapshots/replication"} {
		harness.Eventually(t, 20*time.Second, func() bool {
			var lag api.ReplicationLag
			if view == "/v1/ops/snapshots/replication" {
				var snap api.ReplicationSnapshot
				if get(leader.url()+view, &snap) != nil {
					return false
				}
				lag = snap.Replication
			} else if get(leader.url()+view, &lag) != nil {
				return false
			}
			agreeing := 0
			for _, n := range lag.Nodes {
				if n.Head != nil && n.Head.Agreement == api.HeadAgrees && n.Head.AppliedIndex > 0 {
					agreeing++
				}
			}
			return lag.IsLeader && agreeing == len(c.nodes)
		})
	}
	var head api.Head
	if err := get(follower.url()+"/v1/head", &head); err != nil || head.NodeID != follower.id || head.AppliedIndex == 0 {
		t.Fatalf("/v1/head of validator %d: %+v %v", follower.id, head, err)
	}

	// The public URL: the operator's token only.
	const public = "https://validator-2.example.ngrok.app"
	for token, want := range map[string]int{"": http.StatusUnauthorized, "not-the-operator-token-0123": http.StatusForbidden} {
		if code, body := callAs(t, http.MethodPost, follower.url()+"/v1/ngrok-url", token, `{"url":"https://attacker.example"}`); code != want {
			t.Errorf("setting the URL with token %q: %d %s, want %d", token, code, body, want)
		}
	}
	if code, body := callAs(t, http.MethodPost, follower.url()+"/v1/ngrok-url", operatorToken, `{"url":"`+public+`"}`); code != http.StatusOK {
		t.Fatalf("setting the URL: %d %s", code, body)
	}

	// kill -9 and restart the follower: the binding and its URL stay.
	c.kill(follower)
	c.start(follower)
	harness.Eventually(t, 30*time.Second, func() bool {
		var got api.ClientRegistration
		return get(follower.url()+"/v1/register-client/mobile-app-1", &got) == nil && got == bound
	})
	var u api.PublicURL
	if err := get(follower.url()+"/v1/ngrok-url", &u); err != nil || u.URL != public || u.Source != api.PublicURLOperator {
		t.Fatalf("the URL after a restart: %+v %v", u, err)
	}
	if err := get(leader.url()+"/v1/ngrok-url", &u); err != nil || u.URL != "" || u.Source != api.PublicURLNone {
		t.Fatalf("the leader's URL (not replicated): %+v %v", u, err)
	}
}
