package events

import (
	"encoding/json"
	"sync"

	"github.com/contentledger/contentledger/pkg/api"
)

// frame is one event as a stream writes it, rendered once for every
// subscriber the hub hands it to.
type frame[E any] struct {
	ev  E
	id  uint64
	raw []byte
}

// ControlFrame writes a control event: no id, so that a reconnection
// resumes after the last real event. data is a plain struct of strings and
// integers.
func ControlFrame(name string, data any) []byte {
	js, _ := json.Marshal(data) // plain structs of strings and integers
	b := make([]byte, 0, len(js)+len(name)+20)
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, js...)
	return append(b, "\n\n"...)
}

// gapNotice says that the events after..first-1 of the log are gone.
type gapNotice struct {
	after, first uint64
	skipped      uint64
}

func (g gapNotice) frame(streamID func(uint64) string) []byte {
	return ControlFrame(api.EventGap, api.StreamGap{AfterID: streamID(g.after), FirstID: streamID(g.first), Skipped: g.skipped})
}

// dropNotice counts the events dropped from a queue since the client was
// last told.
type dropNotice struct {
	count, from, to uint64
}

func (d dropNotice) frame(streamID func(uint64) string) []byte {
	return ControlFrame(api.EventDropped, api.StreamDropped{Count: d.count, FromID: streamID(d.from), ToID: streamID(d.to)})
}

// item is one entry of a subscriber's queue: an event, or a gap the hub
// found between two events.
type item[E any] struct {
	f   *frame[E]
	gap *gapNotice
}

// subscriber is one stream attached to the hub: a filter and a bounded
// queue that drops its oldest entries on overflow, counting them.
type subscriber[E any] struct {
	match func(E) bool // nil: every event
	max   int
	wake  chan struct{} // capacity 1: something was queued

	mu sync.Mutex
	// after is where the stream was when it attached: the hub's events up
	// to it were sent from the history already.
	after   uint64
	ring    []item[E] // grows up to max
	head, n int
	gap     *gapNotice // gaps evicted from the queue, merged
	dropped dropNotice
}

func newSubscriber[E any](match func(E) bool, max int) *subscriber[E] {
	return &subscriber[E]{match: match, max: max, wake: make(chan struct{}, 1)}
}

// wants reports whether the stream sends ev.
func (s *subscriber[E]) wants(ev E) bool { return s.match == nil || s.match(ev) }

// offer queues the frames the subscriber wants, after a gap the hub found
// before them (nil: none), and wakes the stream. It runs on the hub's
// goroutine and never blocks.
func (s *subscriber[E]) offer(frames []*frame[E], gap *gapNotice) {
	queued := false
	s.mu.Lock()
	if gap != nil && gap.first-1 > s.after {
		g := *gap
		if g.after < s.after {
			g.skipped -= s.after - g.after
			g.after = s.after
		}
		s.push(item[E]{gap: &g})
		queued = true
	}
	for _, f := range frames {
		if f.id > s.after && s.wants(f.ev) {
			s.push(item[E]{f: f})
			queued = true
		}
	}
	s.mu.Unlock()
	if queued {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// push appends it, evicting the oldest entry when the queue is full.
// Called with s.mu held.
func (s *subscriber[E]) push(it item[E]) {
	if s.n == s.max {
		s.evict()
	}
	if s.n == len(s.ring) {
		grown := make([]item[E], min(s.max, max(16, 2*len(s.ring))))
		for i := range s.n {
			grown[i] = s.ring[(s.head+i)%len(s.ring)]
		}
		s.ring, s.head = grown, 0
	}
	s.ring[(s.head+s.n)%len(s.ring)] = it
	s.n++
}

// evict drops the oldest entry into the notices.
func (s *subscriber[E]) evict() {
	old := s.ring[s.head]
	s.ring[s.head] = item[E]{}
	s.head = (s.head + 1) % len(s.ring)
	s.n--
	if old.gap != nil {
		if s.gap == nil {
			g := *old.gap
			s.gap = &g
		} else {
			s.gap.first, s.gap.skipped = old.gap.first, s.gap.skipped+old.gap.skipped
		}
		return
	}
	id := old.f.id
	if s.dropped.count == 0 {
		s.dropped.from = id
	}
	s.dropped.count++
	s.dropped.to = id
}

// take moves up to len(buf) queued entries into buf, and hands over the
// notices of what was dropped before them (they come first).
func (s *subscriber[E]) take(buf []item[E]) (gap *gapNotice, dropped dropNotice, items []item[E]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gap, dropped = s.gap, s.dropped
	s.gap, s.dropped = nil, dropNotice{}
	k := min(len(buf), s.n)
	for i := range k {
		buf[i] = s.ring[s.head]
		s.ring[s.head] = item[E]{}
		s.head = (s.head + 1) % len(s.ring)
	}
	s.n -= k
	return gap, dropped, buf[:k]
}
