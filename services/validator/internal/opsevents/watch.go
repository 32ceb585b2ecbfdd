package opsevents

import (
	"context"
	"time"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// CounterWatch turns counters that other parts keep into events: the
// transport's snapshot transfers per peer and the database's write stalls.
// Neither tells anyone when they move, so the watch looks at them every
// interval and records what moved since the last look. It belongs to the
// goroutine that calls Run (or Look).
type CounterWatch struct {
	rec    *Recorder
	peers  func() map[uint64]transport.PeerStats
	stalls func() storage.WriteStalls

	seen       map[uint64]transport.PeerStats
	stallsSeen uint64
}

// NewCounterWatch watches peers (the transport's Stats) and stalls (the
// database's WriteStalls) for rec.
func NewCounterWatch(rec *Recorder, peers func() map[uint64]transport.PeerStats, stalls func() storage.WriteStalls) *CounterWatch {
	// Both sets of counters start at zero with the process (a peer's when
	// it is added), so what they hold at the first look happened since.
	return &CounterWatch{rec: rec, peers: peers, stalls: stalls, seen: map[uint64]transport.PeerStats{}}
}

// Run looks at once, then every interval, until ctx ends.
func (w *CounterWatch) Run(ctx context.Context, every time.Duration) { lookEvery(ctx, every, w.Look) }

// Look records what moved since the last look.
func (w *CounterWatch) Look() {
	now := w.peers()
	for id, st := range now {
		was := w.seen[id]
		w.rec.Snapshots(SnapshotSent, id, moved(was.SnapshotsSent, st.SnapshotsSent))
		w.rec.Snapshots(SnapshotFailed, id, moved(was.SnapshotsFailed, st.SnapshotsFailed))
		w.rec.Snapshots(SnapshotReceived, id, moved(was.SnapshotsReceived, st.SnapshotsReceived))
	}
	w.seen = now
	s := w.stalls()
	w.rec.WriteStalls(s.LastReason, moved(w.stallsSeen, s.Count))
	w.stallsSeen = s.Count
}

// moved is how far a counter went from was to now; a counter below its
// last value started again from zero (a peer removed and added again).
func moved(was, now uint64) uint64 {
	if now < was {
		return now
	}
	return now - was
}

// FeedWatch turns the chain feed's staleness into events: chain.feed_stale
// when the feed becomes stale (or the reason changes while it stays so),
// chain.feed_current when it recovers. Staleness is worked out when asked
// (the age of the chain-watcher's last status counts), so the watch asks
// every interval. It belongs to the goroutine that calls Run (or Look).
type FeedWatch struct {
	rec   *Recorder
	feed  func() (reason, detail string)
	grace time.Duration
	start time.Time

	reason string // as last recorded; "": current
}

// NewFeedWatch watches feed for rec: feed says why the chain feed is stale,
// a Feed* reason and the figures in words, or "" when it is current. The
// feed counts as current until shown otherwise; FeedNoStatus is reported
// only after grace from now, the time a watcher that runs takes to send its
// first status.
func NewFeedWatch(rec *Recorder, feed func() (reason, detail string), grace time.Duration) *FeedWatch {
	return &FeedWatch{rec: rec, feed: feed, grace: grace, start: rec.now()}
}

// Run looks at once, then every interval, until ctx ends.
func (w *FeedWatch) Run(ctx context.Context, every time.Duration) { lookEvery(ctx, every, w.Look) }

// Look records a change of the feed's staleness since the last look.
func (w *FeedWatch) Look() {
	reason, detail := w.feed()
	if reason == w.reason || (reason == FeedNoStatus && w.rec.now().Sub(w.start) < w.grace) {
		return
	}
	if reason == "" {
		w.rec.FeedCurrent()
	} else {
		w.rec.FeedStale(reason, detail)
	}
	w.reason = reason
}

// RunWatch turns the GC compaction runs of the replicated state into
// events: a run started, finished or given up since the last look. A run
// is state (every validator applies it), so every validator records it;
// the first look only notes where things are. It belongs to the goroutine
// that calls Run (or Look).
type RunWatch struct {
	rec  *Recorder
	last func() *ledgerpb.GcRun

	looked bool
	run    uint64 // the newest run seen
	ended  bool   // whether it was seen ended
}

// NewRunWatch watches last (the state's LastGcRun: the newest compaction
// run, nil before the first) for rec.
func NewRunWatch(rec *Recorder, last func() *ledgerpb.GcRun) *RunWatch {
	return &RunWatch{rec: rec, last: last}
}

// Run looks at once, then every interval, until ctx ends.
func (w *RunWatch) Run(ctx context.Context, every time.Duration) { lookEvery(ctx, every, w.Look) }

// Look records what the newest run did since the last look. A run that
// started and ended between two looks is both events.
func (w *RunWatch) Look() {
	run := w.last()
	if run == nil {
		w.looked = true
		return
	}
	ended := run.GetDone() || run.GetAbandoned() != ""
	if !w.looked {
		w.looked, w.run, w.ended = true, run.GetRun(), ended
		return
	}
	if run.GetRun() != w.run {
		w.rec.CompactionStarted(run.GetRun(), run.GetEpoch())
		w.run, w.ended = run.GetRun(), false
	}
	if ended && !w.ended {
		w.rec.CompactionEnded(run.GetRun(), run.GetEpoch(), run.GetSteps(), run.GetBytesReclaimed(), run.GetAbandoned())
		w.ended = true
	}
}

// lookEvery calls look at once, then every interval, until ctx ends: the
// watches' one loop.
func lookEvery(ctx context.Context, every time.Duration, look func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		look()
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
