package storage

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// gatedFS holds back the creation of sstables while closed: flushes cannot
// finish, so memtables pile up until Pebble stalls writes.
type gatedFS struct {
	vfs.FS
	mu   sync.Mutex
	open chan struct{}
}

func (g *gatedFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") {
		g.mu.Lock()
		gate := g.open
		g.mu.Unlock()
		<-gate
	}
	return g.FS.Create(name, category)
}

// TestWriteStalls: writes that outrun a flush held back stall, and the
// stall is counted, timed and over once the flush goes through.
func TestWriteStalls(t *testing.T) {
	fs := &gatedFS{FS: vfs.Default, open: make(chan struct{})}
	db, err := Open(Options{Dir: t.TempDir(), FS: fs, MemTableSize: 1 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if s := db.WriteStalls(); s.Count != 0 || !s.Since.IsZero() {
		t.Fatalf("stalls of a new database: %+v", s)
	}
	written := make(chan error, 1)
	go func() {
		value := make([]byte, 64<<10)
		for i := range 200 { // 12.5 MiB: far more memtables than Pebble queues
			if err := db.Pebble().Set([]byte{'k', byte(i >> 8), byte(i)}, value, pebble.NoSync); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	deadline := time.Now().Add(20 * time.Second)
	for db.WriteStalls().Since.IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("no write stall while flushes are held back: %+v", db.WriteStalls())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := db.WriteStalls(); s.Count != 1 || s.LastReason == "" {
		t.Fatalf("during the stall: %+v", s)
	}
	close(fs.open)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	for s := db.WriteStalls(); !s.Since.IsZero(); s = db.WriteStalls() {
		if time.Now().After(deadline) {
			t.Fatalf("the stall did not end once flushes went through: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := db.WriteStalls(); s.Count < 1 || s.Total <= 0 {
		t.Fatalf("after the stall: %+v", s)
	}
}
