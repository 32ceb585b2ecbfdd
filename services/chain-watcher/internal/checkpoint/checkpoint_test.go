package checkpoint_test

import (
	"errors"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

func TestSaveLoadMonotonic(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	store, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 1337)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := store.Load(ctx); found || err != nil {
		t.Fatalf("fresh bucket: found=%v err=%v", found, err)
	}
	c10 := watch.Cursor{Block: 10, Hash: common.HexToHash("0x10")}
	c20 := watch.Cursor{Block: 20, Hash: common.HexToHash("0x20")}
	for _, c := range []watch.Cursor{c10, c20, c10} { // the last one must not move it back
		if err := store.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	got, found, err := store.Load(ctx)
	if err != nil || !found || got != c20 {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, found, err, c20)
	}

	// A second store (another watcher process) sees the same cursor, and
	// another chain's cursor is separate.
	again, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 1337)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := again.Load(ctx); got != c20 {
		t.Errorf("reopened store loads %+v", got)
	}
	other, err := checkpoint.Open(ctx, js, checkpoint.Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := other.Load(ctx); found {
		t.Error("chain 1 sees chain 1337's cursor")
	}

	kv, err := js.KeyValue(ctx, checkpoint.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, checkpoint.Key(1337))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"block":20,"hash":"0x0000000000000000000000000000000000000000000000000000000000000020"}`; string(e.Value()) != want {
		t.Errorf("stored %s, want %s", e.Value(), want)
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
	c := watch.Cursor{Block: 3, Hash: common.HexToHash("0x03")}
	if err := store.Save(ctx, c); err != nil {
		t.Fatalf("Save over garbage: %v", err)
	}
	if got, _, err := store.Load(ctx); err != nil || got != c {
		t.Fatalf("Load = %+v, %v", got, err)
	}
}
