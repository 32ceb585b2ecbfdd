package blobgateway

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// steppingClock starts at start and moves on by step at every reading, so
// that a check's time and latency are known in advance.
func steppingClock(start time.Time, step time.Duration) func() time.Time {
	var readings atomic.Int64
	return func() time.Time { return start.Add(time.Duration(readings.Add(1)-1) * step) }
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// gateway serves the probe object as a gateway does, with status.
func gateway(t *testing.T, status int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.Method != http.MethodGet || r.URL.Path != "/ipfs/"+ProbeCID || r.Header.Get("Accept") != rawBlock {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte{0x0a, 0x02, 0x08, 0x01}) // the empty directory's block
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

func newChecker(t *testing.T, base string, timeout time.Duration) *Checker {
	t.Helper()
	c, err := New(Config{BaseURL: base, Interval: time.Hour, Timeout: timeout, Client: &http.Client{},
		Now: steppingClock(t0, 25*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckOK(t *testing.T) {
	srv, asked := gateway(t, http.StatusOK)
	c := newChecker(t, srv.URL+"/", time.Second)
	if _, ok := c.Last(); ok {
		t.Fatal("a last check before any")
	}
	got := c.CheckNow(context.Background())
	want := Check{At: t0, OK: true, StatusCode: http.StatusOK, Latency: 25 * time.Millisecond}
	if got != want || asked.Load() != 1 {
		t.Fatalf("check %+v, want %+v (asked %d times)", got, want, asked.Load())
	}
	if last, ok := c.Last(); !ok || last != want {
		t.Fatalf("last %+v %v", last, ok)
	}
	if c.URL() != srv.URL {
		t.Fatalf("URL %q, want %q", c.URL(), srv.URL)
	}
}

func TestCheckServerError(t *testing.T) {
	srv, _ := gateway(t, http.StatusBadGateway)
	c := newChecker(t, srv.URL, time.Second)
	got := c.CheckNow(context.Background())
	if got.OK || got.StatusCode != http.StatusBadGateway || got.Err != "the gateway answered 502 Bad Gateway" || got.At != t0 {
		t.Fatalf("check %+v", got)
	}
	if last, _ := c.Last(); last != got {
		t.Fatalf("last %+v", last)
	}
}

func TestCheckTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before the server closes: it waits for its handlers
	c := newChecker(t, srv.URL, 50*time.Millisecond)
	got := c.CheckNow(context.Background())
	if got.OK || got.StatusCode != 0 || got.Err != "no answer within 50ms" {
		t.Fatalf("check %+v", got)
	}
}

func TestCheckUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newChecker(t, "http://user:secret@"+addr, time.Second)
	got := c.CheckNow(context.Background())
	if got.OK || got.StatusCode != 0 || !strings.Contains(got.Err, "connection refused") || strings.Contains(got.Err, "secret") {
		t.Fatalf("check %+v", got)
	}
	if c.URL() != "http://user:xxxxx@"+addr {
		t.Fatalf("URL %q", c.URL())
	}
}

// TestCheckSendsCredentials: credentials in the base URL reach the gateway
// as basic authentication.
func TestCheckSendsCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "secret" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	c := newChecker(t, strings.Replace(srv.URL, "http://", "http://user:secret@", 1), time.Second)
	if got := c.CheckNow(context.Background()); !got.OK {
		t.Fatalf("check %+v", got)
	}
}

// TestCheckCutShortIsNotKept: a check that ends because the caller's
// context did says nothing of the gateway, and is not the last check.
func TestCheckCutShortIsNotKept(t *testing.T) {
	srv, _ := gateway(t, http.StatusOK)
	c := newChecker(t, srv.URL, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := c.CheckNow(ctx); got.OK {
		t.Fatalf("a check with an ended context: %+v", got)
	}
	if last, ok := c.Last(); ok {
		t.Fatalf("kept %+v", last)
	}
}

// TestRunChecksUntilStopped: Run checks at once and then every interval,
// and returns when its context ends.
func TestRunChecksUntilStopped(t *testing.T) {
	srv, asked := gateway(t, http.StatusOK)
	c, err := New(Config{BaseURL: srv.URL, Interval: 10 * time.Millisecond, Client: &http.Client{}, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for asked.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d checks within 10s", asked.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if last, ok := c.Last(); !ok || !last.OK {
		t.Fatalf("last %+v %v", last, ok)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
}

func TestParseBase(t *testing.T) {
	for raw, want := range map[string]string{
		"https://ipfs.example":            "https://ipfs.example",
		"http://127.0.0.1:8080/":          "http://127.0.0.1:8080",
		"https://gw.example/mirror/":      "https://gw.example/mirror",
		"https://u:p@ipfs.example:8443//": "https://u:p@ipfs.example:8443",
	} {
		u, err := ParseBase(raw)
		if err != nil || u.String() != want {
			t.Errorf("%q: %v %v, want %q", raw, u, err, want)
		}
		if err == nil && objectURL(u, ProbeCID) != want+"/ipfs/"+ProbeCID {
			t.Errorf("%q: object URL %q", raw, objectURL(u, ProbeCID))
		}
	}
	for raw, says := range map[string]string{
		"ftp://ipfs.example":             "scheme",
		"ipfs.example":                   "scheme",
		"https://":                       "no host",
		"http://:8080":                   "no host",
		"https://ipfs.example/?token=x":  "query",
		"https://ipfs.example/#top":      "fragment",
		"https://ipfs.example/ipfs/":     "ends in /ipfs",
		"https://u:secret@ipfs.ex ample": "not a URL",
	} {
		_, err := ParseBase(raw)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want it to say %q", raw, err, says)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error repeats the credentials: %v", raw, err)
		}
	}
}

func TestRedacted(t *testing.T) {
	for raw, want := range map[string]string{
		"https://ipfs.example":         "https://ipfs.example",
		"https://user:pass@gw.example": "https://user:xxxxx@gw.example",
		"https://token@gw.example/x":   "https://xxxxx@gw.example/x",
	} {
		u, err := ParseBase(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := Redacted(u); got != want {
			t.Errorf("%q: %q, want %q", raw, got, want)
		}
	}
}

func TestNewNeedsClientAndClock(t *testing.T) {
	if _, err := New(Config{BaseURL: "https://ipfs.example", Now: time.Now}); err == nil {
		t.Error("no client taken")
	}
	if _, err := New(Config{BaseURL: "https://ipfs.example", Client: &http.Client{}}); err == nil {
		t.Error("no clock taken")
	}
	if _, err := New(Config{BaseURL: "ftp://x", Client: &http.Client{}, Now: time.Now}); err == nil {
		t.Error("an ftp gateway taken")
	}
	c, err := New(Config{BaseURL: "https://ipfs.example", Interval: 2 * time.Second, Client: &http.Client{}, Now: time.Now})
	if err != nil || c.interval != 2*time.Second || c.timeout != 2*time.Second {
		t.Fatalf("%+v %v: the timeout is at most the interval", c, err)
	}
}
