package httpserver

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func request(remote string, header map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for k, v := range header {
		r.Header.Add(k, v)
	}
	return r
}

func mustClients(t testing.TB, cfg Config) *Clients {
	t.Helper()
	c, err := NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientAddr(t *testing.T) {
	xff := mustClients(t, Config{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::1"}})
	rfc := mustClients(t, Config{TrustedProxies: []string{"10.0.0.1"}, ForwardedHeader: "forwarded"})
	cases := []struct {
		name    string
		clients *Clients
		remote  string
		header  map[string]string
		want    string
	}{
		{"no header", xff, "192.0.2.7:1234", nil, "192.0.2.7"},
		{"untrusted sender's header ignored", xff, "192.0.2.7:1234", map[string]string{"X-Forwarded-For": "203.0.113.9"}, "192.0.2.7"},
		{"trusted proxy believed", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "203.0.113.9"}, "203.0.113.9"},
		{"spoofed left entries skipped", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops walked", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "1.1.1.1, 203.0.113.9, 10.9.9.9"}, "203.0.113.9"},
		{"all trusted: leftmost", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "10.2.2.2,10.3.3.3"}, "10.2.2.2"},
		{"garbage stops at the proxy", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "1.1.1.1, nonsense"}, "10.1.2.3"},
		{"port and brackets", xff, "[2001:db8:ffff::1]:80", map[string]string{"X-Forwarded-For": "[2001:db8:1::5]:443"}, "2001:db8:1::5"},
		{"zone refused", xff, "10.1.2.3:80", map[string]string{"X-Forwarded-For": "fe80::1%eth0"}, "10.1.2.3"},
		{"mapped trusted", xff, "[::ffff:10.1.2.3]:80", map[string]string{"X-Forwarded-For": "203.0.113.9"}, "203.0.113.9"},
		{"other header not read", xff, "10.1.2.3:80", map[string]string{"Forwarded": "for=203.0.113.9"}, "10.1.2.3"},
		{"forwarded", rfc, "10.0.0.1:80", map[string]string{"Forwarded": `for=1.1.1.1;proto=https, For="[2001:db8::7]:4711";by=x`}, "2001:db8::7"},
		{"forwarded quoted separators", rfc, "10.0.0.1:80", map[string]string{"Forwarded": `for=203.0.113.4;host="a,b;c"`}, "203.0.113.4"},
		{"forwarded obfuscated", rfc, "10.0.0.1:80", map[string]string{"Forwarded": `for=_hidden`}, "10.0.0.1"},
		{"forwarded without for", rfc, "10.0.0.1:80", map[string]string{"Forwarded": `proto=https`}, "10.0.0.1"},
		{"xff ignored when forwarded is the header", rfc, "10.0.0.1:80", map[string]string{"X-Forwarded-For": "203.0.113.9"}, "10.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.clients.Addr(request(tc.remote, tc.header))
			if got.String() != tc.want {
				t.Fatalf("Addr = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestSeveralHeaderLinesAreOneList(t *testing.T) {
	c := mustClients(t, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	r := request("10.0.0.1:1", nil)
	r.Header.Add("X-Forwarded-For", "203.0.113.1")
	r.Header.Add("X-Forwarded-For", "10.0.0.2")
	if got := c.Addr(r).String(); got != "203.0.113.1" {
		t.Fatalf("Addr = %s", got)
	}
}

func TestHopsBeyondMaxAreNotWalked(t *testing.T) {
	c := mustClients(t, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	hops := []string{"203.0.113.1"}
	for range maxHops + 4 {
		hops = append(hops, "10.0.0.9")
	}
	got := c.Addr(request("10.0.0.1:1", map[string]string{"X-Forwarded-For": strings.Join(hops, ",")}))
	if got.String() != "10.0.0.9" {
		t.Fatalf("Addr = %s, want the last trusted hop walked", got)
	}
}

func TestClientKeyGroupsIPv6By64(t *testing.T) {
	cases := map[string]string{
		"2001:db8:1:2:aaaa::1":    "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::ffff": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":         "2001:db8:1:3::/64",
		"192.0.2.1":               "192.0.2.1",
		"::ffff:192.0.2.1":        "192.0.2.1",
	}
	for in, want := range cases {
		if got := ClientKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("ClientKey(%s) = %s, want %s", in, got, want)
		}
	}
	if ClientKey(netip.Addr{}) != "" {
		t.Error("the invalid address has a key")
	}
	if KeyOfAddr("[2001:db8:1:2::9]:80") != "2001:db8:1:2::/64" || KeyOfAddr("pipe") != "pipe" {
		t.Error("KeyOfAddr")
	}
}

func TestIPExtractor(t *testing.T) {
	c := mustClients(t, Config{TrustedProxies: []string{"10.0.0.1"}})
	ex := c.IPExtractor()
	if got := ex(request("10.0.0.1:5", map[string]string{"X-Forwarded-For": "203.0.113.8"})); got != "203.0.113.8" {
		t.Fatalf("IPExtractor = %s", got)
	}
	if got := ex(request("192.0.2.1:5", map[string]string{"X-Forwarded-For": "203.0.113.8"})); got != "192.0.2.1" {
		t.Fatalf("IPExtractor = %s", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := []Config{
		{ReadTimeout: -1},
		{ReadTimeout: 1, ReadHeaderTimeout: 2},
		{MaxHeaderBytes: -1},
		{TLSCert: "a"},
		{ForwardedHeader: "X-Real-IP"},
		{TrustedProxies: []string{"10.0.0.0/33"}},
		{TrustedProxies: []string{"proxy.local"}},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// FuzzClientAddr: whatever the forwarding header holds, Addr does not
// panic; from an untrusted sender it is the connection's address; from a
// trusted one, an address the header or the connection named.
func FuzzClientAddr(f *testing.F) {
	for _, seed := range []string{"203.0.113.9", "1.1.1.1, 10.0.0.2", `for="[2001:db8::7]:4711";proto=https, for=10.0.0.3`,
		`for="\"a,;`, "[::1]:80,,", "fe80::1%eth0", ""} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	xff := mustClients(f, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	rfc := mustClients(f, Config{TrustedProxies: []string{"10.0.0.0/8"}, ForwardedHeader: HeaderForwarded})
	f.Fuzz(func(t *testing.T, header string, forwarded bool) {
		c, name := xff, HeaderXForwardedFor
		if forwarded {
			c, name = rfc, HeaderForwarded
		}
		if got := c.Addr(request("192.0.2.1:1", map[string]string{name: header})); got.String() != "192.0.2.1" {
			t.Fatalf("untrusted sender: Addr = %v", got)
		}
		got := c.Addr(request("10.0.0.1:1", map[string]string{name: header}))
		if !got.IsValid() || got.Zone() != "" {
			t.Fatalf("Addr = %v", got)
		}
		if got.String() != "10.0.0.1" && !strings.Contains(header, got.String()) && !strings.Contains(strings.ToLower(header), strings.ToLower(got.String())) {
			// An address the header named may be written differently
			// (leading zeros of IPv4-mapped forms, case); it must still
			// parse from one of its hops.
			found := false
			for _, hop := range forwardedFor([]string{header}, forwarded) {
				if a, ok := parseHop(hop); ok && a == got {
					found = true
				}
			}
			if !found {
				t.Fatalf("Addr = %v, named by neither the header %q nor the connection", got, header)
			}
		}
		_ = ClientKey(got)
	})
}
