package events

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// frame is one event as a stream writes it, rendered once for every
// subscriber the hub hands it to.
type frame struct {
	ev  *ledgerpb.Event
	raw []byte
}

// render writes ev in SSE framing: id (the sequence number), event (the
// type) and one data line of JSON (encoding/json escapes newlines).
func render(ev *ledgerpb.Event) (*frame, error) {
	data, err := json.Marshal(api.EventOf(ev))
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(data)+len(ev.GetType())+40)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ev.GetId(), 10)
	b = append(b, "\nevent: "...)
	b = append(b, ev.GetType()...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return &frame{ev: ev, raw: b}, nil
}

// controlFrame writes a control event: no id, so that a reconnection
// resumes after the last real event.
func controlFrame(name string, data any) []byte {
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

func (g gapNotice) frame() []byte {
	return controlFrame(api.EventGap, api.StreamGap{
		AfterID: strconv.FormatUint(g.after, 10), FirstID: strconv.FormatUint(g.first, 10), Skipped: g.skipped,
	})
}

// dropNotice counts the events dropped from a queue since the client was
// last told.
type dropNotice struct {
	count, from, to uint64
}

func (d dropNotice) frame() []byte {
	return controlFrame(api.EventDropped, api.StreamDropped{
		Count: d.count, FromID: strconv.FormatUint(d.from, 10), ToID: strconv.FormatUint(d.to, 10),
	})
}

// item is one entry of a subscriber's queue: an event, or a gap the hub
// found between two events.
type item struct {
	f   *frame
	gap *gapNotice
}

// subscriber is one stream attached to the hub: a filter and a bounded
// queue that drops its oldest entries on overflow, counting them.
type subscriber struct {
	filter *Filter
	max    int
	wake   chan struct{} // capacity 1: something was queued

	mu sync.Mutex
	// after is where the stream was when it attached: the hub's events up
	// to it were sent from the history already.
	after   uint64
	ring    []item // grows up to max
	head, n int
	gap     *gapNotice // gaps evicted from the queue, merged
	dropped dropNotice
}

func newSubscriber(f *Filter, max int) *subscriber {
	return &subscriber{filter: f, max: max, wake: make(chan struct{}, 1)}
}

// offer queues the frames the subscriber wants, after a gap the hub found
// before them (nil: none), and wakes the stream. It runs on the hub's
// goroutine and never blocks.
func (s *subscriber) offer(frames []*frame, gap *gapNotice) {
	queued := false
	s.mu.Lock()
	if gap != nil && gap.first-1 > s.after {
		g := *gap
		if g.after < s.after {
			g.skipped -= s.after - g.after
			g.after = s.after
		}
		s.push(item{gap: &g})
		queued = true
	}
	for _, f := range frames {
		if f.ev.GetId() > s.after && s.filter.Match(f.ev) {
			s.push(item{f: f})
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
func (s *subscriber) push(it item) {
	if s.n == s.max {
		s.evict()
	}
	if s.n == len(s.ring) {
		grown := make([]item, min(s.max, max(16, 2*len(s.ring))))
		for i := range s.n {
			grown[i] = s.ring[(s.head+i)%len(s.ring)]
		}
		s.ring, s.head = grown, 0
	}
	s.ring[(s.head+s.n)%len(s.ring)] = it
	s.n++
}

// evict drops the oldest entry into the notices.
func (s *subscriber) evict() {
	old := s.ring[s.head]
	s.ring[s.head] = item{}
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
	id := old.f.ev.GetId()
	if s.dropped.count == 0 {
		s.dropped.from = id
	}
	s.dropped.count++
	s.dropped.to = id
}

// take moves up to len(buf) queued entries into buf, and hands over the
// notices of what was dropped before them (they come first).
func (s *subscriber) take(buf []item) (gap *gapNotice, dropped dropNotice, items []item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gap, dropped = s.gap, s.dropped
	s.gap, s.dropped = nil, dropNotice{}
	k := min(len(buf), s.n)
	for i := range k {
		buf[i] = s.ring[s.head]
		s.ring[s.head] = item{}
		s.head = (s.head + 1) % len(s.ring)
	}
	s.n -= k
	return gap, dropped, buf[:k]
}
