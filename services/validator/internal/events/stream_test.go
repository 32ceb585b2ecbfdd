package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func ids(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

func TestStreamFraming(t *testing.T) {
	log := newFakeLog()
	log.add(0, ev(walletA, "default", "before"))
	_, srv := startHub(t, log, Config{KeepAlive: 50 * time.Millisecond, Retry: 1500 * time.Millisecond})
	c := open(t, srv.URL+"/v1/events/stream")
	if ct := c.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cc := c.resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Fatalf("Cache-Control %q", cc)
	}
	if m := c.nextAny(); m.retry != "1500" {
		t.Fatalf("first message %+v, want retry: 1500", m)
	}
	// Without a resumption point the stream starts at new events: event 1
	// was there before.
	bin := ev(walletB, "org-1", "img")
	bin.Type, bin.CasCid, bin.ContentHash, bin.ProposalId = "binary", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", "0xab", "0xcd"
	log.add(0, bin)
	m := c.next()
	if m.id != "2" || m.event != "binary" {
		t.Fatalf("message %+v, want id 2, event binary", m)
	}
	got := decode[api.Event](t, m.data)
	if want := api.EventOf(bin); got != want {
		t.Fatalf("data %+v, want %+v", got, want)
	}
	// An idle stream carries keep-alive comments.
	if m := c.nextAny(); m.comment != "keep-alive" {
		t.Fatalf("idle stream sent %+v, want a keep-alive comment", m)
	}
}

// TestStreamFrameBytes pins the wire form of one event.
func TestStreamFrameBytes(t *testing.T) {
	e := ev(walletA, "default", "a")
	e.Id = 42
	raw, err := Content{}.Render(e)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(api.EventOf(e))
	want := "id: 42\nevent: content\ndata: " + string(data) + "\n\n"
	if string(raw) != want {
		t.Fatalf("frame %q, want %q", raw, want)
	}
	if bytes.Count(raw, []byte("\n")) != 4 {
		t.Fatalf("frame %q: the data must be one line", raw)
	}
}

func TestStreamFilters(t *testing.T) {
	upper := "0x" + strings.ToUpper(walletB[2:])
	cases := []struct {
		name  string
		query string
		want  []string // ids of the events below
	}{
		{"none", "", ids(1, 6)},
		{"one wallet", "wallets=" + walletA, []string{"1", "2", "3"}},
		{"wallets comma-separated, any case", "wallets=" + walletA + "," + upper, ids(1, 6)},
		{"wallets repeated", "wallets=" + walletA + "&wallets=" + walletB, ids(1, 6)},
		{"wallet and organization", "wallets=" + walletA + "&organizations=org-1", []string{"2"}},
		{"organizations", "wallets=" + walletA + "," + walletB + "&organizations=org-1,default", ids(1, 5)},
		{"path prefix", "path=/ledger/" + walletA + "/default", []string{"1", "3"}},
		{"path prefix, trailing slash", "path=/ledger/" + walletA + "/default/", []string{"1", "3"}},
		{"path on a segment boundary", "path=/ledger/" + walletB + "/org", []string{"6"}},
		{"path root", "path=/", ids(1, 6)},
		{"all three", "wallets=" + walletB + "&organizations=default&path=/ledger/" + walletB + "/default/x", []string{"4"}},
	}
	log := newFakeLog()
	log.add(0,
		ev(walletA, "default", "a"), // 1
		ev(walletA, "org-1", "b"),   // 2
		ev(walletA, "default", "c"), // 3
		ev(walletB, "default", "x"), // 4
		ev(walletB, "org-1", "y"),   // 5
		ev(walletB, "org", "z"),     // 6
	)
	_, srv := startHub(t, log, Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.query
			if q != "" {
				q += "&"
			}
			c := open(t, srv.URL+"/v1/events/stream?"+q+"lastEventId=0")
			c.ready()
			if got := c.eventIDs(len(tc.want)); !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
	// Nothing else was sent: a stream of the first case sees the next new
	// event right after its last one.
	c := open(t, srv.URL+"/v1/events/stream?wallets="+walletA+"&organizations=org-1&lastEventId=0")
	c.ready()
	if got := c.eventIDs(1); got[0] != "2" {
		t.Fatalf("first event %v", got)
	}
	log.add(0, ev(walletB, "org-1", "n"), ev(walletA, "org-1", "n")) // 7, 8
	if got := c.eventIDs(1); got[0] != "8" {
		t.Fatalf("next event %v, want 8 (7 is another wallet's)", got)
	}
}

func TestStreamRejectsBadParameters(t *testing.T) {
	_, srv := startHub(t, newFakeLog(), Config{})
	cases := []struct {
		query, header, field string
	}{
		{"wallets=0x1234", "", "wallets"},
		{"wallets=", "", "wallets"},
		{"wallets=" + walletA + ",,", "", "wallets"},
		{"wallets=" + walletA + "zz", "", "wallets"},
		{"organizations=default", "", "organizations"},
		{"wallets=" + walletA + "&organizations=Not_Lower", "", "organizations"},
		{"path=ledger/a", "", "path"},
		{"path=/ledger/../a", "", "path"},
		{"path=/ledger//a", "", "path"},
		{"path=", "", "path"},
		{"path=/a&path=/b", "", "path"},
		{"lastEventId=abc", "", "lastEventId"},
		{"lastEventId=-1", "", "lastEventId"},
		{"lastEventId=18446744073709551616", "", "lastEventId"},
		{"lastEventId=1&lastEventId=2", "", "lastEventId"},
		{"", "+5", "Last-Event-ID"},
		{"lastEventId=3", "3.0", "Last-Event-ID"},
	}
	for _, tc := range cases {
		var headers []string
		if tc.header != "" {
			headers = []string{"Last-Event-ID", tc.header}
		}
		c := open(t, srv.URL+"/v1/events/stream?"+tc.query, headers...)
		body, _ := io.ReadAll(c.resp.Body)
		var e apierror.Body
		if c.resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error == nil ||
			e.Error.Code != apierror.InvalidField || e.Error.Details["field"] != tc.field || e.Error.Retryable {
			t.Errorf("?%s (Last-Event-ID %q): %d %s, want 400 invalid_field naming %s", tc.query, tc.header, c.resp.StatusCode, body, tc.field)
		}
	}
}

func TestStreamResume(t *testing.T) {
	history := func(t *testing.T) (*fakeLog, *httptest.Server) {
		log := newFakeLog()
		for range 5 {
			log.add(0, ev(walletA, "default", "a"))
		}
		_, srv := startHub(t, log, Config{})
		return log, srv
	}
	for _, tc := range []struct {
		name    string
		query   string
		headers []string
		want    []string
	}{
		{"header", "", []string{"Last-Event-ID", "2"}, ids(3, 5)},
		{"query", "?lastEventId=2", nil, ids(3, 5)},
		{"the header wins over the query", "?lastEventId=1", []string{"Last-Event-ID", "3"}, ids(4, 5)},
		{"from the start", "?lastEventId=0", nil, ids(1, 5)},
		{"at the newest", "?lastEventId=5", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, srv := history(t)
			c := open(t, srv.URL+"/v1/events/stream"+tc.query, tc.headers...)
			c.ready()
			if got := c.eventIDs(len(tc.want)); !slices.Equal(got, tc.want) {
				t.Fatalf("history %v, want %v", got, tc.want)
			}
			// Then the new events, without a gap or a repeat.
			log.add(0, ev(walletA, "default", "n"))
			want := strconv.FormatUint(log.LastEventID(), 10)
			if got := c.eventIDs(1); got[0] != want {
				t.Fatalf("after the history: %v, want %s", got, want)
			}
		})
	}
	// A resumption point ahead of this validator (another one applied more):
	// the stream waits for those events and sends only what follows.
	log, srv := history(t)
	last := log.LastEventID()
	c := open(t, srv.URL+"/v1/events/stream", "Last-Event-ID", strconv.FormatUint(last+2, 10))
	c.ready()
	log.add(0, ev(walletA, "default", "x"), ev(walletA, "default", "y"), ev(walletA, "default", "z"))
	if got := c.eventIDs(1); got[0] != strconv.FormatUint(last+3, 10) {
		t.Fatalf("ahead of the log: first event %v, want %d", got, last+3)
	}
}

func TestStreamGap(t *testing.T) {
	log := newFakeLog()
	for range 10 {
		log.add(0, ev(walletA, "default", "a"))
	}
	log.add(5) // retention took 1..5
	_, srv := startHub(t, log, Config{})

	c := open(t, srv.URL+"/v1/events/stream", "Last-Event-ID", "2")
	c.ready()
	m := c.next()
	if m.event != api.EventGap || m.hasID {
		t.Fatalf("first message %+v, want a gap event without an id", m)
	}
	if g := decode[api.StreamGap](t, m.data); g != (api.StreamGap{AfterID: "2", FirstID: "6", Skipped: 3}) {
		t.Fatalf("gap %+v", g)
	}
	if got := c.eventIDs(5); !slices.Equal(got, ids(6, 10)) {
		t.Fatalf("after the gap %v", got)
	}
	// Resuming right before the oldest kept event is no gap.
	c = open(t, srv.URL+"/v1/events/stream?lastEventId=5")
	c.ready()
	if got := c.eventIDs(1); got[0] != "6" {
		t.Fatalf("at the edge %v", got)
	}

	// A stream that is live when retention overtakes the hub (here: one
	// apply added 11..15 and pruned up to 12) is told too.
	live := open(t, srv.URL+"/v1/events/stream")
	live.ready()
	log.add(12, ev(walletA, "default", "b"), ev(walletA, "default", "b"), ev(walletA, "default", "b"),
		ev(walletA, "default", "b"), ev(walletA, "default", "b"))
	m = live.next()
	if g := decode[api.StreamGap](t, m.data); m.event != api.EventGap || g != (api.StreamGap{AfterID: "10", FirstID: "13", Skipped: 2}) {
		t.Fatalf("live gap %+v", m)
	}
	if got := live.eventIDs(3); !slices.Equal(got, ids(13, 15)) {
		t.Fatalf("after the live gap %v", got)
	}

	// Nothing kept at all: the gap ends at the next id to come.
	log.add(15)
	c = open(t, srv.URL+"/v1/events/stream?lastEventId=3")
	c.ready()
	m = c.next()
	if g := decode[api.StreamGap](t, m.data); m.event != api.EventGap || g != (api.StreamGap{AfterID: "3", FirstID: "16", Skipped: 12}) {
		t.Fatalf("gap over an empty history %+v", m)
	}
	log.add(0, ev(walletA, "default", "c"))
	if got := c.eventIDs(1); got[0] != "16" {
		t.Fatalf("after an empty history %v", got)
	}
}

// TestStreamPerClientLimit: ten streams per client, the two stream routes
// together (contract Limits); the 11th, on either route, answers 429.
func TestStreamPerClientLimit(t *testing.T) {
	_, srv := startHub(t, newFakeLog(), Config{Budget: NewBudget(10, nil)})
	routes := []string{"/v1/events/stream", "/v1/ops/events/stream"}
	var open10 []*sseClient
	for i := range 10 {
		c := open(t, srv.URL+routes[i%2])
		c.ready()
		open10 = append(open10, c)
	}
	for _, route := range routes {
		c := open(t, srv.URL+route)
		if c.resp.StatusCode != http.StatusTooManyRequests {
			c.close()
			t.Fatalf("11th stream on %s: %d, want 429", route, c.resp.StatusCode)
		}
		body, _ := io.ReadAll(c.resp.Body)
		var e apierror.Body
		if c.resp.StatusCode != http.StatusTooManyRequests || json.Unmarshal(body, &e) != nil || e.Error == nil ||
			e.Error.Code != apierror.RateLimited || !e.Error.Retryable || e.Error.Details["limit"] != float64(10) ||
			!strings.Contains(e.Error.Message, "at most 10") {
			t.Fatalf("11th stream on %s: %d %s, want 429 rate_limited, retryable, limit 10", route, c.resp.StatusCode, body)
		}
		if c.resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	// A stream that ends gives its slot back, to either route.
	open10[0].close()
	waitUntil(t, func() bool {
		c := open(t, srv.URL+routes[1])
		defer c.close()
		return c.resp.StatusCode == http.StatusOK
	})
}

// TestStreamLimitCountsByClientKey: behind a trusted proxy each forwarded
// client has its own budget; an IPv6 client has one budget for its /64;
// a forwarding header from an untrusted sender names nobody.
func TestStreamLimitCountsByClientKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []string
		clients []string // the X-Forwarded-For of each stream opened
		refused bool     // whether the last one is refused
	}{
		{"distinct clients behind a proxy", []string{"127.0.0.1"}, []string{"203.0.113.1", "203.0.113.2"}, false},
		{"one /64", []string{"127.0.0.1"}, []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"}, true},
		{"untrusted sender", nil, []string{"203.0.113.1", "203.0.113.2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clients, err := httpserver.NewClients(httpserver.Config{TrustedProxies: tc.trusted})
			if err != nil {
				t.Fatal(err)
			}
			_, srv := startHub(t, newFakeLog(), Config{Budget: NewBudget(1, clients.Key)})
			first := open(t, srv.URL+"/v1/events/stream", "X-Forwarded-For", tc.clients[0])
			first.ready()
			defer first.close()
			second := open(t, srv.URL+"/v1/ops/events/stream", "X-Forwarded-For", tc.clients[1])
			defer second.close()
			if refused := second.resp.StatusCode == http.StatusTooManyRequests; refused != tc.refused {
				t.Fatalf("second stream: %d, refused want %v", second.resp.StatusCode, tc.refused)
			}
		})
	}
}

func TestStreamRate(t *testing.T) {
	log := newFakeLog()
	_, srv := startHub(t, log, Config{Rate: 100, Queue: 1000})
	const n = 60 // burst 5 at 100/s: at least 0.55 s
	for _, path := range []string{"live", "history"} {
		t.Run(path, func(t *testing.T) {
			from := log.LastEventID()
			c := open(t, srv.URL+"/v1/events/stream?lastEventId="+strconv.FormatUint(from, 10))
			if path == "history" {
				batch := make([]*ledgerpb.Event, n)
				for i := range batch {
					batch[i] = ev(walletA, "default", "r")
				}
				log.add(0, batch...)
			}
			c.ready()
			start := time.Now()
			if path == "live" {
				batch := make([]*ledgerpb.Event, n)
				for i := range batch {
					batch[i] = ev(walletA, "default", "r")
				}
				log.add(0, batch...)
			}
			got := c.eventIDs(n)
			elapsed := time.Since(start)
			if want := ids(int(from)+1, int(from)+n); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v (paced, not dropped)", got, want)
			}
			if elapsed < 500*time.Millisecond || elapsed > 5*time.Second {
				t.Fatalf("%d events at 100/s took %s", n, elapsed)
			}
		})
	}
}

// gateWriter is a ResponseWriter whose writes block while the gate is
// closed: a client that stopped reading.
type gateWriter struct {
	hdr     http.Header
	blocked chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	gate    chan struct{} // nil: open
}

func (w *gateWriter) Header() http.Header { return w.hdr }
func (w *gateWriter) WriteHeader(int)     {}
func (w *gateWriter) Flush()              {}

func (w *gateWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	gate := w.gate
	w.mu.Unlock()
	if gate != nil {
		select {
		case w.blocked <- struct{}{}:
		default:
		}
		<-gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *gateWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *gateWriter) close() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gate = make(chan struct{})
	return w.gate
}

func (w *gateWriter) open(gate chan struct{}) {
	w.mu.Lock()
	w.gate = nil
	w.mu.Unlock()
	close(gate)
}

func TestStreamOverflowDropsOldest(t *testing.T) {
	log := newFakeLog()
	hub := NewHub(log, Config{Queue: 5, KeepAlive: time.Hour}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(ctx) }()
	defer func() { cancel(); <-hubDone }()

	w := &gateWriter{hdr: http.Header{}, blocked: make(chan struct{}, 1)}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/events/stream", nil)
	served := make(chan struct{})
	go func() { defer close(served); hub.Handler().ServeHTTP(w, req) }()
	defer func() { cancel(); <-served }()

	waitUntil(t, func() bool { return strings.Contains(w.String(), "retry:") && hub.Subscribers() == 1 })
	log.add(0, ev(walletA, "default", "1"))
	waitUntil(t, func() bool { return strings.Contains(w.String(), "id: 1\n") })

	// The client stops reading: the stream blocks writing event 2.
	gate := w.close()
	log.add(0, ev(walletA, "default", "2"))
	<-w.blocked
	// 20 more arrive meanwhile; the queue keeps the newest 5.
	for range 20 {
		log.add(0, ev(walletA, "default", "more"))
	}
	waitUntil(t, func() bool { return hub.Position() == 22 })
	w.open(gate)
	waitUntil(t, func() bool { return strings.Contains(w.String(), "id: 22\n") })

	msgs := make(chan message, 100)
	parseSSE(strings.NewReader(w.String()), msgs)
	var got []string
	var dropped *api.StreamDropped
	for m := range msgs {
		switch {
		case m.retry != "":
		case m.event == api.EventDropped:
			d := decode[api.StreamDropped](t, m.data)
			dropped = &d
			got = append(got, "dropped")
		default:
			got = append(got, m.id)
		}
	}
	want := append([]string{"1", "2", "dropped"}, ids(18, 22)...)
	if !slices.Equal(got, want) {
		t.Fatalf("stream %v, want %v", got, want)
	}
	if *dropped != (api.StreamDropped{Count: 15, FromID: "3", ToID: "17"}) {
		t.Fatalf("dropped %+v, want 15 events, 3 to 17", *dropped)
	}
	if hub.Dropped() != 15 {
		t.Fatalf("hub counts %d dropped", hub.Dropped())
	}
	// And it goes on with newer events.
	log.add(0, ev(walletA, "default", "after"))
	waitUntil(t, func() bool { return strings.Contains(w.String(), "id: 23\n") })
}

// TestHubReadsOncePerApply: the hub reads the log once for all its
// subscribers, not once each.
func TestHubReadsOncePerApply(t *testing.T) {
	log := newFakeLog()
	hub, srv := startHub(t, log, Config{Budget: NewBudget(100, nil)})
	const subs = 50
	clients := make([]*sseClient, subs)
	for i := range clients {
		clients[i] = open(t, srv.URL+"/v1/events/stream")
		clients[i].ready()
	}
	waitUntil(t, func() bool { return hub.Subscribers() == subs })
	before := log.reads.Load()
	log.add(0, ev(walletA, "default", "a"), ev(walletB, "default", "b"))
	for _, c := range clients {
		if got := c.eventIDs(2); !slices.Equal(got, []string{"1", "2"}) {
			t.Fatalf("events %v", got)
		}
	}
	if reads := log.reads.Load() - before; reads != 1 {
		t.Fatalf("%d reads of the log for %d subscribers, want 1", reads, subs)
	}
}

func TestStreamEndsWithTheHub(t *testing.T) {
	log := newFakeLog()
	hub := NewHub(log, Config{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(ctx) }()
	srv := httptest.NewServer(hub.Handler())
	defer srv.Close()
	c := open(t, srv.URL)
	c.ready()
	cancel()
	<-hubDone
	select {
	case _, ok := <-c.msgs:
		for ok {
			_, ok = <-c.msgs
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end with the hub")
	}
}

func TestParseFilterMatch(t *testing.T) {
	q, _ := url.ParseQuery("wallets=" + strings.ToUpper(walletA) + "&path=/ledger")
	f, err := ParseFilter(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ev   *ledgerpb.Event
		want bool
	}{
		{&ledgerpb.Event{Wallet: walletA, Path: "/ledger/x"}, true},
		{&ledgerpb.Event{Wallet: walletA, Path: "/ledger"}, true},
		{&ledgerpb.Event{Wallet: walletA, Path: "/ledgerx/y"}, false},
		{&ledgerpb.Event{Wallet: walletB, Path: "/ledger/x"}, false},
	} {
		if got := f.Match(tc.ev); got != tc.want {
			t.Errorf("Match(%v) = %v", tc.ev, got)
		}
	}
	if !(*Filter)(nil).Match(&ledgerpb.Event{}) {
		t.Error("a nil filter must match everything")
	}
}

func ExampleParseResumePoint() {
	after, ok, err := ParseResumePoint("41", url.Values{"lastEventId": {"7"}})
	fmt.Println(after, ok, err == nil)
	// Output: 41 true true
}
