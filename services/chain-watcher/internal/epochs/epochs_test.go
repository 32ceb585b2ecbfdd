package epochs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/epochs"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

// script is a Source that answers the readings set on it.
type script struct {
	mu   sync.Mutex
	next payment.EpochUpdate
	err  error
}

func (s *script) set(current, finalized uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next, s.err = payment.EpochUpdate{Current: current, Finalized: finalized, Source: payment.EpochSourceBlockTime, BlockNumber: current * 32}, err
}

func (s *script) Read(context.Context) (payment.EpochUpdate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next, s.err
}

// stored returns the epoch updates in the stream, in order, with their
// message ids.
func stored(t *testing.T, ctx context.Context, js jetstream.JetStream) ([]payment.EpochUpdate, []string) {
	t.Helper()
	cons, err := js.OrderedConsumer(ctx, "CHAIN_EVENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{payment.EpochSubject(1337)}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		out []payment.EpochUpdate
		ids []string
	)
	for {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			u, err := payment.DecodeEpochUpdate(msg.Data())
			if err != nil {
				t.Fatal(err)
			}
			out, ids = append(out, u), append(ids, msg.Headers().Get(jetstream.MsgIDHeader))
		}
		if n == 0 {
			return out, ids
		}
	}
}

// TestRunnerPublishesChanges: an update goes out when a figure rises, not
// when the reading is the same; a reading behind the published figures
// publishes only what rose; a second watcher's identical update is a
// duplicate in the stream.
func TestRunnerPublishesChanges(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	if _, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	src := &script{}
	var (
		acked  []publish.Result
		behind int
	)
	now := time.UnixMilli(1_700_000_000_000)
	r, err := epochs.New(epochs.Config{
		ChainID: 1337, Source: src, Publisher: publish.NewPublisher(js, "CHAIN_EVENTS"), Logger: zaptest.NewLogger(t),
		Now:         func() time.Time { return now },
		OnPublished: func(_ payment.EpochUpdate, res publish.Result) { acked = append(acked, res) },
		OnBehind:    func(payment.EpochUpdate) { behind++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		current, finalized uint64
		published          bool
	}{
		{100, 98, true},
		{100, 98, false},  // unchanged
		{101, 98, true},   // current rose
		{101, 99, true},   // finalized rose
		{100, 97, false},  // behind in both: nothing
		{102, 97, true},   // current rose, finalized behind: 102/99
		{102, 100, true},  // finalized rose
		{102, 100, false}, // unchanged
	}
	for i, s := range steps {
		src.set(s.current, s.finalized, nil)
		published, err := r.Step(ctx)
		if err != nil || published != s.published {
			t.Fatalf("step %d (%d/%d): published %v, %v", i, s.current, s.finalized, published, err)
		}
	}
	src.set(0, 0, errors.New("endpoint down"))
	if _, err := r.Step(ctx); err == nil {
		t.Fatal("a failed read was not an error")
	}
	if last, ok := r.Last(); !ok || last.Current != 102 || last.Finalized != 100 {
		t.Fatalf("last %+v", last)
	}
	if behind != 2 {
		t.Fatalf("%d readings behind, want 2", behind)
	}

	got, ids := stored(t, ctx, js)
	want := [][2]uint64{{100, 98}, {101, 98}, {101, 99}, {102, 99}, {102, 100}}
	if len(got) != len(want) {
		t.Fatalf("stream holds %+v", got)
	}
	for i, w := range want {
		u := got[i]
		if u.Current != w[0] || u.Finalized != w[1] || u.ChainID != 1337 || u.ObservedAtMs != now.UnixMilli() || ids[i] != u.MsgID() {
			t.Fatalf("update %d: %+v (id %s), want %d/%d", i, u, ids[i], w[0], w[1])
		}
	}
	for i, res := range acked {
		if res.Duplicate {
			t.Fatalf("ack %d is a duplicate", i)
		}
	}

	// A second watcher (or this one restarted) reading the same figures
	// publishes the same message id: the stream keeps one.
	var dup publish.Result
	other, err := epochs.New(epochs.Config{ChainID: 1337, Source: src, Publisher: publish.NewPublisher(js, "CHAIN_EVENTS"),
		OnPublished: func(_ payment.EpochUpdate, res publish.Result) { dup = res }})
	if err != nil {
		t.Fatal(err)
	}
	src.set(102, 100, nil)
	if published, err := other.Step(ctx); err != nil || !published || !dup.Duplicate {
		t.Fatalf("a second watcher's same update: published %v, %+v, %v", published, dup, err)
	}
	if got, _ := stored(t, ctx, js); len(got) != len(want) {
		t.Fatalf("after a second watcher the stream holds %d updates, want %d", len(got), len(want))
	}
}

// TestRunnerRun: Run publishes the source's figures as they change and
// reports failed reads, until its context ends.
func TestRunnerRun(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	if _, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	src := &script{}
	src.set(10, 8, nil)
	var (
		mu       sync.Mutex
		last     payment.EpochUpdate
		failures int
	)
	r, err := epochs.New(epochs.Config{
		ChainID: 1337, Source: src, Publisher: publish.NewPublisher(js, "CHAIN_EVENTS"), Interval: 5 * time.Millisecond,
		Logger: zaptest.NewLogger(t),
		OnPublished: func(u payment.EpochUpdate, _ publish.Result) {
			mu.Lock()
			defer mu.Unlock()
			last = u
		},
		OnRead: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(runCtx)
	}()
	state := func() (payment.EpochUpdate, int) {
		mu.Lock()
		defer mu.Unlock()
		return last, failures
	}
	testenv.Eventually(t, 5*time.Second, func() bool { u, _ := state(); return u.Current == 10 }, "first update")
	src.set(0, 0, errors.New("endpoint down"))
	testenv.Eventually(t, 5*time.Second, func() bool { _, f := state(); return f > 0 }, "a failed read reported")
	src.set(11, 9, nil)
	testenv.Eventually(t, 5*time.Second, func() bool { u, _ := state(); return u.Current == 11 && u.Finalized == 9 }, "update after the failure")
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if got, _ := stored(t, ctx, js); len(got) != 2 {
		t.Fatalf("stream holds %+v, want 2 updates", got)
	}
}
