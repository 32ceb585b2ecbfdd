package storage

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// WriteStalls describes the write stalls of a database since it was opened.
// Pebble stalls every write while flushes or L0 compactions fall behind
// (too many memtables queued, or too many L0 sublevels): the validator's
// raft appends and applies wait, which shows as commit latency. Pebble
// reports stalls only to an event listener, which Open installs.
type WriteStalls struct {
	// Count is the number of stalls that began.
	Count uint64
	// Total is how long the finished stalls lasted together.
	Total time.Duration
	// Since is when the stall in progress began; zero when none is.
	Since time.Time
	// LastReason is Pebble's reason for the latest stall ("memtable count
	// limit reached", "L0 file count limit exceeded").
	LastReason string
}

// stallMeter counts stalls from Pebble's event listener.
type stallMeter struct {
	log *zap.Logger
	now func() time.Time

	mu    sync.Mutex
	stats WriteStalls
}

// listener returns the Pebble event listener that feeds m.
func (m *stallMeter) listener() pebble.EventListener {
	return pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.stats.Count++
			m.stats.Since = m.now()
			m.stats.LastReason = info.Reason
		},
		WriteStallEnd: func() {
			m.mu.Lock()
			since, reason := m.stats.Since, m.stats.LastReason
			var d time.Duration
			if !since.IsZero() {
				d = m.now().Sub(since)
				m.stats.Total += d
			}
			m.stats.Since = time.Time{}
			m.mu.Unlock()
			// One line per stall rather than two: under overload stalls
			// come often, and the end knows how long it lasted.
			m.log.Warn("write stall", zap.String("reason", reason), zap.Duration("duration", d))
		},
	}
}

func (m *stallMeter) snapshot() WriteStalls {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}
