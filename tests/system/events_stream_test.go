package system

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// streamLog is what one client received from the event stream, across its
// connections.
type streamLog struct {
	mu       sync.Mutex
	events   []api.Event
	problems []string // control messages and anything out of order
}

func (l *streamLog) add(ev api.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.events); n > 0 {
		prev, _ := strconv.ParseUint(l.events[n-1].ID, 10, 64)
		if id, err := strconv.ParseUint(ev.ID, 10, 64); err != nil || id != prev+1 {
			l.problems = append(l.problems, fmt.Sprintf("event %s after %d", ev.ID, prev))
		}
	}
	l.events = append(l.events, ev)
}

func (l *streamLog) problem(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, s)
}

func (l *streamLog) snapshot() ([]api.Event, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]api.Event(nil), l.events...), append([]string(nil), l.problems...)
}

func (l *streamLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// contentEvents counts the write events received; the log also holds each
// leader's announcement and finality events.
func (l *streamLog) contentEvents() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ev := range l.events {
		if ev.Type == api.EventContent {
			n++
		}
	}
	return n
}

// lastID is the id of the last event received, "0" before the first.
func (l *streamLog) lastID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return "0"
	}
	return l.events[len(l.events)-1].ID
}

// follow reads base's event stream, resuming after lastID as a
// reconnecting EventSource does (the Last-Event-ID header), into l until
// the connection ends.
func follow(ctx context.Context, base, lastID string, l *streamLog) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events/stream", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/v1/events/stream: %s", base, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	var id, name, data string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				name = value
			case "data":
				data = value
			}
			continue
		}
		switch {
		case name == api.EventGap || name == api.EventDropped:
			l.problem(name + ": " + data)
		case id != "":
			var ev api.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.ID != id || ev.Type != name {
				l.problem(fmt.Sprintf("message id %s event %s data %s: %v", id, name, data, err))
			} else {
				l.add(ev)
			}
		}
		id, name, data = "", "", ""
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the stream ended")
}

// alive reports whether node n's process runs.
func (n *node) alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// commitSomewhere submits form through the running validators in turn
// until the proposal is committed: a retry of the same form is safe (an id
// is spent once), also when the validator that took it died.
func (c *cluster) commitSomewhere(ctx context.Context, form map[string][]string, id common.Hash) error {
	var last error
	for attempt := 0; ctx.Err() == nil; attempt++ {
		n := c.nodes[attempt%len(c.nodes)]
		if !n.alive() {
			continue
		}
		client := c.client(n)
		client.HTTP = &http.Client{Timeout: 30 * time.Second}
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		sub, err := client.SubmitAndWait(actx, proposal.Write, form, 10*time.Second)
		status := sub.Receipt.Status
		if sub.HTTPStatus == http.StatusOK {
			status = sub.Existing.Status
		}
		if err == nil && !api.Committed(status) {
			var s api.ProposalStatus
			s, err = client.WaitFinal(actx, id, nil)
			status = s.Status
		}
		cancel()
		if err == nil && api.Committed(status) {
			return nil
		}
		if err == nil && api.Terminal(status) {
			return fmt.Errorf("proposal %s is %s", id.Hex(), status)
		}
		last = err
	}
	return fmt.Errorf("proposal %s not committed: %v", id.Hex(), last)
}

// TestEventStreamResumesAcrossLeaderKill: a client follows the leader's
// event stream while writes commit; the leader is killed with SIGKILL; the
// client reconnects to another validator with Last-Event-ID and in the end
// has every committed event exactly once, in order, as the survivors hold
// them.
func TestEventStreamResumesAcrossLeaderKill(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	leader := c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg, err := c.client(leader).BlockchainConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}

	received := &streamLog{}
	streamEnded := make(chan error, 1)
	go func() { streamEnded <- follow(ctx, leader.url(), "0", received) }()

	const writes = 40
	var committed atomic.Int64
	ids := make([]common.Hash, writes)
	writerDone := make(chan error, 1)
	go func() {
		key, err := crypto.GenerateKey()
		if err != nil {
			writerDone <- err
			return
		}
		for i := range writes {
			p := &ledgerclient.Proposal{Message: fmt.Appendf(nil, `{"title":"event %d"}`, i), ContentType: "page"}
			form, _, err := ledgerclient.Form(cfg, key, p, common.Hash{})
			if err != nil {
				writerDone <- err
				return
			}
			ids[i] = p.ID
			if err := c.commitSomewhere(ctx, form, p.ID); err != nil {
				writerDone <- err
				return
			}
			committed.Add(1)
		}
		writerDone <- nil
	}()

	harness.Eventually(t, 2*time.Minute, func() bool { return committed.Load() >= 15 && received.len() >= 10 })
	c.kill(leader)
	select {
	case err := <-streamEnded:
		t.Logf("the stream of the killed leader ended after %d events: %v", received.len(), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the killed leader's stream did not end")
	}
	var survivors []*node
	for _, n := range c.nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	resumeAt := received.lastID()
	go func() { streamEnded <- follow(ctx, survivors[0].url(), resumeAt, received) }()

	select {
	case err := <-writerDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the writes did not finish")
	}
	harness.Eventually(t, time.Minute, func() bool { return received.contentEvents() >= writes })

	got, problems := received.snapshot()
	if len(problems) > 0 {
		t.Fatalf("the client saw: %v", problems)
	}
	// Every committed write's event, once.
	seen := map[string]int{}
	for i, ev := range got {
		if ev.ID != strconv.Itoa(i+1) {
			t.Fatalf("event %d has id %s", i+1, ev.ID)
		}
		seen[ev.ProposalID]++
	}
	for _, id := range ids {
		if seen[id.Hex()] != 1 {
			t.Fatalf("proposal %s: %d events", id.Hex(), seen[id.Hex()])
		}
	}
	if n := received.contentEvents(); n != writes {
		t.Fatalf("%d write events for %d writes", n, writes)
	}
	// The same events as each survivor's history, read from its log.
	for _, n := range survivors {
		history := &streamLog{}
		hctx, hcancel := context.WithCancel(ctx)
		go func() { _ = follow(hctx, n.url(), "0", history) }()
		harness.Eventually(t, 30*time.Second, func() bool { return history.len() >= len(got) })
		hcancel()
		want, problems := history.snapshot()
		if len(problems) > 0 || len(want) < len(got) {
			t.Fatalf("validator %d's history: %d events, %v", n.id, len(want), problems)
		}
		for i := range got {
			if want[i] != got[i] {
				t.Fatalf("event %d: the client has %+v, validator %d holds %+v", i+1, got[i], n.id, want[i])
			}
		}
	}
	t.Logf("%d events, resumed after %s on validator %d", len(got), resumeAt, survivors[0].id)
}
