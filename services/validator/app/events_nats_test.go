package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/natsconn"
	"github.com/contentledger/contentledger/pkg/natsconn/natsconntest"
	httpapi "github.com/contentledger/contentledger/services/validator/internal/api"
)

// TestMockValidatorPublishesEventsWhenAsked: a MOCK validator with
// NATS_EVENTS=on declares LEDGER_EVENTS and publishes every event once, with
// its id as Nats-Msg-Id, on ledger.events.<type>.<wallet>: each committed
// write's, and its own announcement as leader (ledger.events.consensus._);
// /v1/events/publisher reports it caught up.
func TestMockValidatorPublishesEventsWhenAsked(t *testing.T) {
	ns := startJetStream(t)
	base := startMockWith(t, func(c *Config) { c.NATSEvents, c.NATSURL = "on", ns.ClientURL() })

	a := newAuthor(t)
	var ids []common.Hash
	for i := range 3 {
		h := common.HexToHash(fmt.Sprintf("0x%x", 0x100+i))
		if code, body := post(t, base, a.form(t, h, `{"n":1}`, a.key)); code != http.StatusAccepted {
			t.Fatalf("submit: %d %v", code, body)
		}
		waitCommitted(t, base, h)
		ids = append(ids, h)
	}

	var st httpapi.PublisherStatus
	waitFor(t, func() bool {
		st = httpapi.PublisherStatus{}
		return getJSON(t, base+"/v1/events/publisher", &st) == http.StatusOK && st.Status != nil &&
			st.Publishing && st.LastEventID >= 4 && st.LastPublishedID == st.LastEventID && st.Lag == 0
	})
	if !st.Enabled || st.Stream != "LEDGER_EVENTS" || st.NATS != "CONNECTED" || st.Published != st.LastEventID {
		t.Fatalf("publisher status %+v %+v", st, *st.Status)
	}
	// /health reports the publisher's connection, the only NATS one here.
	var health struct {
		Checks map[string]struct {
			Status string `json:"status"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if getJSON(t, base+"/health", &health); health.Checks["nats"].Status != "ok" || !strings.Contains(health.Checks["nats"].Detail, "event publication") {
		t.Fatalf("health checks %+v", health.Checks)
	}
	// The runtime snapshot counts what went over that connection: the
	// events published, each acknowledged by the stream.
	var rt api.RuntimeSnapshot
	if code := getJSON(t, base+"/v1/ops/snapshots/runtime", &rt); code != http.StatusOK || len(rt.NATS) != 1 {
		t.Fatalf("runtime snapshot: %d %+v", code, rt.NATS)
	}
	if c := rt.NATS[0]; c.Name != "validator-1-events" || !slices.Equal(c.Uses, []string{"events", "streams"}) || !c.Connected ||
		c.Status != "CONNECTED" || c.ServerURL != ns.ClientURL() || c.OutMsgs < st.LastEventID || c.InMsgs < st.LastEventID ||
		c.OutBytes == 0 || c.InBytes == 0 || c.Reconnects != 0 || c.LastError != "" {
		t.Fatalf("NATS connection %+v", c)
	}

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, "LEDGER_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	wallet := strings.ToLower(a.wallet.Hex())
	var writes, leaders int
	for seq := uint64(1); seq <= st.LastEventID; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var ev api.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(jetstream.MsgIDHeader) != ev.ID || ev.ID != strconv.FormatUint(seq, 10) {
			t.Fatalf("message %d: %v %+v", seq, m.Header, ev)
		}
		switch ev.Type {
		case api.EventContent:
			if writes >= len(ids) || ev.ProposalID != ids[writes].Hex() || m.Subject != "ledger.events.content."+wallet || ev.Wallet != wallet {
				t.Fatalf("message %d: %s %+v", seq, m.Subject, ev)
			}
			writes++
		case api.EventConsensus: // the leader's announcement; finality, as the mock epochs pass
			if m.Subject != "ledger.events.consensus._" || ev.Wallet != "" || ev.Timestamp == 0 {
				t.Fatalf("message %d: %s %+v", seq, m.Subject, ev)
			}
			if ev.Action == "leader" {
				leaders++
			}
		default:
			t.Fatalf("message %d: %s %+v", seq, m.Subject, ev)
		}
	}
	if writes != len(ids) || leaders != 1 {
		t.Fatalf("%d write events and %d leader events, want %d and 1", writes, leaders, len(ids))
	}
}

// TestNoPublisherByDefaultInMock: without NATS_EVENTS=on a MOCK validator
// uses no NATS, and says so.
func TestNoPublisherByDefaultInMock(t *testing.T) {
	base := startMock(t)
	var st httpapi.PublisherStatus
	if code := getJSON(t, base+"/v1/events/publisher", &st); code != http.StatusOK || st.Enabled || st.Status != nil {
		t.Fatalf("%d %+v", code, st)
	}
}

func TestEventPublishingSettings(t *testing.T) {
	for _, c := range []struct {
		mode    Mode
		setting string
		want    bool
	}{
		{Mock, "", false}, {Mock, "auto", false}, {Mock, "on", true}, {Mock, "off", false},
		{Testnet, "", true}, {Testnet, "auto", true}, {Mainnet, "on", true}, {Testnet, "off", false},
	} {
		if got := (Config{Mode: c.mode, NATSEvents: c.setting}).PublishesEvents(); got != c.want {
			t.Errorf("%s with NATS_EVENTS=%q publishes: %t", c.mode, c.setting, got)
		}
	}
	ok := Config{Mode: Mock, NodeID: 1, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1, EpochLength: 1, PaymentWait: 1,
		MaxPending: 1, MaxBatch: 1, MaxPendingMessages: 1, MicroBatch: 1, MicroBatchBytes: 1, NATSEvents: "on", NATSURL: "nats://x:4222"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Config){
		"NATS_EVENTS is":             func(c *Config) { c.NATSEvents = "yes" },
		"NATS_URL":                   func(c *Config) { c.NATSURL = "" },
		"NATS_EVENTS_*":              func(c *Config) { c.NATSEventsMaxMsgs = -1 },
		"not a valid JetStream name": func(c *Config) { c.NATSEventsStream = "a.b" },
		"NATS_EVENTS_REPLICAS is 6":  func(c *Config) { c.NATSEventsReplicas = 6 },
		"NATS_EVENTS_REPLICAS is -1": func(c *Config) { c.NATSEventsReplicas = -1 },
	} {
		c := ok
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestEventPublisherLagMetric: /metrics reports the publication of the
// event log: caught up, no lag and every event published; with NATS gone,
// a committed write's event is applied and not published, and the lag
// counts it.
func TestEventPublisherLagMetric(t *testing.T) {
	ns := startJetStream(t)
	const token = "s3cret"
	base := startMockWith(t, func(c *Config) { c.NATSEvents, c.NATSURL, c.AuthToken = "on", ns.ClientURL(), token })
	metric := func(name string) float64 {
		t.Helper()
		v, ok := value(t, scrape(t, base, token), name, nil)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return v
	}
	var st httpapi.PublisherStatus
	waitFor(t, func() bool {
		st = httpapi.PublisherStatus{}
		return getJSONWith(t, base+"/v1/events/publisher", token, &st) == http.StatusOK && st.Status != nil &&
			st.Publishing && st.LastEventID >= 1 && st.LastPublishedID == st.LastEventID
	})
	if metric("validator_event_publisher_publishing") != 1 || metric("validator_event_publisher_lag_events") != 0 ||
		metric("validator_event_publisher_published_total") < float64(st.LastEventID) {
		t.Fatalf("caught up: publishing %v, lag %v, published %v; status %+v", metric("validator_event_publisher_publishing"),
			metric("validator_event_publisher_lag_events"), metric("validator_event_publisher_published_total"), *st.Status)
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	a := newAuthor(t)
	id := common.HexToHash("0x1a9")
	form := a.form(t, id, `{"n":1}`, a.key)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/propose-write", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %v %v", resp, err)
	}
	resp.Body.Close()
	waitFor(t, func() bool { return metric("validator_event_publisher_lag_events") >= 1 })
	if metric("validator_event_publisher_publishing") != 1 {
		t.Fatal("not publishing while leading")
	}
}

// startNATSCluster starts n JetStream servers clustered over routes on
// loopback and returns their client URLs, comma separated.
func startNATSCluster(t *testing.T, n int) string {
	t.Helper()
	// The route port takes no "any port" value: each server gets one
	// that was free a moment ago, and every server routes to the first.
	seedPort := freePort(t)
	seed := &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", seedPort)}
	var urls []string
	var servers []*server.Server
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: -1, JetStream: true,
			StoreDir: t.TempDir(), SyncAlways: true, NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "ledger-test", Host: "127.0.0.1", Port: seedPort}, Routes: []*url.URL{seed}}
		if i > 0 {
			opts.Cluster.Port = freePort(t)
		}
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		servers = append(servers, ns)
	}
	// A clustered server is ready once its JetStream has found its peers.
	for _, ns := range servers {
		if !ns.ReadyForConnections(30 * time.Second) {
			t.Fatal("NATS cluster not ready")
		}
		urls = append(urls, ns.ClientURL())
	}
	return strings.Join(urls, ",")
}

// TestEventStreamReplicasFromConfiguration: NATS_EVENTS_REPLICAS=3 against
// a three-server JetStream cluster declares LEDGER_EVENTS with three
// copies, one on each server, and the events are published to it.
func TestEventStreamReplicasFromConfiguration(t *testing.T) {
	urls := startNATSCluster(t, 3)
	base := startMockWith(t, func(c *Config) { c.NATSEvents, c.NATSURL, c.NATSEventsReplicas = "on", urls, 3 })
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The leader declares the stream once the cluster's JetStream has
	// elected its meta leader; the publisher retries until then.
	var info *jetstream.StreamInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := js.Stream(ctx, "LEDGER_EVENTS")
		if err == nil {
			info, err = s.Info(ctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && len(info.Cluster.Replicas) == 2 && info.State.Msgs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LEDGER_EVENTS with 3 copies holding events not seen within 30s: %v %+v", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.Config.Replicas != 3 {
		t.Fatalf("stream config has %d replicas, want 3", info.Config.Replicas)
	}
	var st httpapi.PublisherStatus
	waitFor(t, func() bool {
		st = httpapi.PublisherStatus{}
		return getJSON(t, base+"/v1/events/publisher", &st) == http.StatusOK && st.Status != nil &&
			st.Publishing && st.LastEventID >= 1 && st.LastPublishedID == st.LastEventID
	})
}

// freePort returns a loopback TCP port that was free when asked.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestValidatorRefusesOldNATSServer: a validator whose NATS server
// announces 2.11.9 refuses to start, naming the version found and the one
// required.
func TestValidatorRefusesOldNATSServer(t *testing.T) {
	cfg := mockConfig(t.TempDir())
	cfg.NATSEvents, cfg.NATSURL = "on", natsconntest.Server(t, "2.11.9")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, cfg, zaptest.NewLogger(t), nil)
	if !errors.Is(err, natsconn.ErrServerVersion) || !strings.Contains(err.Error(), "2.11.9") ||
		!strings.Contains(err.Error(), natsconn.MinServerVersion) {
		t.Fatalf("Run: %v, want a refusal naming 2.11.9 and %s", err, natsconn.MinServerVersion)
	}
}

// startJetStream starts an embedded JetStream server on loopback, stopped
// when the test ends.
func startJetStream(t *testing.T) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		SyncAlways: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}
