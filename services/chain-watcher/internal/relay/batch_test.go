package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/relay"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// recorder is a publisher that counts what the stream acknowledged and can
// crash once, after the first crashAfter logs of a PublishLogs call are
// acknowledged (a process dying between two batches of a range).
type recorder struct {
	*publish.Publisher
	crashAfter     int
	stored, dupes  int
	calls, crashed int
}

func (r *recorder) PublishLogs(ctx context.Context, logs []publish.Log) ([]publish.Result, error) {
	r.calls++
	crash := r.crashAfter > 0 && r.crashed == 0 && len(logs) > r.crashAfter
	if crash {
		logs = logs[:r.crashAfter]
	}
	res, err := r.Publisher.PublishLogs(ctx, logs)
	for _, x := range res {
		if x.Duplicate {
			r.dupes++
		} else {
			r.stored++
		}
	}
	if crash && err == nil {
		r.crashed++
		return res, errCrash
	}
	return res, err
}

// batchRelay builds a relay over store (a fresh one when nil) publishing
// through pub, reading at most maxRange blocks at a time (0: the default).
func (e *env) batchRelay(store relay.Store, pub relay.Publisher, maxRange uint64, log *zap.Logger) *relay.Relay {
	e.t.Helper()
	if store == nil {
		store = e.store()
	}
	if log == nil {
		log = zaptest.NewLogger(e.t)
	}
	w, err := watch.New(e.chain.Client(), watch.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger,
		Confirmations: e.conf, MaxRange: maxRange, AnchorDepth: relay.DefaultDepth, Logger: log})
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := relay.New(w, pub, store, relay.Config{StartBlock: e.chain.DeployBlock, PollInterval: 5 * time.Millisecond, Logger: log})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) recorder(opts ...publish.Option) *recorder {
	return &recorder{Publisher: publish.NewPublisher(e.js, stream, opts...)}
}

// payBlocks pays a proposal and a debt in each of n blocks and returns the
// last block.
func (e *env) payBlocks(prefix string, n int) uint64 {
	e.t.Helper()
	var last uint64
	for i := range n {
		last, _, _ = e.payBlock(prefix + string(rune('a'+i)))
	}
	return last
}

// checkOnceInChainOrder asserts the stream holds want messages, none
// removed, strictly in chain order (so none twice).
func (e *env) checkOnceInChainOrder(want int) []msg {
	e.t.Helper()
	got := e.messages()
	if len(got) != want {
		e.t.Fatalf("stream holds %d messages, want %d: %v", len(got), want, got)
	}
	for i, m := range got {
		if m.removed || m.block != e.canonical(m.number) {
			e.t.Fatalf("message %d %v: removed %v, block %d %s", i+1, m, m.removed, m.number, m.block.Hex())
		}
		if i > 0 && !(got[i-1].number < m.number || got[i-1].number == m.number && got[i-1].index < m.index) {
			e.t.Fatalf("message %d %v does not follow %v in chain order", i+1, m, got[i-1])
		}
	}
	return got
}

// batchIDs returns the Nats-Batch-Id of every message of the stream.
func (e *env) batchIDs() []string {
	e.t.Helper()
	var out []string
	for _, m := range e.stored() {
		out = append(out, m.Header.Get(publish.BatchIDHeader))
	}
	return out
}

// TestBatchPublishedThenCrashBeforeCheckpoint: a range's logs are in the
// stream, published as atomic batches, and the process dies before the
// checkpoint. The restarted relay reads the range again; its batches are
// refused as duplicates and published one log at a time, which the stream
// acknowledges as duplicates: each log once, in chain order.
func TestBatchPublishedThenCrashBeforeCheckpoint(t *testing.T) {
	e := newEnv(t, 0)
	last := e.payBlocks("crash", 6)
	crashing := &failingStore{Store: e.store(), fail: func(st checkpoint.State) bool { return st.Cursor.Block >= last && len(st.Inflight) == 0 }}
	first := e.recorder(publish.WithMaxBatch(4))
	r := e.batchRelay(crashing, first, 0, nil)
	for !crashing.failed {
		if _, err := r.Step(e.ctx); err != nil && !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
	}
	if st := r.State(); len(st.Inflight) != 6 || st.Cursor.Block >= last {
		t.Fatalf("state after the crash %+v, want the range's blocks in flight", st)
	}
	e.checkOnceInChainOrder(12)
	batches := map[string]int{}
	for _, id := range e.batchIDs() {
		batches[id]++
	}
	if len(batches) != 3 || batches[""] != 0 {
		t.Fatalf("the range went in batches %v, want 3 of 4 logs", batches)
	}

	again := e.recorder(publish.WithMaxBatch(4))
	e.drain(e.batchRelay(nil, again, 0, nil)) // the restart
	e.checkOnceInChainOrder(12)
	if again.dupes != 12 || again.stored != 0 {
		t.Fatalf("the restart stored %d and found %d duplicates, want 0 and 12", again.stored, again.dupes)
	}
}

// TestCrashBetweenBatchesOfARange: the process dies after the first
// batches of a range are in the stream. The restart republishes the range:
// the batches holding stored logs go one log at a time (duplicates
// absorbed), the rest as batches; each log once, in chain order.
func TestCrashBetweenBatchesOfARange(t *testing.T) {
	e := newEnv(t, 0)
	e.payBlocks("between", 6)
	first := e.recorder(publish.WithMaxBatch(4))
	first.crashAfter = 5 // a batch of 4, then the fifth log alone
	if _, err := e.batchRelay(nil, first, 0, nil).Step(e.ctx); !errors.Is(err, errCrash) {
		t.Fatalf("step: %v, want the crash", err)
	}
	e.checkOnceInChainOrder(5)

	again := e.recorder(publish.WithMaxBatch(4))
	e.drain(e.batchRelay(nil, again, 0, nil))
	e.checkOnceInChainOrder(12)
	if again.dupes != 5 || again.stored != 7 {
		t.Fatalf("the restart stored %d and found %d duplicates, want 7 and 5", again.stored, again.dupes)
	}
	// The last batch (logs 9 to 12) held no stored log and went whole.
	ids := e.batchIDs()
	if ids[8] == "" || ids[8] != ids[11] || ids[4] != "" {
		t.Fatalf("batch ids %q", ids)
	}
}

// TestBatchPartlyStoredBefore: some logs of a range are in the stream
// already (published one by one by another watcher, or with other range
// boundaries before a restart). They are acknowledged as duplicates and
// the rest stored once, in chain order after them.
func TestBatchPartlyStoredBefore(t *testing.T) {
	e := newEnv(t, 0)
	last := e.payBlocks("partly", 5)
	w, err := watch.New(e.chain.Client(), watch.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger, AnchorDepth: relay.DefaultDepth})
	if err != nil {
		t.Fatal(err)
	}
	b, ok, err := w.Next(e.ctx, e.chain.DeployBlock, common.Hash{})
	if err != nil || !ok || b.To < last || len(b.Payments) != 5 || len(b.Debts) != 5 {
		t.Fatalf("range %+v, %v, %v", b, ok, err)
	}
	plain := publish.NewPublisher(e.js, stream)
	for _, p := range []int{1, 3} {
		if _, err := plain.Publish(e.ctx, b.Payments[p]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := plain.PublishDebt(e.ctx, b.Debts[3]); err != nil {
		t.Fatal(err)
	}

	rec := e.recorder()
	e.drain(e.batchRelay(nil, rec, 0, nil))
	if rec.dupes != 3 || rec.stored != 7 {
		t.Fatalf("stored %d, duplicates %d; want 7 and 3", rec.stored, rec.dupes)
	}
	got := e.messages()
	if len(got) != 10 {
		t.Fatalf("stream holds %d messages: %v", len(got), got)
	}
	pre := map[string]bool{b.Payments[1].MsgID(): true, b.Payments[3].MsgID(): true, b.Debts[3].MsgID(): true}
	for i, m := range got[:3] {
		if !pre[m.id] {
			t.Fatalf("message %d is %v, want one stored before", i+1, m)
		}
	}
	rest := got[3:]
	for i := 1; i < len(rest); i++ {
		if !(rest[i-1].number < rest[i].number || rest[i-1].number == rest[i].number && rest[i-1].index < rest[i].index) || pre[rest[i].id] {
			t.Fatalf("the relay's messages are not each once in chain order: %v", rest)
		}
	}
}

// TestFallbackWhenTheStreamLacksAtomicPublish: a stream declared without
// atomic publication (by an older watcher) refuses the batches; the relay
// says so once and publishes one log at a time: each once, in chain order.
func TestFallbackWhenTheStreamLacksAtomicPublish(t *testing.T) {
	e := newEnv(t, 0)
	s, err := e.js.Stream(e.ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := e.js.UpdateStream(e.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
	r := e.batchRelay(nil, e.recorder(), 0, log)
	e.payBlocks("older", 3)
	e.drain(r)
	e.payBlocks("later", 2)
	e.drain(r)
	e.checkOnceInChainOrder(10)
	for i, id := range e.batchIDs() {
		if id != "" {
			t.Fatalf("message %d in batch %s", i+1, id)
		}
	}
	if n := logs.FilterMessageSnippet("atomic batch publication unavailable").Len(); n != 1 {
		t.Fatalf("the fallback was logged %d times, want once: %v", n, logs.All())
	}
}

// TestTwoHotRelaysInBatches: two relays (a hot standby) publish the same
// ranges as batches at the same time, each over its own view of the
// checkpoint. Whichever stores a log first, the other's batch holding it is
// refused and goes one log at a time: the stream holds each log once, in
// chain order.
func TestTwoHotRelaysInBatches(t *testing.T) {
	e := newEnv(t, 0)
	last := e.payBlocks("hot", 12)
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	recs := []*recorder{e.recorder(publish.WithMaxBatch(3)), e.recorder(publish.WithMaxBatch(3))}
	for i, rec := range recs {
		// Different range sizes: the two cut the chain into different
		// batches.
		r := e.batchRelay(nil, rec, uint64(3+2*i), zap.NewNop())
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				t.Errorf("relay %d: %v", i, err)
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _, err := e.store().Load(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Cursor.Block >= last && len(st.Inflight) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relays never caught up: state %+v", st)
		}
		time.Sleep(10 * time.Millisecond) // polling the checkpoint the relays write
	}
	cancel()
	wg.Wait()
	e.checkOnceInChainOrder(24)
	if recs[0].stored+recs[1].stored != 24 {
		t.Errorf("stored %d and %d, want 24 in all", recs[0].stored, recs[1].stored)
	}
	t.Logf("relay 1 stored %d (%d duplicates), relay 2 stored %d (%d duplicates)", recs[0].stored, recs[0].dupes, recs[1].stored, recs[1].dupes)
}
