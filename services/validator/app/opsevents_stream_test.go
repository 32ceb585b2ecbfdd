package app

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// sseMessage is one message of a stream: a real event (with an id) or a
// control event (without).
type sseMessage struct {
	id, name, data string
}

// nextMessage reads the stream up to its next message with an event name.
func nextMessage(t *testing.T, sc *bufio.Scanner) sseMessage {
	t.Helper()
	var m sseMessage
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && m.name != "":
			return m
		case line == "":
			m = sseMessage{}
		case strings.HasPrefix(line, "id: "):
			m.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			m.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			m.data = strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("the stream ended: %v", sc.Err())
	return m
}

// opsStreamID is the form of an operational event's stream id: the
// process's boot id, a dash, the event's id.
var opsStreamID = regexp.MustCompile(`^([0-9a-f]{16})-([0-9]+)$`)

// TestOpsEventStream: /v1/ops/events/stream carries this validator's
// operational events, not the replicated ones: a refused proposal arrives
// with its stream id, a write committed meanwhile does not; a stream
// resuming after an id gets only what followed it, one resuming from
// another process's id a reset; the budget of streams per client is one
// across both stream routes.
func TestOpsEventStream(t *testing.T) {
	base := startMockWith(t, func(c *Config) { c.EventsStreamPerIP = 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(path string, headers ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	stream := func(path string, headers ...string) (*http.Response, *bufio.Scanner) {
		t.Helper()
		resp := open(path, headers...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		sc := bufio.NewScanner(resp.Body)
		// The retry hint comes first: from then on the stream has its
		// starting point.
		if !sc.Scan() || !strings.HasPrefix(sc.Text(), "retry: ") {
			t.Fatalf("%s opens with %q", path, sc.Text())
		}
		return resp, sc
	}
	refusal := func(m sseMessage, reason string) (boot string, ev api.OpsEvent) {
		t.Helper()
		sid := opsStreamID.FindStringSubmatch(m.id)
		if sid == nil || m.name != "intake.refused" {
			t.Fatalf("message %+v, want intake.refused with a stream id", m)
		}
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != m.name || sid[2] != strconv.FormatUint(ev.ID, 10) || ev.Attributes.Reason != reason {
			t.Fatalf("message %+v: data %+v, want the refusal %s with the id %s", m, ev, reason, sid[2])
		}
		return sid[1], ev
	}

	a, other := newAuthor(t), newAuthor(t)
	_, live := stream("/v1/ops/events/stream?types=intake,proposal")
	forged := common.HexToHash("0x0f0e")
	if code, body := post(t, base, a.form(t, forged, "x", other.key)); code != http.StatusUnauthorized {
		t.Fatalf("forged: %d %v", code, body)
	}
	first := nextMessage(t, live)
	boot, ev := refusal(first, string(apierror.InvalidSignature))
	if ev.Attributes.ProposalID != forged.Hex() || ev.Attributes.Wallet != strings.ToLower(a.wallet.Hex()) {
		t.Fatalf("the refusal %+v", ev)
	}

	// A write commits (a content event, not on this stream), then the same
	// id with another message is refused: the next event.
	id := common.HexToHash("0x0f0f")
	if code, body := post(t, base, a.form(t, id, `{"title":"one"}`, a.key)); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, body)
	}
	waitCommitted(t, base, id)
	if code, body := post(t, base, a.form(t, id, `{"title":"two"}`, a.key)); code != http.StatusConflict {
		t.Fatalf("conflicting submission: %d %v", code, body)
	}
	second := nextMessage(t, live)
	if b, _ := refusal(second, string(apierror.ProposalIDConflict)); b != boot {
		t.Fatalf("boot %s, then %s", boot, b)
	}

	// Resuming after the first refusal: the second, nothing before it.
	resumed, sc := stream("/v1/ops/events/stream?types=intake", "Last-Event-ID", first.id)
	if m := nextMessage(t, sc); m.id != second.id {
		t.Fatalf("resumed after %s: %+v, want %s", first.id, m, second.id)
	}
	// Resuming from another process's id: a reset naming this one, then
	// the events this process kept from its start.
	_, sc = stream("/v1/ops/events/stream?lastEventId=0123456789abcdef-7")
	var reset api.StreamReset
	if m := nextMessage(t, sc); m.name != api.EventReset || m.id != "" || json.Unmarshal([]byte(m.data), &reset) != nil ||
		reset != (api.StreamReset{LastEventID: "0123456789abcdef-7", BootID: boot}) {
		t.Fatalf("from another process: %+v, want a reset", m)
	}
	if m := nextMessage(t, sc); m.id != boot+"-1" {
		t.Fatalf("after the reset: %+v, want %s-1", m, boot)
	}

	// Three streams open (the per-client budget here): a content stream is
	// refused like an operational one, and a closed one frees a slot.
	for _, route := range []string{"/v1/events/stream", "/v1/ops/events/stream"} {
		var e apierror.Body
		if resp := open(route); resp.StatusCode != http.StatusTooManyRequests || json.NewDecoder(resp.Body).Decode(&e) != nil ||
			e.Error.Code != apierror.RateLimited || e.Error.Details["limit"] != float64(3) {
			t.Fatalf("a 4th stream on %s: %d %+v", route, resp.StatusCode, e.Error)
		}
	}
	resumed.Body.Close()
	waitFor(t, func() bool {
		resp := open("/v1/events/stream")
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	var e apierror.Body
	if resp := open("/v1/ops/events/stream?types=nope"); resp.StatusCode != http.StatusBadRequest ||
		json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error.Details["field"] != "types" {
		t.Fatalf("types=nope: %d %+v", resp.StatusCode, e.Error)
	}
}
