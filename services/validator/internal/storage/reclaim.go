package storage

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Returning the space of dropped key ranges
//
// A range deletion (cleanup of old segment generations, internal/state
// compact.go) writes one tombstone; the bytes it covers stay on disk until
// Pebble's own compactions happen to rewrite the tables that hold them,
// which for a quiet key range can be much later. The Reclaimer compacts
// such a range explicitly, in the background, once the deletion is
// committed: local work that changes no key, so it stays out of apply
// (a pure function of state and entry) and every validator does it on its
// own schedule.

// Reclaimer compacts the key ranges it is told were deleted, one
// compaction at a time, on the goroutine that runs Run. Ranges told while a
// compaction runs are merged into one, compacted next. The zero value is
// not usable: NewReclaimer.
type Reclaimer struct {
	db  *DB
	log *zap.Logger

	wake chan struct{} // one buffered signal: a range is pending

	mu      sync.Mutex
	pending keyRange // empty when nothing is pending
}

type keyRange struct{ lower, upper []byte }

func (r keyRange) empty() bool { return r.lower == nil }

// NewReclaimer returns a Reclaimer of db. Run it; Reclaim before Run only
// queues.
func NewReclaimer(db *DB, log *zap.Logger) *Reclaimer {
	if log == nil {
		log = zap.NewNop()
	}
	return &Reclaimer{db: db, log: log, wake: make(chan struct{}, 1)}
}

// Reclaim asks for [lower, upper) to be compacted, once what deleted it is
// committed. It never blocks (the state machine calls it on its apply
// goroutine) and copies the keys.
func (r *Reclaimer) Reclaim(lower, upper []byte) {
	if bytes.Compare(lower, upper) >= 0 {
		return
	}
	r.mu.Lock()
	p := &r.pending
	if p.empty() || bytes.Compare(lower, p.lower) < 0 {
		p.lower = append([]byte(nil), lower...)
	}
	if p.upper == nil || bytes.Compare(upper, p.upper) > 0 {
		p.upper = append([]byte(nil), upper...)
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default: // already signalled
	}
}

// Run compacts the pending ranges until ctx ends. A compaction in progress
// is cancelled with ctx, so Run returns promptly and the database can be
// closed after it (Pebble refuses to compact a closed database).
func (r *Reclaimer) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		rng := r.pending
		r.pending = keyRange{}
		r.mu.Unlock()
		if rng.empty() {
			continue
		}
		if err := r.compact(ctx, rng); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("explicit compaction of a deleted key range failed; Pebble's own compactions reclaim it later",
				zap.String("lower", hex.EncodeToString(rng.lower)), zap.String("upper", hex.EncodeToString(rng.upper)), zap.Error(err))
		}
	}
}

func (r *Reclaimer) compact(ctx context.Context, rng keyRange) error {
	start := time.Now()
	before := r.db.DiskSpaceUsage()
	err := r.db.CompactRange(ctx, rng.lower, rng.upper)
	if err != nil {
		return err
	}
	// Obsolete tables are deleted in the background: the figure after may
	// still count some of them.
	r.log.Info("compacted a deleted key range", zap.String("lower", hex.EncodeToString(rng.lower)), zap.String("upper", hex.EncodeToString(rng.upper)),
		zap.Uint64("disk_bytes_before", before), zap.Uint64("disk_bytes_after", r.db.DiskSpaceUsage()), zap.Duration("took", time.Since(start)))
	return nil
}

// CompactRange compacts every key in [lower, upper) down to the bottom
// level, flushing the memtables that hold any of them first: the space of
// deleted keys in the range is returned once the tables it replaced are
// removed (Pebble removes obsolete files in the background).
func (d *DB) CompactRange(ctx context.Context, lower, upper []byte) error {
	if err := d.pdb.Compact(ctx, lower, upper, true); err != nil {
		return fmt.Errorf("storage: compacting [%q, %q): %w", lower, upper, err)
	}
	return nil
}

// DiskSpaceUsage is the bytes the database takes on disk: tables, WAL,
// manifest and options, including obsolete files not removed yet: the
// figure /v1/ops/snapshots/storage and /metrics report, which read it from
// the same Pebble metrics along with the rest.
func (d *DB) DiskSpaceUsage() uint64 { return d.pdb.Metrics().DiskSpaceUsage() }
