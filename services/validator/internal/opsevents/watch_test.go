package opsevents

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// TestOpsCounterWatch: snapshot transfers and write stalls become events
// as their counters move, by peer; a counter that starts again counts from
// zero.
func TestCounterWatch(t *testing.T) {
	rec := New(Options{})
	peers := map[uint64]transport.PeerStats{2: {SnapshotsSent: 1}, 3: {}}
	var stalls storage.WriteStalls
	w := NewCounterWatch(rec, func() map[uint64]transport.PeerStats { return peers }, func() storage.WriteStalls { return stalls })
	w.Look()
	peers = map[uint64]transport.PeerStats{2: {SnapshotsSent: 3, SnapshotsFailed: 1}, 3: {SnapshotsReceived: 1}}
	stalls = storage.WriteStalls{Count: 2, LastReason: "L0 file count limit exceeded"}
	w.Look()
	w.Look()                                                      // nothing moved
	peers = map[uint64]transport.PeerStats{2: {SnapshotsSent: 1}} // removed and added again; 3 removed
	w.Look()

	got, _ := rec.Recent(100)
	var seen []string
	for i := len(got) - 1; i >= 0; i-- {
		e := got[i]
		seen = append(seen, e.Type.String()+" peer="+strconv.FormatUint(e.Peer, 10)+" count="+strconv.FormatUint(e.Count, 10)+" "+e.Reason)
	}
	want := []string{
		"snapshot.sent peer=2 count=1 ",
		// The second look: peers in map order, then the stalls.
		"snapshot.received peer=3 count=1 ",
		"snapshot.sent peer=2 count=2 ",
		"snapshot.failed peer=2 count=1 ",
		"storage.write_stall peer=0 count=2 L0 file count limit exceeded",
		"snapshot.sent peer=2 count=1 ",
	}
	if len(seen) != len(want) {
		t.Fatalf("events %v, want %v", seen, want)
	}
	// Within one look peers come in map order: compare the second look as
	// a set.
	second := map[string]bool{seen[1]: true, seen[2]: true, seen[3]: true}
	if seen[0] != want[0] || !second[want[1]] || !second[want[2]] || !second[want[3]] || seen[4] != want[4] || seen[5] != want[5] {
		t.Fatalf("events %v, want %v", seen, want)
	}
	if s := rec.Stats(); s.ByReason[WriteStall]["L0 file count limit exceeded"] != 2 {
		t.Fatalf("stalls by reason %v", s.ByReason[WriteStall])
	}
}

// TestCounterWatchRuns: run looks at once, then every interval, and
// returns when its context ends.
func TestCounterWatchRuns(t *testing.T) {
	rec := New(Options{})
	changed := rec.Changed()
	w := NewCounterWatch(rec, func() map[uint64]transport.PeerStats { return nil },
		func() storage.WriteStalls {
			return storage.WriteStalls{Count: 1, LastReason: "memtable count limit reached"}
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, time.Hour); close(done) }()
	<-changed // the first look, without waiting an hour
	cancel()
	<-done
	if got, _ := rec.Recent(10); len(got) != 1 || got[0].Type != WriteStall {
		t.Fatalf("events %+v", got)
	}
}

// TestFeedWatch: the chain feed's staleness becomes events at its changes
// only; a missing first status is a change only after the grace.
func TestFeedWatch(t *testing.T) {
	c := newClock()
	rec := New(Options{Now: c.now})
	reason, detail := FeedNoStatus, "no status yet"
	w := NewFeedWatch(rec, func() (string, string) { return reason, detail }, 30*time.Second)
	w.Look() // within the grace: the watcher may just be starting
	c.advance(31 * time.Second)
	w.Look()
	w.Look() // still the same: nothing new
	reason, detail = "", ""
	w.Look()
	reason, detail = FeedWatcherBehind, "up to block 10, 100 blocks behind the chain"
	w.Look()
	reason, detail = FeedStatusOld, "the last status is 2m0s old"
	w.Look()
	reason, detail = "", ""
	w.Look()
	w.Look()

	got, _ := rec.Recent(100)
	var seen []string
	for i := len(got) - 1; i >= 0; i-- {
		seen = append(seen, got[i].Type.String()+" "+got[i].Severity.String()+" "+got[i].Reason)
	}
	want := []string{
		"chain.feed_stale warn no_status",
		"chain.feed_current info ",
		"chain.feed_stale warn watcher_behind",
		"chain.feed_stale warn status_old",
		"chain.feed_current info ",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	if m := got[1].Message(); !strings.Contains(m, "payment_feed_stale") || !strings.Contains(m, "2m0s old") {
		t.Fatalf("message %q", m)
	}
	if a := got[1].API(); a.Attributes.Reason != FeedStatusOld || a.Severity != "warn" || a.Type != "chain.feed_stale" {
		t.Fatalf("API %+v", a)
	}
}

// TestRunWatch: compaction runs become events as they start and end; the
// first look only notes where things are; a run that started and ended
// between two looks is both.
func TestRunWatch(t *testing.T) {
	rec := New(Options{})
	var run *ledgerpb.GcRun
	w := NewRunWatch(rec, func() *ledgerpb.GcRun { return run })
	run = &ledgerpb.GcRun{Run: 1, Epoch: 10, Steps: 4, Done: true}
	w.Look() // at start: run 1 ended before
	run = &ledgerpb.GcRun{Run: 2, Epoch: 11}
	w.Look()
	w.Look()
	run = &ledgerpb.GcRun{Run: 2, Epoch: 11, Steps: 3, BytesReclaimed: 4096, Done: true}
	w.Look()
	w.Look()
	run = &ledgerpb.GcRun{Run: 3, Epoch: 12, Steps: 1, Abandoned: "5 compaction cycles failed in a row"}
	w.Look()

	got, _ := rec.Recent(100)
	var seen []string
	for i := len(got) - 1; i >= 0; i-- {
		seen = append(seen, got[i].Type.String()+" "+got[i].Severity.String()+": "+got[i].Message())
	}
	want := []string{
		"gc.compaction_started info: GC compaction run 2 started (epoch 11)",
		"gc.compaction_finished info: GC compaction run 2 finished after 3 steps; 4096 bytes of segments reclaimed",
		"gc.compaction_started info: GC compaction run 3 started (epoch 12)",
		"gc.compaction_abandoned warn: GC compaction run 3 was given up after 1 steps: 5 compaction cycles failed in a row",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
