package opsevents

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/events"
)

// TestRecorderIsALog: the ring read as a log of consecutive ids, the
// oldest of which are gone once it wrapped.
func TestRecorderIsALog(t *testing.T) {
	r := New(Options{Capacity: 5})
	if r.FirstEventID() != 1 || r.LastEventID() != 0 {
		t.Fatalf("empty: first %d last %d", r.FirstEventID(), r.LastEventID())
	}
	if got, _ := r.EventsSince(0, 0); len(got) != 0 {
		t.Fatalf("empty: %v", got)
	}
	for i := range 12 {
		r.LeaderChanged(uint64(i+1), 1, "LEADER")
	}
	if r.FirstEventID() != 8 || r.LastEventID() != 12 {
		t.Fatalf("first %d last %d, want 8 and 12", r.FirstEventID(), r.LastEventID())
	}
	idsOf := func(evs []Event) (out []uint64) {
		for _, e := range evs {
			if e.Term != e.ID {
				t.Fatalf("event %d holds term %d", e.ID, e.Term)
			}
			out = append(out, e.ID)
		}
		return out
	}
	for _, tc := range []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 0, []uint64{8, 9, 10, 11, 12}},
		{3, 2, []uint64{8, 9}},
		{9, 2, []uint64{10, 11}},
		{11, 10, []uint64{12}},
		{12, 10, nil},
		{99, 10, nil},
	} {
		got, err := r.EventsSince(tc.after, tc.limit)
		if err != nil || !slices.Equal(idsOf(got), tc.want) {
			t.Errorf("EventsSince(%d, %d) = %v, %v; want %v", tc.after, tc.limit, idsOf(got), err, tc.want)
		}
	}
	if b := r.Boot(); !isBoot(b) || b == New(Options{}).Boot() {
		t.Fatalf("boot ids %q: want 16 hex digits, another for another recorder", b)
	}
}

// sse is one message of a stream as a client parses it.
type sse struct {
	id, event, data string
	hasID           bool
}

// opsClient reads one stream.
type opsClient struct {
	t    *testing.T
	resp *http.Response
	msgs chan sse
}

func openOps(t *testing.T, url string, headers ...string) *opsClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &opsClient{t: t, resp: resp, msgs: make(chan sse, 1000)}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		return c
	}
	// The retry hint comes first: from then on the stream has its
	// starting point.
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "retry: ") {
		t.Fatalf("the stream opens with %q, want the retry hint", sc.Text())
	}
	go func() {
		defer close(c.msgs)
		var m sse
		for sc.Scan() {
			line := sc.Text()
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "":
				if m.event != "" {
					c.msgs <- m
				}
				m = sse{}
			case "id":
				m.id, m.hasID = value, true
			case "event":
				m.event = value
			case "data":
				m.data = value
			}
		}
	}()
	return c
}

func (c *opsClient) next() sse {
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
	return sse{}
}

// ids reads n events and returns their stream ids.
func (c *opsClient) ids(n int) []string {
	c.t.Helper()
	var out []string
	for range n {
		m := c.next()
		if !m.hasID {
			c.t.Fatalf("message %+v without an id", m)
		}
		out = append(out, m.id)
	}
	return out
}

func decodeData[T any](t *testing.T, m sse) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(m.data), &v); err != nil {
		t.Fatalf("data %q: %v", m.data, err)
	}
	return v
}

// startOpsStream serves rec's stream on /v1/ops/events/stream.
func startOpsStream(t *testing.T, rec *Recorder) (*events.Hub[Event], *httptest.Server) {
	t.Helper()
	hub := events.New(rec, NewStream(rec), events.Config{KeepAlive: time.Hour}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	mux := http.NewServeMux()
	mux.Handle("/v1/ops/events/stream", hub.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { cancel(); srv.Close(); <-done })
	return hub, srv
}

// TestStream: live events with the boot id in their ids and their API form
// as data; resumption after an id of this process; a reset for any other;
// a gap when the ring no longer holds what follows the resumption point.
func TestStream(t *testing.T) {
	rec := New(Options{Capacity: 5, Fold: -1})
	rec.LeaderChanged(1, 1, "LEADER")
	_, srv := startOpsStream(t, rec)
	url := srv.URL + "/v1/ops/events/stream"
	sid := func(n int) string { return rec.Boot() + "-" + strconv.Itoa(n) }

	live := openOps(t, url)
	// Without a resumption point the stream starts at new events.
	wallet, id := common.HexToAddress("0x0a"), common.HexToHash("0x0b")
	rec.Refused("invalid_signature", wallet, id)
	m := live.next()
	if m.id != sid(2) || m.event != "intake.refused" {
		t.Fatalf("message %+v, want id %s, event intake.refused", m, sid(2))
	}
	kept, _ := rec.Recent(1)
	if got := decodeData[api.OpsEvent](t, m); got.ID != 2 || got.Message != kept[0].API().Message ||
		got.Attributes.Reason != "invalid_signature" || got.Attributes.ProposalID != id.Hex() {
		t.Fatalf("data %+v, want %+v", got, kept[0].API())
	}

	// Resuming after an id of this process: only what followed it.
	rec.Backpressure(true, 64, 64)
	rec.Backpressure(false, 10, 64)
	if got := live.ids(2); !slices.Equal(got, []string{sid(3), sid(4)}) {
		t.Fatalf("live %v", got)
	}
	c := openOps(t, url, "Last-Event-ID", sid(2))
	if got := c.ids(2); !slices.Equal(got, []string{sid(3), sid(4)}) {
		t.Fatalf("resumed after %s: %v", sid(2), got)
	}
	c = openOps(t, url+"?lastEventId="+sid(4))
	rec.WriteStalls("L0", 1)
	if got := c.ids(1); got[0] != sid(5) {
		t.Fatalf("resumed at the newest: %v, want %s", got, sid(5))
	}

	// An id of another process (a restart, another validator), a bare
	// number, or one ahead of this process: a reset, then everything kept.
	for _, point := range []string{"0123456789abcdef-3", "3", sid(99)} {
		c = openOps(t, url, "Last-Event-ID", point)
		m = c.next()
		if r := decodeData[api.StreamReset](t, m); m.event != api.EventReset || m.hasID || r != (api.StreamReset{LastEventID: point, BootID: rec.Boot()}) {
			t.Fatalf("resuming from %s: %+v, want a reset without an id", point, m)
		}
		if got := c.ids(5); !slices.Equal(got, []string{sid(1), sid(2), sid(3), sid(4), sid(5)}) {
			t.Fatalf("after the reset: %v", got)
		}
	}

	// The ring (5 events) wrapped: resuming before its oldest is a gap.
	for range 3 {
		rec.LeaderChanged(2, 2, "FOLLOWER")
	}
	c = openOps(t, url, "Last-Event-ID", sid(1))
	m = c.next()
	if g := decodeData[api.StreamGap](t, m); m.event != api.EventGap || m.hasID ||
		g != (api.StreamGap{AfterID: sid(1), FirstID: sid(4), Skipped: 2}) {
		t.Fatalf("first message %+v, want a gap from %s to %s", m, sid(1), sid(4))
	}
	if got := c.ids(5); !slices.Equal(got, []string{sid(4), sid(5), sid(6), sid(7), sid(8)}) {
		t.Fatalf("after the gap: %v", got)
	}
	c = openOps(t, url, "Last-Event-ID", "fedcba9876543210-1")
	if m = c.next(); m.event != api.EventReset {
		t.Fatalf("reset: %+v", m)
	}
	if m = c.next(); m.event != api.EventGap || decodeData[api.StreamGap](t, m).FirstID != sid(4) {
		t.Fatalf("after a reset over a wrapped ring: %+v, want a gap", m)
	}
}

// TestStreamFilters: types by name or family, and a least severity.
func TestStreamFilters(t *testing.T) {
	rec := New(Options{Fold: -1})
	_, srv := startOpsStream(t, rec)
	url := srv.URL + "/v1/ops/events/stream"
	sid := func(n int) string { return rec.Boot() + "-" + strconv.Itoa(n) }
	wallet := common.HexToAddress("0x0a")
	byType := openOps(t, url+"?types=gc,leader.changed")
	bySeverity := openOps(t, url+"?severity=warn")
	both := openOps(t, url+"?types=gc&types=intake.refused&severity=warn")

	rec.LeaderChanged(1, 1, "LEADER")                    // 1 info
	rec.WritesBlocked(wallet, 2, 1)                      // 2 warn
	rec.Refused("invalid_signature", wallet, [32]byte{}) // 3 info
	rec.Refused("overloaded", wallet, [32]byte{})        // 4 warn
	rec.WritesAllowed(wallet)                            // 5 info
	rec.LeaderChanged(2, 0, "FOLLOWER")                  // 6 warn
	rec.Retracted([32]byte{}, wallet, true, false)       // 7 critical
	for name, tc := range map[string]struct {
		c    *opsClient
		want []int
	}{
		"types": {byType, []int{1, 2, 5, 6}}, "severity": {bySeverity, []int{2, 4, 6, 7}}, "both": {both, []int{2, 4}},
	} {
		var want []string
		for _, n := range tc.want {
			want = append(want, sid(n))
		}
		if got := tc.c.ids(len(want)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// TestStreamRejectsBadRequests: 400 invalid_field naming the parameter or
// the header, before anything is streamed.
func TestStreamRejectsBadRequests(t *testing.T) {
	rec := New(Options{})
	_, srv := startOpsStream(t, rec)
	for _, tc := range []struct{ query, header, field string }{
		{"?types=nope", "", "types"},
		{"?types=gc,", "", "types"},
		{"?types=leader.", "", "types"},
		{"?severity=loud", "", "severity"},
		{"?severity=warn&severity=info", "", "severity"},
		{"?wallets=0x1234567890abcdef1234567890abcdef12345678", "", "wallets"},
		{"?path=/ledger", "", "path"},
		{"", "abc", "Last-Event-ID"},
		{"", "0123456789ABCDEF-1", "Last-Event-ID"},
		{"", "0123456789abcdef-", "Last-Event-ID"},
		{"", "0123456789abcdef-18446744073709551616", "Last-Event-ID"},
		{"?lastEventId=x-1", "", "lastEventId"},
		{"?lastEventId=1&lastEventId=2", "", "lastEventId"},
	} {
		c := openOps(t, srv.URL+"/v1/ops/events/stream"+tc.query, "Last-Event-ID", tc.header)
		var e apierror.Body
		if c.resp.StatusCode != http.StatusBadRequest || json.NewDecoder(c.resp.Body).Decode(&e) != nil || e.Error == nil ||
			e.Error.Code != apierror.InvalidField || e.Error.Details["field"] != tc.field {
			t.Errorf("%s (Last-Event-ID %q): %d %+v, want 400 invalid_field naming %s", tc.query, tc.header, c.resp.StatusCode, e.Error, tc.field)
		}
	}
}

// FuzzParseStreamID: an accepted id is a boot id (16 lowercase hex digits)
// and a dash, or nothing, then the decimal form of a uint64.
func FuzzParseStreamID(f *testing.F) {
	for _, s := range []string{"0123456789abcdef-42", "42", "0123456789abcdef-", "-1", "0123456789abcdef-18446744073709551616",
		"0123456789ABCDEF-1", "0123456789abcdef-1-2", "", " 1", "0123456789abcdef-007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		boot, id, ok := ParseStreamID(s)
		if !ok {
			if boot != "" || id != 0 {
				t.Fatalf("%q refused with %q, %d", s, boot, id)
			}
			return
		}
		seq := s
		if boot != "" {
			if !isBoot(boot) || !strings.HasPrefix(s, boot+"-") {
				t.Fatalf("%q: boot %q", s, boot)
			}
			seq = s[len(boot)+1:]
		}
		back, err := strconv.ParseUint(seq, 10, 64)
		if err != nil || back != id || strings.TrimLeft(seq, "0123456789") != "" {
			t.Fatalf("%q = %q, %d", s, boot, id)
		}
	})
}

// FuzzParseFilter: any query either fails with invalid_field naming one of
// the filters, or gives a filter that sends an event exactly when its type
// was asked for (or none was) and its severity is at least the one asked.
func FuzzParseFilter(f *testing.F) {
	for _, q := range []string{"", "types=gc", "types=gc,leader.changed&severity=warn", "types=", "types=gc.", "severity=critical",
		"severity=warn&severity=info", "wallets=x", "types=snapshot&types=chain.feed_stale", "types=storage,,gc"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, aerr := ParseFilter(q)
		if aerr != nil {
			if aerr.Code != apierror.InvalidField || !slices.Contains([]any{"types", "severity", "wallets", "organizations", "path"}, aerr.Details["field"]) {
				t.Fatalf("%q: %v", raw, aerr)
			}
			return
		}
		var asked []string
		for _, v := range q["types"] {
			for item := range strings.SplitSeq(v, ",") {
				asked = append(asked, strings.TrimSpace(item))
			}
		}
		least := Info
		if vs := q["severity"]; len(vs) == 1 {
			least, _ = parseSeverity(vs[0])
		}
		for _, typ := range Types() {
			name := typ.String()
			family, _, _ := strings.Cut(name, ".")
			wanted := len(asked) == 0 || slices.Contains(asked, name) || slices.Contains(asked, family)
			for _, sev := range Severities() {
				if got := flt.Match(Event{Type: typ, Severity: sev}); got != (wanted && sev >= least) {
					t.Fatalf("%q: Match(%s, %s) = %v", raw, name, sev, got)
				}
			}
		}
	})
}
