package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// runAt runs a validator of cfg until stop is called, and returns its URL
// once it leads.
func runAt(t *testing.T, cfg Config) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- Run(ctx, cfg, zaptest.NewLogger(t), ready) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("validator stopped with %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		stopped = true
		t.Fatalf("validator did not start: %v", err)
	}
	waitFor(t, func() bool {
		var h map[string]any
		return getJSON(t, base+"/health", &h) == http.StatusOK && h["role"] == "LEADER"
	})
	return base, stop
}

// registration is a signed POST /v1/register-client body: signer signs
// the binding of clientID to wallet's address.
func registration(t *testing.T, clientID string, wallet, signer author) string {
	t.Helper()
	s, _ := signing.NewSigner(signing.Domain{ChainID: 1337, VerifyingContract: testContract})
	sig, err := s.SignClientRegistration(signing.ClientRegistration{ClientID: clientID, Wallet: wallet.wallet}, signer.key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.RegisterClientRequest{ClientID: clientID, Wallet: wallet.wallet.Hex(), Signature: hexutil.Encode(sig)})
	return string(body)
}

// callJSON sends method to u with a JSON body and a bearer token ("" none)
// and decodes the answer into out.
func callJSON(t *testing.T, method, u, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return roundTrip(t, req, out)
}

// TestRegistrationRoutes: a client id binds to the wallet that signed it,
// once: the same wallet again answers the binding, another wallet 409, a
// signature by anyone but the wallet 401 with nothing bound, a wallet past
// the cap of clients 409. The public
// URL is the setting's until the operator sets one, which only the
// operator's token may. A restart keeps the bindings and the operator's
// URL; /v1/head names the segment-chain head.
func TestRegistrationRoutes(t *testing.T) {
	const operator = "operator-token-0123456789"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := mockConfig(t.TempDir())
	cfg.HTTPAddr = l.Addr().String()
	l.Close()
	cfg.OperatorTokens, cfg.PublicURL = operator, "https://setting.example"
	base, stop := runAt(t, cfg)

	alice, bob := newAuthor(t), newAuthor(t)
	var first, again api.ClientRegistration
	if code := callJSON(t, http.MethodPost, base+"/v1/register-client", "", registration(t, "app-1", alice, alice), &first); code != http.StatusOK ||
		first.ClientID != "app-1" || first.Wallet != strings.ToLower(alice.wallet.Hex()) || first.Index == 0 {
		t.Fatalf("registering app-1: %d %+v", code, first)
	}
	if code := callJSON(t, http.MethodPost, base+"/v1/register-client", "", registration(t, "app-1", alice, alice), &again); code != http.StatusOK || again != first {
		t.Fatalf("registering app-1 again: %d %+v, want %+v", code, again, first)
	}
	var refused apierror.Body
	if code := callJSON(t, http.MethodPost, base+"/v1/register-client", "", registration(t, "app-1", bob, bob), &refused); code != http.StatusConflict ||
		refused.Error.Code != apierror.ClientBoundElsewhere || refused.Error.Details["wallet"] != first.Wallet {
		t.Fatalf("app-1 for another wallet: %d %+v", code, refused.Error)
	}
	// Bob signs a binding of alice's wallet: refused, nothing bound.
	if code := callJSON(t, http.MethodPost, base+"/v1/register-client", "", registration(t, "app-2", alice, bob), &refused); code != http.StatusUnauthorized ||
		refused.Error.Code != apierror.InvalidSignature {
		t.Fatalf("a signature not the wallet's: %d %+v", code, refused.Error)
	}
	if code := getJSON(t, base+"/v1/register-client/app-2", &refused); code != http.StatusNotFound {
		t.Fatalf("app-2 after a forged registration: %d %+v", code, refused.Error)
	}

	// The cap per wallet: app-1 and 63 more, then a refusal naming it.
	for i := range state.MaxClientsPerWallet - 1 {
		var reg api.ClientRegistration
		if code := callJSON(t, http.MethodPost, base+"/v1/register-client", "", registration(t, fmt.Sprintf("alice-%02d", i), alice, alice), &reg); code != http.StatusOK {
			t.Fatalf("registering client %d of alice: %d", i+2, code)
		}
	}
	if code := callJSON(t, http.MethodPost, base+"/v1/register-client", "", registration(t, "one-too-many", alice, alice), &refused); code != http.StatusConflict ||
		refused.Error.Code != apierror.ClientLimitReached || refused.Error.Details["limit"] != float64(state.MaxClientsPerWallet) {
		t.Fatalf("a client past the cap: %d %+v", code, refused.Error)
	}
	if code := getJSON(t, base+"/v1/register-client/one-too-many", &refused); code != http.StatusNotFound {
		t.Fatalf("the client past the cap is bound: %d", code)
	}

	var head api.Head
	if code := getJSON(t, base+"/v1/head", &head); code != http.StatusOK || head.AppliedIndex < first.Index || head.NodeID != 1 || head.Term == 0 ||
		len(head.StateHash) != 66 {
		t.Fatalf("/v1/head: %d %+v", code, head)
	}

	var u api.PublicURL
	if code := getJSON(t, base+"/v1/ngrok-url", &u); code != http.StatusOK || u.URL != cfg.PublicURL || u.Source != api.PublicURLSetting {
		t.Fatalf("the setting's URL: %d %+v", code, u)
	}
	for _, c := range []struct {
		token, body string
		want        int
		code        apierror.Code
	}{
		{"", `{"url":"https://attacker.example"}`, http.StatusUnauthorized, apierror.Unauthorized},
		{"wrong-token-0123456789", `{"url":"https://attacker.example"}`, http.StatusForbidden, apierror.Forbidden},
		{operator, `{"url":"https://user:pw@v1.example"}`, http.StatusBadRequest, apierror.InvalidField},
		{operator, `{"url":"ftp://v1.example"}`, http.StatusBadRequest, apierror.InvalidField},
	} {
		if code := callJSON(t, http.MethodPost, base+"/v1/ngrok-url", c.token, c.body, &refused); code != c.want || refused.Error.Code != c.code {
			t.Errorf("%q with token %q: %d %+v, want %d %s", c.body, c.token, code, refused.Error, c.want, c.code)
		}
	}
	if code := getJSON(t, base+"/v1/ngrok-url", &u); u.URL != cfg.PublicURL {
		t.Fatalf("refused changes changed the URL: %d %+v", code, u)
	}
	const public = "https://v1-abc.ngrok-free.app/ledger"
	if code := callJSON(t, http.MethodPost, base+"/v1/ngrok-url", operator, `{"url":"`+public+`"}`, &u); code != http.StatusOK ||
		u.URL != public || u.Source != api.PublicURLOperator {
		t.Fatalf("the operator's URL: %d %+v", code, u)
	}

	stop()
	base, _ = runAt(t, cfg)
	var kept api.ClientRegistration
	if code := getJSON(t, base+"/v1/register-client/app-1", &kept); code != http.StatusOK || kept != first {
		t.Fatalf("app-1 after a restart: %d %+v, want %+v", code, kept, first)
	}
	if code := getJSON(t, base+"/v1/ngrok-url", &u); code != http.StatusOK || u.URL != public || u.Source != api.PublicURLOperator {
		t.Fatalf("the URL after a restart: %d %+v", code, u)
	}
}
