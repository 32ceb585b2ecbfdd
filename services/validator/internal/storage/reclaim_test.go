package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"
)

func TestReclaimerMergesPendingRanges(t *testing.T) {
	r := NewReclaimer(nil, nil)
	r.Reclaim([]byte("s/g/5"), []byte("s/g/7"))
	r.Reclaim([]byte("s/g/1"), []byte("s/g/3"))
	r.Reclaim([]byte("s/g/4"), []byte("s/g/4")) // empty: ignored
	if !bytes.Equal(r.pending.lower, []byte("s/g/1")) || !bytes.Equal(r.pending.upper, []byte("s/g/7")) {
		t.Fatalf("pending [%q, %q), want [s/g/1, s/g/7)", r.pending.lower, r.pending.upper)
	}
	if len(r.wake) != 1 {
		t.Fatal("Reclaim did not signal, or signalled twice into a buffer of one")
	}
}

func TestReclaimerReturnsSpaceAndStops(t *testing.T) {
	db, err := Open(Options{Dir: t.TempDir(), NoSync: true, manualCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 64<<10)
	for i := range uint64(64) { // 4 MiB of incompressible values
		rand.Read(value)
		if err := db.Pebble().Set(SegmentKey(i, 0), value, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	lower, upper := SegmentBounds()
	if err := db.Pebble().DeleteRange(lower, upper, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	// The values are in blob files (separated), referenced by the tables.
	tables := func() uint64 {
		m := db.Pebble().Metrics()
		return m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize
	}
	if got := tables(); got < 4<<20 {
		t.Fatalf("tables and blob files hold %d B after the range deletion, want the 4 MiB still there", got)
	}

	r := NewReclaimer(db, nil)
	r.Reclaim(lower, upper)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for tables() > 64<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("tables and blob files hold %d B after the explicit compaction", tables())
		}
		time.Sleep(10 * time.Millisecond) // polling Pebble's figure
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
