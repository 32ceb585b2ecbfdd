package httpserver

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// maxHops bounds the forwarding entries Clients walks through: a chain of
// trusted proxies longer than this is a misconfiguration or an attack.
const maxHops = 16

// Clients tells who a request comes from: the connection's address, or,
// when that is a trusted proxy, the client the proxy names. Its zero value
// trusts no proxy. It is safe for concurrent use.
type Clients struct {
	trusted []netip.Prefix
	// forwarded is the header trusted proxies name the client in, in
	// canonical form.
	forwarded string
}

// NewClients returns the client resolution of cfg (TrustedProxies and
// ForwardedHeader, after defaults).
func NewClients(cfg Config) (*Clients, error) {
	cfg = cfg.WithDefaults()
	trusted, err := ParseTrusted(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	return &Clients{trusted: trusted, forwarded: http.CanonicalHeaderKey(cfg.ForwardedHeader)}, nil
}

// ParseTrusted parses addresses ("10.0.0.1", "::1") and CIDR prefixes
// ("10.0.0.0/8", "fd00::/8") into prefixes.
func ParseTrusted(items []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(items))
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %v", item, err)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("trusted proxy %q is neither an address nor a CIDR prefix", item)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Trusted reports whether a is a trusted proxy's address.
func (c *Clients) Trusted(a netip.Addr) bool {
	if c == nil {
		return false
	}
	a = a.Unmap()
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Addr is the address of the client r comes from. The connection's address
// is the client unless it is a trusted proxy; then the forwarding header is
// walked from the right (the entry the nearest proxy appended) past every
// trusted hop, and the first untrusted address is the client. An entry that
// does not parse stops the walk at the trusted hop that passed it on. The
// zero Addr when r's RemoteAddr is not an address (in-process tests' "").
func (c *Clients) Addr(r *http.Request) netip.Addr {
	peer := RemoteAddr(r)
	if !peer.IsValid() || !c.Trusted(peer) {
		return peer
	}
	hops := forwardedFor(r.Header.Values(c.forwarded), c.forwarded == HeaderForwarded)
	client := peer
	for i := len(hops) - 1; i >= 0 && len(hops)-i <= maxHops; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			return client
		}
		client = hop
		if !c.Trusted(hop) {
			return hop
		}
	}
	return client
}

// Key is ClientKey(Addr(r)): what every per-client limit counts by.
func (c *Clients) Key(r *http.Request) string {
	return ClientKey(c.Addr(r))
}

// IPExtractor is Addr as echo's IPExtractor (echo.Context.RealIP), for the
// servers built on echo: e.IPExtractor = clients.IPExtractor(). Limits
// still count by ClientKey of it.
func (c *Clients) IPExtractor() func(*http.Request) string {
	return func(r *http.Request) string {
		if a := c.Addr(r); a.IsValid() {
			return a.String()
		}
		return r.RemoteAddr
	}
}

// ClientKey groups the addresses one client is likely to hold: an IPv4
// address is its own key, an IPv6 address is keyed by its /64 (a host
// commonly gets a whole /64 and may pick any address in it). An invalid
// address is the key "".
func ClientKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
	}
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// KeyOfAddr is ClientKey of a "host:port" or "host" string (an echo
// RealIP, a RemoteAddr); a string that is not an address is its own key.
func KeyOfAddr(s string) string {
	if a, ok := parseHop(s); ok {
		return ClientKey(a)
	}
	return s
}

// RemoteAddr is the address of r's connection; the zero Addr when
// RemoteAddr does not hold one.
func RemoteAddr(r *http.Request) netip.Addr {
	a, _ := parseHop(r.RemoteAddr)
	return a
}

// forwardedFor returns the hops the header values name, leftmost (the
// original client, as claimed) first. Several header lines are one list in
// order (RFC 9110, 5.3).
func forwardedFor(values []string, rfc7239 bool) []string {
	var hops []string
	for _, v := range values {
		if rfc7239 {
			hops = append(hops, forwardedElements(v)...)
			continue
		}
		for item := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(item))
		}
	}
	return hops
}

// forwardedElements returns the for= value of each element of a Forwarded
// header (RFC 7239): elements are comma-separated, pairs within one are
// semicolon-separated, and a value may be a quoted string (which may hold
// either separator). An element without for= yields "" (not an address).
func forwardedElements(v string) []string {
	var out []string
	var forValue string
	var key, val strings.Builder
	inValue, quoted, escaped := false, false, false
	endPair := func() {
		if strings.EqualFold(strings.TrimSpace(key.String()), "for") {
			forValue = strings.TrimSpace(val.String())
		}
		key.Reset()
		val.Reset()
		inValue = false
	}
	for i := 0; i < len(v); i++ {
		ch := v[i]
		switch {
		case escaped:
			val.WriteByte(ch)
			escaped = false
		case quoted && ch == '\\':
			escaped = true
		case ch == '"' && inValue:
			quoted = !quoted
		case quoted:
			val.WriteByte(ch)
		case ch == '=' && !inValue:
			inValue = true
		case ch == ';':
			endPair()
		case ch == ',':
			endPair()
			out = append(out, forValue)
			forValue = ""
		case inValue:
			val.WriteByte(ch)
		default:
			key.WriteByte(ch)
		}
	}
	endPair()
	return append(out, forValue)
}

// parseHop parses one hop: an address, with or without a port, IPv6 in
// brackets or not. Zones are refused: they name an interface of the
// sender, not a client.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else {
		s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}
