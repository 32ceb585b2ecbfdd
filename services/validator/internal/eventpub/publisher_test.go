package eventpub_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/eventpub"
)

// startNATS runs an embedded JetStream server for the test, with file
// storage synced on every write as production runs it.
func startNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		SyncAlways: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("NATS not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// connect opens a connection and the publisher's JetStream context on it.
func connect(t testing.TB, s *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := eventpub.NewJetStream(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// eventLog is an in-memory replicated log: events from first to last,
// with the state machine's change signal.
type eventLog struct {
	mu      sync.Mutex
	events  []*ledgerpb.Event
	last    uint64
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

// add applies n events.
func (l *eventLog) add(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		l.last++
		w := make([]byte, 20)
		w[19], w[18] = byte(l.last), byte(l.last>>8)
		l.events = append(l.events, &ledgerpb.Event{Id: l.last, Type: api.EventContent, Action: "write",
			Path: fmt.Sprintf("/ledger/x/%d", l.last), Wallet: "0x" + hex.EncodeToString(w), Timestamp: int64(l.last), CommitIndex: l.last})
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// prune drops the events up to id, as event retention does.
func (l *eventLog) prune(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = slices.DeleteFunc(l.events, func(ev *ledgerpb.Event) bool { return ev.GetId() <= id })
}

func (l *eventLog) EventsSince(after uint64, limit int) ([]*ledgerpb.Event, error) {
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

func (l *eventLog) LastEventID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

func (l *eventLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// leader is a leadership flag with a change signal.
type leader struct {
	mu      sync.Mutex
	leading bool
	changed chan struct{}
}

func newLeader(leading bool) *leader { return &leader{leading: leading, changed: make(chan struct{})} }

func (l *leader) set(leading bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = leading
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *leader) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

func (l *leader) LeaderChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// run starts p until the test ends.
func run(t *testing.T, p *eventpub.Publisher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func newPublisher(t *testing.T, js jetstream.JetStream, log *eventLog, lead *leader) *eventpub.Publisher {
	return eventpub.New(js, log, log.Changed, lead, eventpub.Config{Window: 8, Retry: 10 * time.Millisecond, MaxRetry: 50 * time.Millisecond},
		zaptest.NewLogger(t))
}

// stored is one message of the stream.
type stored struct {
	seq     uint64
	subject string
	msgID   string
	event   api.Event
}

// readStream returns every message of the stream, in stream order.
func readStream(t *testing.T, js jetstream.JetStream) []stored {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, eventpub.DefaultStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // not declared yet
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []stored
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		st := stored{seq: seq, subject: m.Subject, msgID: m.Header.Get(jetstream.MsgIDHeader)}
		if len(m.Data) > 0 {
			if err := json.Unmarshal(m.Data, &st.event); err != nil {
				t.Fatalf("message %d: %v", seq, err)
			}
		}
		out = append(out, st)
	}
	return out
}

// ids returns the event ids of the stream's messages that carry one.
func ids(msgs []stored) []uint64 {
	var out []uint64
	for _, m := range msgs {
		if id, ok := eventpub.ParseMsgID(m.msgID); ok {
			out = append(out, id)
		}
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for id := from; id <= to; id++ {
		out = append(out, id)
	}
	return out
}

// waitIDs waits until the stream's event ids are want.
func waitIDs(t *testing.T, js jetstream.JetStream, want []uint64) []stored {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		msgs := readStream(t, js)
		got := ids(msgs)
		if slices.Equal(got, want) {
			return msgs
		}
		if time.Now().After(deadline) || len(got) > len(want) {
			t.Fatalf("stream holds events %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond) // polling the stream
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling
	}
}

func TestPublishesEveryEventOnceInOrder(t *testing.T) {
	js := connect(t, startNATS(t))
	log := newEventLog()
	log.add(20) // more than a window
	p := newPublisher(t, js, log, newLeader(true))
	run(t, p)
	waitIDs(t, js, span(1, 20))
	log.add(5)
	msgs := waitIDs(t, js, span(1, 25))
	for i, m := range msgs {
		id := uint64(i + 1)
		want := log.events[i]
		if m.msgID != eventpub.MsgID(id) || m.event.ID != m.msgID || m.event.Path != want.GetPath() || m.event.Wallet != want.GetWallet() {
			t.Fatalf("message %d: %+v, want event %d", m.seq, m, id)
		}
		if m.subject != "ledger.events.content."+want.GetWallet() {
			t.Fatalf("message %d on %q", m.seq, m.subject)
		}
	}
	waitFor(t, "status caught up", func() bool {
		st := p.Status()
		return st.Publishing && st.LastPublishedID == 25 && st.LastEventID == 25 && st.Lag == 0 && st.Published == 25 && st.Duplicates == 0
	})
}

func TestFollowerDoesNotPublish(t *testing.T) {
	js := connect(t, startNATS(t))
	log := newEventLog()
	log.add(3)
	lead := newLeader(false)
	p := newPublisher(t, js, log, lead)
	run(t, p)
	// The stream exists only once a leader declared it.
	lead.set(true)
	waitIDs(t, js, span(1, 3))
	// The stream holds the messages before the publisher has counted their
	// acknowledgements, and an acknowledgement that arrives after the
	// publisher stepped down is never counted: its status is polled before
	// leadership moves.
	waitFor(t, "status counted the first publication", func() bool { return p.Status().Published == 3 })
	lead.set(false)
	waitFor(t, "publisher stopped", func() bool { return !p.Status().Publishing })
	log.add(2)
	// Leading again, it continues where the stream ends.
	lead.set(true)
	waitIDs(t, js, span(1, 5))
	var st eventpub.Status
	waitFor(t, "status counted the second publication", func() bool {
		st = p.Status()
		return st.Published == 5 && st.LastPublishedID == 5
	})
	if st.Duplicates != 0 || st.Resumptions != 2 {
		t.Fatalf("status %+v", st)
	}
}

// TestNewLeaderResumesFromTheStream: a second validator, whose log holds
// the same events, takes over from the stream's last event: it does not
// publish what the first one published (not even as duplicates the window
// would absorb), and it publishes everything after.
func TestNewLeaderResumesFromTheStream(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	logA, logB := newEventLog(), newEventLog()
	logA.add(7)
	logB.add(7)
	leadA, leadB := newLeader(true), newLeader(false)
	a := newPublisher(t, js, logA, leadA)
	run(t, a)
	waitIDs(t, js, span(1, 7))
	leadA.set(false)
	waitFor(t, "A stopped", func() bool { return !a.Status().Publishing })

	b := newPublisher(t, connect(t, s), logB, leadB)
	run(t, b)
	logB.add(4)
	leadB.set(true)
	waitIDs(t, js, span(1, 11))
	waitFor(t, "B caught up", func() bool { return b.Status().LastPublishedID == 11 })
	if st := b.Status(); st.Published != 4 || st.Duplicates != 0 {
		t.Fatalf("B published %d and had %d duplicates, want 4 and 0", st.Published, st.Duplicates)
	}
}

// TestOverlappingLeadersStoreEachEventOnce: two validators that both
// believe they lead (an old leader not yet aware of the new one) publish the
// same log at once; the stream still holds every event once, in order.
func TestOverlappingLeadersStoreEachEventOnce(t *testing.T) {
	s := startNATS(t)
	logA, logB := newEventLog(), newEventLog()
	a := newPublisher(t, connect(t, s), logA, newLeader(true))
	b := newPublisher(t, connect(t, s), logB, newLeader(true))
	run(t, a)
	run(t, b)
	for range 10 {
		logA.add(30)
		logB.add(30)
	}
	js := connect(t, s)
	waitIDs(t, js, span(1, 300))
	waitFor(t, "both caught up", func() bool {
		return a.Status().LastPublishedID == 300 && b.Status().LastPublishedID == 300
	})
	if got := len(readStream(t, js)); got != 300 {
		t.Fatalf("stream holds %d messages, want 300", got)
	}
}

// TestResumesPastAForeignMessage: a message of another publisher at the end
// of the stream does not hide the last event.
func TestResumesPastAForeignMessage(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	log := newEventLog()
	log.add(3)
	lead := newLeader(true)
	p := newPublisher(t, js, log, lead)
	run(t, p)
	waitIDs(t, js, span(1, 3))
	lead.set(false)
	waitFor(t, "stopped", func() bool { return !p.Status().Publishing })
	if _, err := js.Publish(context.Background(), "ledger.events.other._", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	log.add(2)
	lead.set(true)
	msgs := waitIDs(t, js, span(1, 5))
	if len(msgs) != 6 || msgs[3].msgID != "" {
		t.Fatalf("stream %+v", msgs)
	}
}

// TestPurgedStreamContinuesWithNewEvents: a purged stream tells nothing of
// what it held; publication goes on after the newest applied event rather
// than publishing the whole history again.
func TestPurgedStreamContinuesWithNewEvents(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	log := newEventLog()
	log.add(3)
	lead := newLeader(true)
	p := newPublisher(t, js, log, lead)
	run(t, p)
	waitIDs(t, js, span(1, 3))
	lead.set(false)
	waitFor(t, "stopped", func() bool { return !p.Status().Publishing })
	stream, err := js.Stream(context.Background(), eventpub.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	log.add(2) // applied while nobody published: unknown to the stream
	lead.set(true)
	waitFor(t, "resumed", func() bool { return p.Status().Resumptions == 2 })
	log.add(3)
	waitIDs(t, js, span(6, 8))
}

// TestDeletedStreamIsDeclaredAgain: publication fails while the stream is
// gone, then declares it again and publishes the whole log into it.
func TestDeletedStreamIsDeclaredAgain(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	log := newEventLog()
	log.add(4)
	p := newPublisher(t, js, log, newLeader(true))
	run(t, p)
	waitIDs(t, js, span(1, 4))
	if err := js.DeleteStream(context.Background(), eventpub.DefaultStream); err != nil {
		t.Fatal(err)
	}
	log.add(2)
	waitFor(t, "failure reported", func() bool { return p.Status().LastError != "" })
	waitIDs(t, js, span(1, 6))
}

// TestSkippedEventsAreCounted: events retention removed before publication
// are reported, and the rest is published.
func TestSkippedEventsAreCounted(t *testing.T) {
	js := connect(t, startNATS(t))
	log := newEventLog()
	log.add(6)
	log.prune(4)
	p := newPublisher(t, js, log, newLeader(true))
	run(t, p)
	waitIDs(t, js, span(5, 6))
	if st := p.Status(); st.Skipped != 4 {
		t.Fatalf("skipped %d, want 4", st.Skipped)
	}
}

// TestPublishesAcrossAServerRestart: the server goes away with publications
// in flight and comes back on the same store; the stream ends up with every
// event once, in order.
func TestPublishesAcrossAServerRestart(t *testing.T) {
	dir := t.TempDir()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, SyncAlways: true, NoSigs: true, NoLog: true}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	url := s.ClientURL()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := eventpub.NewJetStream(nc)
	if err != nil {
		t.Fatal(err)
	}
	log := newEventLog()
	p := newPublisher(t, js, log, newLeader(true))
	run(t, p)
	log.add(50)
	waitFor(t, "some published", func() bool { return p.Status().LastPublishedID >= 10 })
	log.add(50)
	opts.Port = s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()

	s2 := startOn(t, opts)
	log.add(50)
	waitIDs(t, connect(t, s2), span(1, 150))
}

// startOn starts a server with opts (a fixed port and store) for the test.
func startOn(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func TestEnsureStreamIsIdempotentAndUndoesHandEdits(t *testing.T) {
	js := connect(t, startNATS(t))
	ctx := context.Background()
	cfg := eventpub.StreamConfig{MaxMsgs: 1000, Duplicates: time.Minute}
	for i := range 2 {
		s, err := eventpub.EnsureStream(ctx, js, cfg)
		if err != nil {
			t.Fatalf("declaration %d: %v", i, err)
		}
		c := s.CachedInfo().Config
		if c.Name != "LEDGER_EVENTS" || c.Storage != jetstream.FileStorage || c.Duplicates != time.Minute || c.MaxMsgs != 1000 ||
			c.MaxBytes != eventpub.DefaultMaxBytes || c.MaxAge != 0 || c.Retention != jetstream.LimitsPolicy ||
			!slices.Equal(c.Subjects, []string{"ledger.events.>"}) || c.Discard != jetstream.DiscardOld || !c.AllowAtomicPublish {
			t.Fatalf("declaration %d: %+v", i, c)
		}
	}
	s, err := js.Stream(ctx, "LEDGER_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	edited := s.CachedInfo().Config
	edited.MaxAge, edited.MaxMsgs, edited.AllowAtomicPublish = time.Hour, 10, false
	if _, err := js.UpdateStream(ctx, edited); err != nil {
		t.Fatal(err)
	}
	back, err := eventpub.EnsureStream(ctx, js, cfg)
	if err != nil || back.CachedInfo().Config.MaxAge != 0 || back.CachedInfo().Config.MaxMsgs != 1000 || !back.CachedInfo().Config.AllowAtomicPublish {
		t.Fatalf("after a hand edit: %v", err)
	}
	if _, err := eventpub.EnsureStream(ctx, js, eventpub.StreamConfig{MaxMsgs: -2}); err == nil {
		t.Fatal("negative limit accepted")
	}
}
