package storage

import (
	"context"
	"time"
)

// MallocTrimInterval is how often TrimFreedMemory hands the free pages of C
// malloc's arenas back to the system.
const MallocTrimInterval = 10 * time.Second

// TrimFreedMemory returns C malloc's free pages to the system every
// MallocTrimInterval until ctx ends.
//
// Why: Pebble's block cache frees and allocates blocks of every size all
// the time (malloc_glibc.go). glibc returns an arena's memory only from
// its top, so the pages of blocks freed below a live one stay resident:
// the soak (bench-soak) measured the leader's C malloc holding about 60 %
// more than the cache and memtables it served after 300,000 proposals, and
// growing. malloc_trim releases every whole free page, wherever it is in
// the arena; it walks the arenas' free lists under their locks, a few
// milliseconds here, so it runs on a timer rather than after every free.
func TrimFreedMemory(ctx context.Context) {
	t := time.NewTicker(MallocTrimInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			trimMalloc()
		}
	}
}
