package state

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// TestCompactionReturnsDiskSpace: the generation a second compaction drops
// stays on disk after the range deletion commits (and is flushed), and
// leaves it once the machine's reclaimer compacts the dropped range.
func TestCompactionReturnsDiskSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a few MiB to disk")
	}
	// Overwrites of the same few paths: about 6 MiB of segments, little
	// live content. Random bytes, so compression cannot hide the garbage.
	rng := rand.New(rand.NewPCG(1, 2))
	content := func() string {
		raw := make([]byte, 16<<10)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		return fmt.Sprintf(`{"d":%q}`, hex.EncodeToString(raw))
	}
	l := newLog(t)
	l.confChange()
	n := 0
	for b := range 24 {
		var items []*ledgerpb.BatchItem
		for p := range 8 {
			n++
			items = append(items, writeItem(n, alice, fmt.Sprintf("docs/%d", p), content()))
		}
		l.batch(int64(10+b), items...)
	}
	writes := len(l.entries)
	l.compact(1, 1, 100)
	l.compact(2, 2, 200) // drops generation 0: every write above

	db := openDB(t, t.TempDir())
	t.Cleanup(func() { db.Close() })
	reclaimer := storage.NewReclaimer(db, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	m, err := Open(db, Options{Reclaimer: reclaimer})
	if err != nil {
		t.Fatal(err)
	}
	// The writes reach tables before the compactions, as they would in a
	// validator running long enough; so does the range deletion.
	mustApply(t, m, l.entries[:writes]...)
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, m, l.entries[writes:]...)
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	run := m.LastGcRun()
	if run.GetRun() != 2 || run.GetBytesReclaimed() < 4<<20 {
		t.Fatalf("second run %d reclaimed %d B, want run 2 and at least 4 MiB", run.GetRun(), run.GetBytesReclaimed())
	}
	hash := m.StateHash()

	// Without the explicit compaction the dropped range is still on disk
	// (the reclaimer has been told, but is not running yet).
	before := db.DiskSpaceUsage()
	t.Logf("disk use %d B after the cleanup of %d B committed", before, run.GetBytesReclaimed())
	if before < run.GetBytesReclaimed() {
		t.Fatalf("disk use %d B is below the %d B the cleanup dropped: nothing left to show", before, run.GetBytesReclaimed())
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); reclaimer.Run(ctx) }()
	defer func() { cancel(); <-done }()
	want := before - run.GetBytesReclaimed()*3/4
	deadline := time.Now().Add(30 * time.Second)
	for {
		after := db.DiskSpaceUsage()
		if after <= want {
			t.Logf("disk use %d B after the explicit compaction", after)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("disk use %d B, want at most %d B (%d B before, %d B dropped)\n%s", after, want, before, run.GetBytesReclaimed(), db.Pebble().Metrics())
		}
		time.Sleep(10 * time.Millisecond) // polling Pebble's figure, not waiting for it
	}
	// Local work only: the state is what it was.
	if m.StateHash() != hash {
		t.Fatal("the explicit compaction changed the state hash")
	}
	for p := range 8 {
		mustNode(t, m, path(alice, fmt.Sprintf("docs/%d", p)))
	}
}
