package checkpoint_test

import (
	"errors"
	"math/big"
	"reflect"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

func TestSaveLoadCompareAndSet(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	store, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 1337)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := store.Load(ctx); found || err != nil {
		t.Fatalf("fresh bucket: found=%v err=%v", found, err)
	}
	s10 := checkpoint.State{Cursor: watch.Cursor{Block: 10, Hash: common.HexToHash("0x10")}}
	s20 := checkpoint.State{
		Cursor:   watch.Cursor{Block: 20, Hash: common.HexToHash("0x20")},
		Recent:   []checkpoint.Block{{Number: 12, Hash: common.HexToHash("0x12"), Journaled: true}, {Number: 20, Hash: common.HexToHash("0x20")}},
		Inflight: []checkpoint.Block{{Number: 22, Hash: common.HexToHash("0x22"), Journaled: true}},
		Retracted: []checkpoint.Retracted{{Number: 13, Hash: common.HexToHash("0x13"), Count: 1},
			{Number: 13, Hash: common.HexToHash("0x1313"), Count: 2}},
	}
	// A reorg rewinds: the state may move back.
	for _, st := range []checkpoint.State{s20, s10, s20} {
		if err := store.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	got, found, err := store.Load(ctx)
	if err != nil || !found || !reflect.DeepEqual(got, s20) {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, found, err, s20)
	}

	// A second store (another watcher process) sees the same state; once
	// it has written, the first store's next Save conflicts until it loads
	// again.
	again, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 1337)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := again.Load(ctx); !reflect.DeepEqual(got, s20) {
		t.Errorf("reopened store loads %+v", got)
	}
	if err := again.Save(ctx, s10); err != nil {
		t.Fatal(err)
	}
	if err := store.Save(ctx, s20); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("Save over another writer's state: %v, want ErrConflict", err)
	}
	if got, _, _ := store.Load(ctx); !reflect.DeepEqual(got, s10) {
		t.Fatalf("after the conflict Load = %+v, want the other writer's %+v", got, s10)
	}
	if err := store.Save(ctx, s20); err != nil {
		t.Fatalf("Save after reloading: %v", err)
	}

	// Another chain's state is separate.
	other, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := other.Load(ctx); found {
		t.Error("chain 1 sees chain 1337's cursor")
	}

	// The stored form keeps the cursor's fields of before reorg handling,
	// so an old state loads as a cursor without recent blocks.
	kv, err := js.KeyValue(ctx, checkpoint.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, checkpoint.Key(1337), []byte(`{"block":20,"hash":"0x0000000000000000000000000000000000000000000000000000000000000020"}`)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := store.Load(ctx); err != nil || !reflect.DeepEqual(got, checkpoint.State{Cursor: s20.Cursor}) {
		t.Errorf("old format loads as %+v, %v", got, err)
	}
}

// TestJournal: a block's journal keeps the exact payments and debt
// payments; another hash of the same number is another journal; a purged
// journal is gone, and purging it again is no error.
func TestJournal(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	store, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 1337)
	if err != nil {
		t.Fatal(err)
	}
	hash, other := common.HexToHash("0xb1"), common.HexToHash("0xb2")
	j := checkpoint.Journal{Block: 7, Hash: hash,
		Payments: []payment.ProposalPaid{{ChainID: 1337, Contract: common.HexToAddress("0xc0"), ProposalID: common.HexToHash("0x01"),
			Payer: common.HexToAddress("0xaa"), Amount: big.NewInt(1000), Class: payment.Express, Token: payment.ETH,
			TxHash: common.HexToHash("0x7a"), BlockHash: hash, BlockNumber: 7, LogIndex: 2, Confirmations: 3}},
		Debts: []payment.DebtPaid{{ChainID: 1337, Contract: common.HexToAddress("0xc0"), Wallet: common.HexToAddress("0xbb"),
			Payer: common.HexToAddress("0xaa"), Amount: big.NewInt(5), TxHash: common.HexToHash("0x7b"), BlockHash: hash, BlockNumber: 7, LogIndex: 3}},
	}
	if err := store.PutJournal(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, found, err := store.Journal(ctx, 7, hash)
	if err != nil || !found || !reflect.DeepEqual(got, j) {
		t.Fatalf("Journal = %+v, %v, %v; want %+v", got, found, err, j)
	}
	if _, found, err := store.Journal(ctx, 7, other); found || err != nil {
		t.Fatalf("journal of another hash: found=%v err=%v", found, err)
	}
	// A block published again after its retraction keeps its generation.
	readopted := j
	readopted.Hash, readopted.Generation = other, 2
	readopted.Payments = []payment.ProposalPaid{j.Payments[0]}
	readopted.Payments[0].BlockHash = other
	readopted.Debts = nil
	if err := store.PutJournal(ctx, readopted); err != nil {
		t.Fatal(err)
	}
	if got, found, err := store.Journal(ctx, 7, other); err != nil || !found || !reflect.DeepEqual(got, readopted) {
		t.Fatalf("Journal = %+v, %v, %v; want %+v", got, found, err, readopted)
	}
	for range 2 {
		if err := store.DropJournal(ctx, 7, hash); err != nil {
			t.Fatal(err)
		}
	}
	if _, found, err := store.Journal(ctx, 7, hash); found || err != nil {
		t.Fatalf("purged journal: found=%v err=%v", found, err)
	}
}

func TestCorruptCursorIsReported(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	store, err := checkpoint.Open(ctx, js, checkpoint.Config{Bucket: "CW"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "CW")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, checkpoint.Key(5), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Load(ctx); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Load of garbage: %v, want ErrCorrupt", err)
	}
	c := checkpoint.State{Cursor: watch.Cursor{Block: 3, Hash: common.HexToHash("0x03")}}
	if err := store.Save(ctx, c); err != nil {
		t.Fatalf("Save over garbage: %v", err)
	}
	if got, _, err := store.Load(ctx); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("Load = %+v, %v", got, err)
	}
}

// TestOpenUpgradesBucket: a bucket declared before journals existed (no
// marker TTL) is updated in place, its state kept.
func TestOpenUpgradesBucket(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: checkpoint.DefaultBucket, History: 8, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, checkpoint.Key(9), []byte(`{"block":4,"hash":"0x0000000000000000000000000000000000000000000000000000000000000004"}`)); err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 9)
	if err != nil {
		t.Fatalf("Open over an older bucket: %v", err)
	}
	if got, found, err := store.Load(ctx); err != nil || !found || got.Cursor.Block != 4 {
		t.Fatalf("Load = %+v, %v, %v", got, found, err)
	}
	if err := store.PutJournal(ctx, checkpoint.Journal{Block: 4, Hash: common.HexToHash("0x04")}); err != nil {
		t.Fatal(err)
	}
	if err := store.DropJournal(ctx, 4, common.HexToHash("0x04")); err != nil {
		t.Fatalf("purge with a marker TTL in an upgraded bucket: %v", err)
	}
}
