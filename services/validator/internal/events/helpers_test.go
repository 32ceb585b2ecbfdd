package events

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// fakeLog is an event log in memory: ids are consecutive, the oldest ones
// may be pruned.
type fakeLog struct {
	mu      sync.Mutex
	events  []*ledgerpb.Event // ids first..last
	first   uint64
	changed chan struct{}
	reads   atomic.Int64 // EventsSince calls
}

func newFakeLog() *fakeLog { return &fakeLog{first: 1, changed: make(chan struct{})} }

func (l *fakeLog) last() uint64 { return l.first + uint64(len(l.events)) - 1 }

// add appends events (their ids are assigned), prunes everything up to
// pruneTo (0: nothing), then signals one change, as one apply would.
func (l *fakeLog) add(pruneTo uint64, evs ...*ledgerpb.Event) {
	l.mu.Lock()
	for _, ev := range evs {
		ev.Id = l.last() + 1
		l.events = append(l.events, ev)
	}
	if pruneTo >= l.first {
		n := min(uint64(len(l.events)), pruneTo-l.first+1)
		l.events = l.events[n:]
		l.first += n
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

func (l *fakeLog) EventsSince(after uint64, limit int) ([]*ledgerpb.Event, error) {
	l.reads.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*ledgerpb.Event
	for _, ev := range l.events {
		if ev.GetId() > after && (limit <= 0 || len(out) < limit) {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (l *fakeLog) FirstEventID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

func (l *fakeLog) LastEventID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last()
}

func (l *fakeLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

const (
	walletA = "0x1234567890abcdef1234567890abcdef12345678"
	walletB = "0xabcdef0123456789abcdef0123456789abcdef01"
)

// ev is a content event of wallet in organization at /ledger/<wallet>/<org>/<sub>.
func ev(wallet, org, sub string) *ledgerpb.Event {
	return &ledgerpb.Event{Type: "content", Action: "write", Wallet: wallet, Organization: org,
		Path: "/ledger/" + wallet + "/" + org + "/" + sub, Timestamp: 1_700_000_000_000, CommitIndex: 7}
}

// startHub runs a hub over log until the test ends and serves its stream
// on /v1/events/stream and a second handler on /v1/ops/events/stream.
func startHub(t *testing.T, log Log, cfg Config) (*Hub[*ledgerpb.Event], *httptest.Server) {
	t.Helper()
	hub := NewHub(log, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	mux := http.NewServeMux()
	mux.Handle("/v1/events/stream", hub.Handler())
	mux.Handle("/v1/ops/events/stream", hub.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		cancel()
		srv.Close()
		<-done
	})
	return hub, srv
}

// message is one SSE message (or comment) as a client parses it.
type message struct {
	id, event, data, retry string
	hasID                  bool
	comment                string
}

// sseClient reads one stream.
type sseClient struct {
	t      *testing.T
	resp   *http.Response
	msgs   chan message
	cancel context.CancelFunc
}

// open requests url with the headers (key, value pairs) and returns the
// response; a 200 stream is parsed in the background until the test ends.
func open(t *testing.T, url string, headers ...string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &sseClient{t: t, resp: resp, msgs: make(chan message, 10000), cancel: cancel}
	t.Cleanup(c.close)
	if resp.StatusCode == http.StatusOK {
		go parseSSE(resp.Body, c.msgs)
	}
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

// parseSSE parses the stream into messages; a comment is a message of its
// own, a block with only retry: too.
func parseSSE(r io.Reader, out chan<- message) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var m message
	empty := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if !empty {
				out <- m
			}
			m, empty = message{}, true
			continue
		}
		empty = false
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			m.comment = value
		case "id":
			m.id, m.hasID = value, true
		case "event":
			m.event = value
		case "data":
			m.data = value
		case "retry":
			m.retry = value
		}
	}
}

// next returns the next message that is not a comment.
func (c *sseClient) next() message {
	c.t.Helper()
	for {
		m := c.nextAny()
		if m.comment == "" {
			return m
		}
	}
}

// nextAny returns the next message, comments included.
func (c *sseClient) nextAny() message {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("the stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("no message within 10s")
	}
	return message{}
}

// ready waits for the retry hint the stream opens with: from then on the
// stream has its starting point.
func (c *sseClient) ready() {
	c.t.Helper()
	if c.resp.StatusCode != http.StatusOK {
		c.t.Fatalf("status %d", c.resp.StatusCode)
	}
	if m := c.nextAny(); m.retry == "" {
		c.t.Fatalf("first message %+v, want the retry hint", m)
	}
}

// eventIDs reads n events and returns their ids.
func (c *sseClient) eventIDs(n int) []string {
	c.t.Helper()
	var ids []string
	for range n {
		m := c.next()
		if !m.hasID {
			c.t.Fatalf("message %+v without an id", m)
		}
		ids = append(ids, m.id)
	}
	return ids
}

func decode[T any](t *testing.T, data string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("data %q: %v", data, err)
	}
	return v
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
