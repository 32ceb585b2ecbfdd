package app

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// nextEvent reads the stream up to its next message with an id and
// returns that message's event name and data.
func nextEvent(t *testing.T, sc *bufio.Scanner) (name string, ev api.Event) {
	t.Helper()
	var id string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && id != "":
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.ID != id {
				t.Fatalf("id: %s, data id %s", id, ev.ID)
			}
			return name, ev
		}
	}
	t.Fatalf("the stream ended: %v", sc.Err())
	return "", api.Event{}
}

func TestEventStreamRoutes(t *testing.T) {
	base := startMock(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get := func(path string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	var e apierror.Body
	resp := get("/v1/events/stream?organizations=default")
	if resp.StatusCode != http.StatusBadRequest || json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error.Details["field"] != "organizations" {
		t.Fatalf("organizations without wallets: %d %+v", resp.StatusCode, e.Error)
	}

	a := newAuthor(t)
	// Addresses in any case. (The operational events have their own
	// stream: TestOpsEventStream.)
	resp = get("/v1/events/stream?wallets=0x" + strings.ToUpper(a.wallet.Hex()[2:]) + "&lastEventId=0")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	id := common.BytesToHash([]byte("event stream route"))
	if code, body := post(t, base, a.form(t, id, `{"title":"streamed"}`, a.key)); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, body)
	}
	waitCommitted(t, base, id)
	name, ev := nextEvent(t, sc)
	if name != api.EventContent || ev.Type != api.EventContent || ev.ProposalID != id.Hex() ||
		!strings.EqualFold(ev.Wallet, a.wallet.Hex()) || ev.Action != "write" {
		t.Fatalf("%s %+v", name, ev)
	}
}
