package system

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devnats"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// publisherStatus is the part of GET /v1/events/publisher the test reads.
type publisherStatus struct {
	Enabled         bool   `json:"enabled"`
	Publishing      bool   `json:"publishing"`
	LastPublishedID uint64 `json:"lastPublishedId"`
	LastEventID     uint64 `json:"lastEventId"`
	Published       uint64 `json:"published"`
	Duplicates      uint64 `json:"duplicates"`
}

// TestEventsReachNATSOnceAcrossLeaderKill: three validators publish their
// replicated events to LEDGER_EVENTS while clients write; the leader is
// killed with SIGKILL in the middle, a survivor takes over, and a
// JetStream consumer reading the stream from its start sees every event id
// from 1 to the last committed exactly once, in order, each with its id as
// Nats-Msg-Id, and the event of every accepted proposal.
func TestEventsReachNATSOnceAcrossLeaderKill(t *testing.T) {
	ns, err := devnats.Start(devnats.Config{Port: -1, StoreDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Stop)
	c := newCluster(t, 3, "MOCK", "SVC_VALIDATOR_NATS_URL="+ns.ClientURL(), "SVC_VALIDATOR_NATS_EVENTS=on")
	leader := c.waitLeader()
	var survivors []*node
	for _, n := range c.nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	cfg, err := c.client(leader).BlockchainConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	status := func(n *node) (publisherStatus, bool) {
		var st publisherStatus
		return st, get(n.url()+"/v1/events/publisher", &st) == nil && st.Enabled
	}

	var mu sync.Mutex
	accepted := map[common.Hash]bool{} // answered 202
	var stopped sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		stopped.Go(func() {
			key, _ := crypto.GenerateKey()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := c.nodes[(w+i)%len(c.nodes)]
				p := &ledgerclient.Proposal{Message: []byte(`{"title":"published"}`), ContentType: "page"}
				form, _, err := ledgerclient.Form(cfg, key, p, common.Hash{})
				if err != nil {
					t.Error(err)
					return
				}
				// Not cancelled by stop: once the writers are done, no
				// submission is left that could still commit.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				sub, err := c.client(n).Submit(ctx, proposal.Write, form)
				cancel()
				if err == nil && sub.HTTPStatus == http.StatusAccepted {
					mu.Lock()
					accepted[p.ID] = true
					mu.Unlock()
				}
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(accepted) }

	// The leader publishes while the writes commit.
	harness.Eventually(t, 60*time.Second, func() bool {
		st, ok := status(leader)
		return ok && st.Publishing && st.LastPublishedID >= 40
	})
	c.kill(leader)
	atKill := count()
	next := c.waitLeaderAmong(survivors)
	harness.Eventually(t, 60*time.Second, func() bool { return count() >= atKill+40 })
	close(stop)
	stopped.Wait()

	// Every accepted proposal commits; then the log is final.
	client := c.client(next)
	for id := range accepted {
		harness.Eventually(t, 60*time.Second, func() bool {
			s, err := client.Status(context.Background(), id, 2*time.Second)
			return err == nil && api.Committed(s.Status)
		})
	}
	c.converged(survivors...)
	var last uint64
	harness.Eventually(t, 30*time.Second, func() bool {
		a, okA := status(survivors[0])
		b, okB := status(survivors[1])
		lead, _ := status(next)
		last = a.LastEventID
		return okA && okB && a.LastEventID == b.LastEventID && lead.Publishing && lead.LastPublishedID == last
	})
	// The new leader took over where the stream ended: it published what
	// came after, and nothing again that the window had to absorb.
	if st, _ := status(next); st.Duplicates != 0 || st.Published == 0 || st.Published >= last {
		t.Fatalf("the new leader published %d events and had %d duplicates; the log holds %d", st.Published, st.Duplicates, last)
	}
	if last < uint64(len(accepted)) {
		t.Fatalf("the log ends at event %d; %d proposals were accepted", last, len(accepted))
	}

	// A consumer of the stream, from its first message.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "LEDGER_EVENTS", jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	proposals := map[string]int{}
	var got uint64
	for got < last && ctx.Err() == nil {
		// Up to the last event the survivors held: a consensus event (a
		// finality the new leader proposes) may follow it any time.
		batch, err := cons.Fetch(int(min(500, last-got)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			got++
			var ev api.Event
			if err := json.Unmarshal(msg.Data(), &ev); err != nil {
				t.Fatalf("message %d: %v", got, err)
			}
			id := strconv.FormatUint(got, 10)
			if msg.Headers().Get(jetstream.MsgIDHeader) != id || ev.ID != id {
				t.Fatalf("message %d of the stream is event %s (Nats-Msg-Id %q): not every event once, in order",
					got, ev.ID, msg.Headers().Get(jetstream.MsgIDHeader))
			}
			wallet := ev.Wallet
			if ev.Type == api.EventConsensus {
				wallet = "_" // consensus events name no wallet
			}
			if msg.Subject() != "ledger.events."+ev.Type+"."+wallet || ev.Wallet != strings.ToLower(ev.Wallet) {
				t.Fatalf("event %s on %q", id, msg.Subject())
			}
			proposals[ev.ProposalID]++
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
	}
	if got != last {
		t.Fatalf("the consumer read %d events, the log holds %d", got, last)
	}
	stream, err := js.Stream(ctx, "LEDGER_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != info.State.LastSeq || info.State.LastSeq < last {
		t.Fatalf("stream holds %d messages up to sequence %d, want every event once, at least %d", info.State.Msgs, info.State.LastSeq, last)
	}
	for id := range accepted {
		if proposals[id.Hex()] != 1 {
			t.Fatalf("accepted proposal %s has %d events in the stream", id.Hex(), proposals[id.Hex()])
		}
	}
	t.Logf("%d events published once each, in order; %d proposals accepted (%d before the kill); validator %d took over from %d",
		last, len(accepted), atKill, next.id, leader.id)
}
