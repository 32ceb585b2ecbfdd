package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// TestRefusesAStoreOfAnotherFormat: a data directory written before the
// store format was recorded stops the validator at start, before raft
// reads anything from it.
func TestRefusesAStoreOfAnotherFormat(t *testing.T) {
	dir := t.TempDir()
	pdb, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pdb.Set([]byte(storage.AppliedIndexKey), storage.PutUint64(12), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := mockConfig(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = Run(ctx, cfg, zaptest.NewLogger(t), nil)
	if !errors.Is(err, storage.ErrStoreFormat) {
		t.Fatalf("Run on a store of format 1 = %v, want ErrStoreFormat", err)
	}
	t.Log(err)
}
