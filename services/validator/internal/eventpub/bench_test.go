package eventpub_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/eventpub"
)

// benchLog holds events built in advance and shows them avail at a time,
// so that building them does not count in the measurement.
type benchLog struct {
	mu      sync.Mutex
	events  []*ledgerpb.Event
	avail   int
	changed chan struct{}
}

func newBenchLog(n int) *benchLog {
	l := &benchLog{changed: make(chan struct{})}
	for i := range n {
		id := uint64(i + 1)
		w := make([]byte, 20)
		w[0], w[19], w[18] = 0x70, byte(id), byte(id>>8)
		l.events = append(l.events, &ledgerpb.Event{Id: id, Type: api.EventContent, Action: "write",
			Path: fmt.Sprintf("/ledger/0x%x/posts/%d", w, id), Wallet: "0x" + hex.EncodeToString(w), Organization: "org-1",
			Timestamp: 1_750_000_000_000 + int64(id), ProposalId: fmt.Sprintf("p-%d", id), CommitIndex: 1000 + id,
			ContentHash: "0x" + hex.EncodeToString(make([]byte, 32))})
	}
	return l
}

// show makes n more events visible and signals the change.
func (l *benchLog) show(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.avail = min(l.avail+n, len(l.events))
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *benchLog) EventsSince(after uint64, limit int) ([]*ledgerpb.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := min(int(after), l.avail)
	to := l.avail
	if limit > 0 {
		to = min(to, from+limit)
	}
	return l.events[from:to], nil
}

func (l *benchLog) LastEventID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(l.avail)
}

func (l *benchLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// cpuTime is the CPU time (user and system) of the whole process: the
// publisher and the embedded server together.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPublish publishes b.N events to an embedded server configured as
// tools/devnats (file storage synced on every write) and reports events/s
// and the process's CPU time per event:
//   - backlog: every event is in the log at the start (the publisher's
//     ceiling);
//   - paced: events are applied at 5,000/s in groups of 50, as a busy
//     cluster commits them (the cost per event at a realistic rate).
//
// Run with a fixed count, e.g. -benchtime 20000x.
func BenchmarkPublish(b *testing.B) {
	b.Run("backlog", func(b *testing.B) { benchPublish(b, 0) })
	b.Run("paced", func(b *testing.B) { benchPublish(b, 5000) })
}

func benchPublish(b *testing.B, rate int) {
	s := startNATS(b)
	js := connect(b, s)
	if _, err := eventpub.EnsureStream(context.Background(), js, eventpub.StreamConfig{}); err != nil {
		b.Fatal(err)
	}
	log := newBenchLog(b.N)
	p := eventpub.New(js, log, log.Changed, newLeader(true), eventpub.Config{}, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime(b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	const group = 50
	var next <-chan time.Time
	if rate == 0 {
		log.show(b.N)
	} else {
		t := time.NewTicker(time.Second * group / time.Duration(rate))
		defer t.Stop()
		next = t.C
		log.show(group)
	}
	// Wait for the last ack: the status is read every 2ms, which is
	// negligible against the run.
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for p.Status().LastPublishedID < uint64(b.N) {
		select {
		case <-next:
			log.show(group)
		case <-poll.C:
		}
	}
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
	b.StopTimer()
	cancel()
	<-done
	if st := p.Status(); st.Published != uint64(b.N) {
		b.Fatalf("published %d of %d events (status %+v)", st.Published, b.N, st)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
	if st := p.Status(); st.Batches > 0 {
		b.ReportMetric(float64(st.Published)/float64(st.Batches), "events/batch")
	}
}
