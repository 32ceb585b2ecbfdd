package app

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/contentledger/contentledger/services/validator/internal/access"
)

const strongToken = "0123456789abcdef0123"

// TestOpenLanes: outside MOCK a validator refuses to start with an open
// operator lane, and with an open ops-read lane on a listener that is not
// loopback unless OPEN_OPS_READ allows it (loudly).
func TestOpenLanes(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // in the error; "" for none
	}{
		{"mock runs open", func(c *Config) { c.Mode, c.HTTPAddr = Mock, "0.0.0.0:8090" }, ""},
		{"testnet without tokens", func(c *Config) {}, "operator lane"},
		{"testnet, ops-read only", func(c *Config) { c.OpsReadTokens = strongToken }, "operator lane"},
		{"testnet, operator on loopback", func(c *Config) { c.OperatorTokens = strongToken }, ""},
		{"testnet, operator on all addresses", func(c *Config) { c.OperatorTokens, c.HTTPAddr = strongToken, "0.0.0.0:8090" }, "ops-read lane"},
		{"testnet, open ops-read allowed", func(c *Config) {
			c.OperatorTokens, c.HTTPAddr, c.OpenOpsRead = strongToken, ":8090", true
		}, ""},
		{"testnet, both guarded", func(c *Config) { c.OperatorTokens, c.OpsReadTokens, c.HTTPAddr = strongToken, strongToken, ":8090" }, ""},
		{"mainnet, auth token", func(c *Config) { c.Mode, c.AuthToken, c.HTTPAddr = Mainnet, strongToken, "10.0.0.1:8090" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Mode: Testnet, HTTPAddr: "127.0.0.1:8090"}
			tc.edit(&cfg)
			tokens, err := cfg.staticTokens()
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.WarnLevel)
			err = cfg.openLanes(tokens, zap.New(core))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
			if warned := logs.FilterMessageSnippet("OPS-READ LANE IS OPEN").Len() > 0; warned != cfg.OpenOpsRead {
				t.Fatalf("warned %v with OPEN_OPS_READ %v", warned, cfg.OpenOpsRead)
			}
		})
	}
}

// TestStaticTokens: AUTH_TOKEN opens every lane, a lane's list its own;
// outside MOCK a short token is refused without being named.
func TestStaticTokens(t *testing.T) {
	cfg := Config{Mode: Testnet, AuthToken: strongToken, OperatorTokens: "operator-0123456789, operator-9876543210"}
	tokens, err := cfg.staticTokens()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range access.Lanes() {
		if tokens.Check(l, strongToken) != access.Granted {
			t.Errorf("AUTH_TOKEN does not open %s", l)
		}
	}
	if tokens.Check(access.Operator, "operator-9876543210") != access.Granted || tokens.Check(access.OpsRead, "operator-9876543210") != access.Denied {
		t.Error("OPERATOR_TOKENS")
	}
	cfg.OpsReadTokens = "weak"
	if _, err := cfg.staticTokens(); err == nil || strings.Contains(err.Error(), "weak") || !strings.Contains(err.Error(), "OPS_READ_TOKENS") {
		t.Fatalf("a weak token: %v", err)
	}
	cfg.Mode = Mock
	if _, err := cfg.staticTokens(); err != nil {
		t.Fatalf("MOCK takes any token: %v", err)
	}
}
