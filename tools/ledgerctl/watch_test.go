package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// request is what a stream request asked for.
type request struct {
	lastEventID, query, auth string
}

// sseServer answers /v1/events/stream with its n-th script for its n-th
// request, and records each request.
type sseServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
}

func newSSEServer(t *testing.T, scripts ...func(w http.ResponseWriter, r *http.Request)) *sseServer {
	s := &sseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/events/stream" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, request{lastEventID: r.Header.Get("Last-Event-ID"), query: r.URL.RawQuery, auth: r.Header.Get("Authorization")})
		s.mu.Unlock()
		if n >= len(scripts) {
			http.Error(w, "no more scripted answers", http.StatusServiceUnavailable)
			return
		}
		scripts[n](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sseServer) seen() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.requests...)
}

// event is the frame of event id, as the validator writes it.
func event(id int, typ, extra string) string {
	return fmt.Sprintf("id: %d\nevent: %s\ndata: {\"id\":\"%d\",\"type\":%q,\"action\":\"write\",\"path\":\"/ledger/p/%d\",\"wallet\":\"0xabc\",\"organization\":\"default\",\"timestamp\":1%s}\n\n",
		id, typ, id, typ, id, extra)
}

// streamed answers with the frames, flushed one by one, then ends the
// response (a clean end of the stream).
func streamed(frames ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, f := range frames {
			_, _ = w.Write([]byte(f))
			w.(http.Flusher).Flush()
		}
	}
}

// dropped writes the frames on the raw connection and closes it: the
// connection is lost, the last frame possibly cut.
func dropped(frames ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nConnection: close\r\n\r\n")
		for _, f := range frames {
			_, _ = buf.WriteString(f)
		}
		_ = buf.Flush()
	}
}

// held answers with the frames and keeps the stream open until the client
// leaves.
func held(frames ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		streamed(frames...)(w, r)
		<-r.Context().Done()
	}
}

func runWatch(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, notices bytes.Buffer
	err := watch(ctx, args, &out, &notices)
	if ctx.Err() != nil {
		t.Fatalf("watch did not finish: %v\nout:\n%s\nnotices:\n%s", ctx.Err(), out.String(), notices.String())
	}
	return out.String(), notices.String(), err
}

// TestWatchResumesAndFailsOver: the first validator drops the connection
// in the middle of an event; the watch goes on at the second with
// Last-Event-ID = the last event printed, passes gap and dropped notices
// on, and when the second ends its stream goes back to the first, again
// resuming after the last event printed. The cut event is never printed.
func TestWatchResumesAndFailsOver(t *testing.T) {
	a := newSSEServer(t,
		dropped("retry: 5\n\n", event(1, "content", ""), ": keep-alive\n\n", event(2, "delete", ""), event(3, "content", ""),
			`id: 4`+"\nevent: content\ndata: {\"id\":\"4\""),
		held(event(6, "content", "")),
	)
	b := newSSEServer(t, streamed("retry: 5\n\n",
		"event: gap\ndata: {\"afterId\":\"3\",\"firstId\":\"4\",\"skipped\":0}\n\n",
		event(4, "binary", `,"casCid":"bafyx"`),
		": keep-alive\n\n",
		"event: dropped\ndata: {\"count\":2,\"fromId\":\"5\",\"toId\":\"6\"}\n\n",
		event(5, "content", "")))
	out, notices, err := runWatch(t, "--validator", a.URL+","+b.URL, "--token", "tok", "--wallet", "0xABC,0xdef", "--org", "default",
		"--path", "/ledger/p", "--count", "6", "--backoff", "1ms")
	if err != nil {
		t.Fatalf("watch: %v\n%s", err, notices)
	}
	want := strings.Join([]string{
		"1 content write 0xabc default /ledger/p/1",
		"2 delete write 0xabc default /ledger/p/2",
		"3 content write 0xabc default /ledger/p/3",
		`gap {"afterId":"3","firstId":"4","skipped":0}`,
		"4 binary write 0xabc default /ledger/p/4 cid=bafyx",
		`dropped {"count":2,"fromId":"5","toId":"6"}`,
		"5 content write 0xabc default /ledger/p/5",
		"6 content write 0xabc default /ledger/p/6",
	}, "\n") + "\n"
	if out != want {
		t.Fatalf("output\n%s\nwant\n%s\nnotices:\n%s", out, want, notices)
	}
	query := "organizations=default&path=%2Fledger%2Fp&wallets=0xABC%2C0xdef"
	if got := a.seen(); len(got) != 2 || got[0] != (request{"", query, "Bearer tok"}) || got[1] != (request{"5", query, "Bearer tok"}) {
		t.Fatalf("requests to the first validator: %+v", got)
	}
	if got := b.seen(); len(got) != 1 || got[0] != (request{"3", query, "Bearer tok"}) {
		t.Fatalf("requests to the second validator: %+v", got)
	}
	if !strings.Contains(notices, "reconnecting") || !strings.Contains(notices, "from after event 3") {
		t.Fatalf("notices:\n%s", notices)
	}
}

// TestWatchPassesOverADownValidator: the first URL refuses connections;
// the watch reads from the second, resuming after --last-event-id, and
// prints JSON with --json.
func TestWatchPassesOverADownValidator(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	b := newSSEServer(t, held("retry: 5\n\n", event(10, "content", ""), "event: gap\ndata: {}\n\n", event(11, "delete", "")))
	out, notices, err := runWatch(t, "--validator", downURL+","+b.URL, "--last-event-id", "9", "--count", "2", "--backoff", "1ms", "--json")
	if err != nil {
		t.Fatalf("watch: %v\n%s", err, notices)
	}
	if got := b.seen(); len(got) != 1 || got[0].lastEventID != "9" {
		t.Fatalf("requests: %+v", got)
	}
	var lines []watchLine
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var wl watchLine
		if err := json.Unmarshal([]byte(l), &wl); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, wl)
	}
	if len(lines) != 3 || lines[0].ID != "10" || lines[0].Event != "content" || lines[1].ID != "" || lines[1].Event != "gap" ||
		string(lines[1].Data) != "{}" || lines[2].ID != "11" || !strings.Contains(string(lines[2].Data), `"path":"/ledger/p/11"`) {
		t.Fatalf("output:\n%s", out)
	}
	if !strings.Contains(notices, downURL) {
		t.Fatalf("notices do not name the down validator:\n%s", notices)
	}
}

// TestWatchReconnectsAnIdleStream: a stream that sends nothing, not even a
// keep-alive, for --idle-timeout is given up and resumed.
func TestWatchReconnectsAnIdleStream(t *testing.T) {
	a := newSSEServer(t, held(event(1, "content", "")), held(event(2, "content", "")))
	out, notices, err := runWatch(t, "--validator", a.URL, "--count", "2", "--backoff", "1ms", "--idle-timeout", "300ms")
	if err != nil {
		t.Fatalf("watch: %v\n%s", err, notices)
	}
	if got := a.seen(); len(got) != 2 || got[1].lastEventID != "1" || strings.Count(out, "\n") != 2 {
		t.Fatalf("requests %+v, output\n%s", got, out)
	}
	if !strings.Contains(notices, "no data for 300ms") {
		t.Fatalf("notices:\n%s", notices)
	}
}

// TestWatchStopsOnARefusal: a request the validator refuses (a bad
// filter) is not retried; an unavailable validator is.
func TestWatchStopsOnARefusal(t *testing.T) {
	a := newSSEServer(t,
		func(w http.ResponseWriter, r *http.Request) { http.Error(w, "busy", http.StatusServiceUnavailable) },
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_parameter","message":"wallets: not an address","retryable":false}}`))
		})
	_, notices, err := runWatch(t, "--validator", a.URL, "--wallet", "nope", "--backoff", "1ms")
	if err == nil || !strings.Contains(err.Error(), "not an address") {
		t.Fatalf("watch ended with %v", err)
	}
	if len(a.seen()) != 2 || !strings.Contains(notices, "503") {
		t.Fatalf("requests %+v, notices:\n%s", a.seen(), notices)
	}
	if _, _, err := runWatch(t, "--validator", a.URL, "--org", "x"); err == nil {
		t.Fatal("--org without --wallet accepted")
	}
}
