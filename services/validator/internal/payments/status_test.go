package payments

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/payment"
)

func embeddedJetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func watcherStatus(head uint64, pending ...payment.PendingPayment) payment.WatcherStatus {
	cur := payment.StatusBlock{Number: head - 5, Hash: common.HexToHash("0xc0")}
	return payment.WatcherStatus{ChainID: 1337, Contract: common.HexToAddress("0x0c"),
		Head: payment.StatusBlock{Number: head, Hash: common.HexToHash("0xaa")}, HeadTimeS: 1_700_000_000, Safe: head - 2,
		Confirmations: 2, Cursor: &cur, PendingFrom: head - 1, Pending: pending, ObservedAtMs: 1_700_000_000_123}
}

func pendingPayment(tx, id byte, block, head uint64) payment.PendingPayment {
	return payment.PendingPayment{TxHash: common.Hash{tx}, ProposalID: common.Hash{id}, BlockNumber: block, BlockHash: common.Hash{byte(block)},
		Confirmations: head - block, Payer: common.HexToAddress("0x01"), Amount: payment.Standard.Price(payment.ETH), Class: payment.Standard,
		Token: payment.ETH, TimestampS: 1_700_000_000}
}

// TestChainStatusFollowsTheKey: a validator started before the watcher's
// bucket exists waits for it, reads the status already stored, follows
// its changes, keeps the last good one when a bad value comes, and forgets
// it when the key is deleted.
func TestChainStatusFollowsTheKey(t *testing.T) {
	js := embeddedJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := &ChainStatus{JS: js, ChainID: 1337, Log: zaptest.NewLogger(t), Retry: 20 * time.Millisecond}
	done := make(chan struct{})
	go func() { defer close(done); cs.Run(ctx) }()
	defer func() { cancel(); <-done }()

	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if _, _, ok := cs.Latest(); ok {
		t.Fatal("a status before the watcher wrote one")
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: DefaultStatusBucket, History: 8})
	if err != nil {
		t.Fatal(err)
	}
	put := func(s payment.WatcherStatus) {
		t.Helper()
		b, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, payment.StatusKey(1337), b); err != nil {
			t.Fatal(err)
		}
	}
	put(watcherStatus(100, pendingPayment(1, 1, 99, 100), pendingPayment(1, 2, 100, 100)))
	eventually("the stored status", func() bool { s, _, ok := cs.Latest(); return ok && s.Head.Number == 100 })
	if got := cs.Pending(common.Hash{1}); len(got) != 2 || got[0].ProposalID != (common.Hash{1}) || got[1].Confirmations != 0 {
		t.Fatalf("pending of the transaction %+v", got)
	}
	if s, _, _ := cs.Latest(); *s.LagBlocks() != 3 {
		t.Fatalf("lag %d", *s.LagBlocks())
	}

	put(watcherStatus(101))
	eventually("the next status", func() bool { s, _, ok := cs.Latest(); return ok && s.Head.Number == 101 })
	if len(cs.Pending(common.Hash{1})) != 0 || len(cs.PendingAll()) != 0 {
		t.Fatal("payments of an older status are still pending")
	}

	// A value that does not decode, and one of another chain, are counted
	// and leave the last good status.
	if _, err := kv.Put(ctx, payment.StatusKey(1337), []byte(`{"chainId":1337}`)); err != nil {
		t.Fatal(err)
	}
	other := watcherStatus(500)
	other.ChainID = 1
	if err := cs.Observe(mustEncode(t, other)); !errors.Is(err, payment.ErrMalformedStatus) {
		t.Fatalf("status of another chain: %v", err)
	}
	eventually("the bad value counted", func() bool { n, _ := cs.Rejected(); return n == 2 })
	if s, _, ok := cs.Latest(); !ok || s.Head.Number != 101 {
		t.Fatalf("after bad values %+v", s)
	}

	if err := kv.Delete(ctx, payment.StatusKey(1337)); err != nil {
		t.Fatal(err)
	}
	eventually("the deleted status forgotten", func() bool { _, _, ok := cs.Latest(); return !ok })
}

// TestChainStatusAfterRestart: a validator starting after the watcher wrote
// its status has it at once, with no new write.
func TestChainStatusAfterRestart(t *testing.T) {
	js := embeddedJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OTHER_BUCKET", History: 8})
	if err != nil {
		t.Fatal(err)
	}
	for head := uint64(10); head <= 12; head++ {
		if _, err := kv.Put(ctx, payment.StatusKey(1337), mustEncode(t, watcherStatus(head))); err != nil {
			t.Fatal(err)
		}
	}
	cs := &ChainStatus{JS: js, Bucket: "OTHER_BUCKET", ChainID: 1337, Log: zaptest.NewLogger(t)}
	done := make(chan struct{})
	go func() { defer close(done); cs.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, at, ok := cs.Latest(); ok {
			if s.Head.Number != 12 || at.IsZero() {
				t.Fatalf("status %+v received at %v", s, at)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no status after a restart")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustEncode(t *testing.T, s payment.WatcherStatus) []byte {
	t.Helper()
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
