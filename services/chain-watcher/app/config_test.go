package app

import (
	"strings"
	"testing"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
)

// FuzzRPCURLs: any RPC_URL value splits into trimmed, non-empty items
// without commas, each accepted or refused without panicking, and an
// accepted one has a host to name it by.
func FuzzRPCURLs(f *testing.F) {
	f.Add("http://127.0.0.1:8545")
	f.Add(" https://a.example/v3/KEY , ,wss://b.example:8546?x=1")
	f.Add("http://[::1]:8545,ws://user:pw@h/p")
	f.Add("%zz,http://%41")
	f.Fuzz(func(t *testing.T, raw string) {
		c := Config{RPCURL: raw}
		for i, u := range c.RPCURLs() {
			if u == "" || strings.TrimSpace(u) != u || strings.Contains(u, ",") {
				t.Fatalf("item %q of %q", u, raw)
			}
			if checkRPCURL(u) == nil && !strings.Contains(rpcpool.Name(i, u), ":") {
				t.Fatalf("accepted %q has no host to name it by", u)
			}
		}
		_ = c.Validate()
	})
}
