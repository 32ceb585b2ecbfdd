package api

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"
)

// resolver resolves member host names for isMemberAddress, caching each
// answer for a minute: members are few, and the check runs per forwarded
// proposal.
type resolver struct {
	mu    sync.Mutex
	cache map[string]resolved
}

type resolved struct {
	addrs []string
	at    time.Time
}

const resolveTTL = time.Minute

func (s *Server) resolve(host string) ([]string, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []string{ip.Unmap().String()}, nil
	}
	r := &s.resolver
	r.mu.Lock()
	if c, ok := r.cache[host]; ok && time.Since(c.at) < resolveTTL {
		r.mu.Unlock()
		return c.addrs, nil
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.cache == nil {
		r.cache = map[string]resolved{}
	}
	r.cache[host] = resolved{addrs, time.Now()}
	r.mu.Unlock()
	return addrs, nil
}
