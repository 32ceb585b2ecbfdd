package httpserver

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serve starts a Server of h on a loopback port and returns its address.
func serve(t *testing.T, cfg Config, h http.Handler) (*Server, string) {
	t.Helper()
	s, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	return s, start(t, s)
}

// start serves s on a loopback port until the test ends.
func start(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// poll waits up to 10 s for cond.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// getFrom answers a GET of addr from the local address from.
func getFrom(from, addr string) (int, error) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestTricklingClientHoldsAtMostItsShare: 1,000 connections from one
// client, each sending a request whose body never comes, hold at most
// MaxConnsPerClient connections; the rest are closed as soon as accepted,
// and another client is still answered.
func TestTricklingClientHoldsAtMostItsShare(t *testing.T) {
	const perClient, attempts = 8, 1000
	s, addr := serve(t, Config{MaxConnsPerClient: perClient, ReadTimeout: time.Minute},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		}))
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range attempts {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		// Headers, then one byte of a body declared much longer.
		_, _ = fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nx")
	}
	poll(t, "every connection accepted or refused", func() bool {
		st := s.Stats()
		return st.RefusedPerClient == attempts-perClient && st.Open == perClient
	})
	// The refused ones were closed by the server: a read sees the end.
	_ = conns[attempts-1].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[attempts-1].Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("a connection over the cap is still open: %v", err)
	}
	if code, err := getFrom("127.0.0.2", addr); err != nil || code != http.StatusOK {
		t.Fatalf("another client: %d, %v", code, err)
	}
	if st := s.Stats(); st.Open > perClient+1 {
		t.Fatalf("%d connections open", st.Open)
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "broken pipe"))
}

// TestMaxConnsRefusesEveryoneOver: the cap in all holds across clients.
func TestMaxConnsRefusesEveryoneOver(t *testing.T) {
	s, addr := serve(t, Config{MaxConns: 2, MaxConnsPerClient: -1}, http.NotFoundHandler())
	var conns []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	poll(t, "3 refused", func() bool { st := s.Stats(); return st.RefusedTotal == 3 && st.Open == 2 })
	for _, c := range conns {
		_ = c.Close()
	}
	poll(t, "slots given back", func() bool { return s.Stats().Open == 0 })
	if code, err := getFrom("127.0.0.1", addr); err != nil || code != http.StatusNotFound {
		t.Fatalf("after release: %d, %v", code, err)
	}
}

// TestTrustedProxyIsExemptFromPerClientCap: a proxy carries many clients.
func TestTrustedProxyIsExemptFromPerClientCap(t *testing.T) {
	s, addr := serve(t, Config{MaxConnsPerClient: 1, TrustedProxies: []string{"127.0.0.1"}}, http.NotFoundHandler())
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	poll(t, "3 open", func() bool { return s.Stats().Open == 3 })
	if s.Stats().RefusedPerClient != 0 {
		t.Fatal("a trusted proxy was refused")
	}
}

// TestPeersAreExemptFromPerClientCap: a peer (ExemptPeers) holds more
// connections than one client may; anyone else is held to the cap.
func TestPeersAreExemptFromPerClientCap(t *testing.T) {
	s, err := New(Config{MaxConnsPerClient: 1}, http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	peer := netip.MustParseAddr("127.0.0.1")
	s.ExemptPeers(func(a netip.Addr) bool { return a == peer })
	addr := start(t, s)
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	poll(t, "3 open", func() bool { return s.Stats().Open == 3 })
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for range 2 {
		c, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	poll(t, "the other client's second connection refused", func() bool { return s.Stats().RefusedPerClient == 1 })
}

// TestTricklingBodyIsCut: a body slower than ReadTimeout fails its read
// and the connection is closed.
func TestTricklingBodyIsCut(t *testing.T) {
	readErr := make(chan error, 1)
	_, addr := serve(t, Config{ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: 300 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			readErr <- err
		}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	start := time.Now()
	go func() {
		for range 100 {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond) // the trickle itself, not a wait for state
		}
	}()
	select {
	case err := <-readErr:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("body read: %v, want a timeout", err)
		}
		if elapsed := time.Since(start); elapsed > 1500*time.Millisecond {
			t.Fatalf("cut after %v", elapsed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trickling body was not cut")
	}
}

// TestLiftedDeadlinesKeepAStreamAlive: a stream that lifts the deadlines
// outlives ReadTimeout and WriteTimeout; its context is not cancelled by
// the idle connection's read deadline.
func TestLiftedDeadlinesKeepAStreamAlive(t *testing.T) {
	const ticks = 8
	_, addr := serve(t, Config{ReadHeaderTimeout: 50 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			LiftDeadlines(w)
			rc := http.NewResponseController(w)
			for i := range ticks {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
				_, _ = fmt.Fprintf(w, "tick %d\n", i)
				_ = rc.Flush()
			}
		}))
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		lines++
	}
	if lines != ticks {
		t.Fatalf("%d ticks of %d arrived", lines, ticks)
	}
}

func TestLimitBodies(t *testing.T) {
	_, addr := serve(t, Config{}, LimitBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); IsTooLarge(err) {
			WriteError(w, TooLarge(10))
		}
	}), 10))
	for _, tc := range []struct {
		body    io.Reader
		code    int
		comment string
	}{
		{strings.NewReader("0123456789"), http.StatusOK, "at the limit"},
		{strings.NewReader("0123456789a"), http.StatusRequestEntityTooLarge, "declared over"},
		{io.MultiReader(strings.NewReader("0123456789a")), http.StatusRequestEntityTooLarge, "chunked over"},
	} {
		resp, err := http.Post("http://"+addr+"/", "text/plain", tc.body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d %s", tc.comment, resp.StatusCode, b)
		}
		if tc.code == http.StatusRequestEntityTooLarge && !strings.Contains(string(b), `"content_too_large"`) {
			t.Errorf("%s: body %s", tc.comment, b)
		}
	}
}

// writePair writes a self-signed certificate for host and its key.
func writePair(t *testing.T, dir, host string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host},
		DNSNames: []string{host}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// servedName is the CommonName of the certificate addr serves.
func servedName(t *testing.T, addr string) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served name only
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestTLSCertificateReloadedOnChange: a renewed pair is served without a
// restart; a broken one leaves the previous in service.
func TestTLSCertificateReloadedOnChange(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, "first")
	s, addr := serve(t, Config{TLSCert: certFile, TLSKey: keyFile}, http.NotFoundHandler())
	if got := servedName(t, addr); got != "first" {
		t.Fatalf("served %q", got)
	}
	var offset atomic.Int64 // the server's clock runs ahead by this much
	s.certs.mu.Lock()
	s.certs.now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	s.certs.mu.Unlock()

	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	offset.Add(int64(2 * reloadCheck))
	if got := servedName(t, addr); got != "first" {
		t.Fatalf("after a broken write, served %q", got)
	}
	if st := s.Stats(); st.TLSError == "" || strings.Contains(st.TLSError, "BEGIN") {
		t.Fatalf("TLSError %q", st.TLSError)
	}
	writePair(t, dir, "second")
	offset.Add(int64(2 * reloadCheck))
	if got := servedName(t, addr); got != "second" {
		t.Fatalf("after renewal, served %q", got)
	}
	if st := s.Stats(); st.TLSReloads != 1 || st.TLSError != "" {
		t.Fatalf("stats %+v", st)
	}
}

func TestNewRefusesAMissingCertificate(t *testing.T) {
	if _, err := New(Config{TLSCert: "/nonexistent/cert.pem", TLSKey: "/nonexistent/key.pem"}, http.NotFoundHandler()); err == nil {
		t.Fatal("no error")
	}
}
