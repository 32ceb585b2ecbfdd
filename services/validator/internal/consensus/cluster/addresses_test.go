package cluster

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestMemberAddresses: literal addresses and resolved host names of the
// members' API URLs and peer addresses are known; others are not; a host
// that stops resolving keeps its addresses.
func TestMemberAddresses(t *testing.T) {
	members := []api.Member{
		{ID: 1, APIURL: "http://10.0.0.1:8090", PeerAddr: "10.0.1.1:7090"},
		{ID: 2, APIURL: "http://validator-2.internal:8090", PeerAddr: "[::ffff:10.0.1.2]:7090"},
	}
	dnsDown := false
	m := NewMemberAddresses(func() []api.Member { return members })
	m.resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
		if dnsDown || host != "validator-2.internal" {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr("10.0.0.2")}, nil
	}
	if m.Contains(netip.MustParseAddr("10.0.0.1")) {
		t.Fatal("an address is known before the first resolution")
	}
	m.update(context.Background())
	for _, a := range []string{"10.0.0.1", "10.0.1.1", "10.0.0.2", "10.0.1.2", "::ffff:10.0.0.2"} {
		if !m.Contains(netip.MustParseAddr(a)) {
			t.Errorf("%s is a member's address", a)
		}
	}
	if m.Contains(netip.MustParseAddr("10.0.0.3")) {
		t.Error("10.0.0.3 is no member's")
	}
	dnsDown = true
	m.update(context.Background())
	if !m.Contains(netip.MustParseAddr("10.0.0.2")) {
		t.Error("a resolution failure dropped a member's address")
	}
	members = members[:1]
	m.update(context.Background())
	if m.Contains(netip.MustParseAddr("10.0.1.2")) {
		t.Error("a removed member's address is still known")
	}
}
