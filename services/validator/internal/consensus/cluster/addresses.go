package cluster

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
)

// DefaultAddressRefresh is how often MemberAddresses resolves the members'
// hosts again.
const DefaultAddressRefresh = 5 * time.Second

// MemberAddresses are the IP addresses of the members' hosts (their API
// URLs' and peer addresses'), resolved in the background so that the HTTP
// server can ask on accept, from memory, whether a connection comes from
// another validator: followers forward many clients' requests from one
// address, which a per-client cap must not count as one client.
type MemberAddresses struct {
	members func() []api.Member
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	refresh time.Duration
	set     atomic.Pointer[map[netip.Addr]struct{}]
}

// NewMemberAddresses follows the members members returns (View.Members).
func NewMemberAddresses(members func() []api.Member) *MemberAddresses {
	m := &MemberAddresses{members: members, refresh: DefaultAddressRefresh,
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}}
	m.set.Store(&map[netip.Addr]struct{}{})
	return m
}

// Contains reports whether a is the address of a member's host, as of the
// last resolution. It never blocks.
func (m *MemberAddresses) Contains(a netip.Addr) bool {
	_, ok := (*m.set.Load())[a.Unmap()]
	return ok
}

// Run resolves the members' hosts now and every refresh until ctx ends.
// When a host does not resolve, the addresses known before stay known.
func (m *MemberAddresses) Run(ctx context.Context) {
	tick := time.NewTicker(m.refresh)
	defer tick.Stop()
	for {
		m.update(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// update resolves every member's hosts once.
func (m *MemberAddresses) update(ctx context.Context) {
	previous := *m.set.Load()
	next := map[netip.Addr]struct{}{}
	for _, member := range m.members() {
		for _, host := range memberHosts(member) {
			if a, err := netip.ParseAddr(host); err == nil {
				next[a.Unmap()] = struct{}{}
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			addrs, err := m.resolve(rctx, host)
			cancel()
			if err != nil {
				for a := range previous { // keep what it had: a DNS hiccup must not cap a peer
					next[a] = struct{}{}
				}
				continue
			}
			for _, a := range addrs {
				next[a.Unmap()] = struct{}{}
			}
		}
	}
	m.set.Store(&next)
}

// memberHosts are the host names or addresses of a member's API URL and
// peer address.
func memberHosts(m api.Member) []string {
	var hosts []string
	if u, err := url.Parse(m.APIURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	if host, _, err := net.SplitHostPort(m.PeerAddr); err == nil && host != "" {
		hosts = append(hosts, host)
	}
	return hosts
}
