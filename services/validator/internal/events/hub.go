package events

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Hub follows the event log and fans new events out to the attached
// streams: one read of the log per apply that added events, whatever the
// number of subscribers, and each event rendered once.
type Hub struct {
	log    Log
	cfg    Config
	conns  *connLimit // the streams of each client, all routes together
	logger *zap.Logger
	done   chan struct{} // closed when Run returns

	mu   sync.Mutex
	last uint64 // newest event id handed to the subscribers (or skipped as gone)
	subs map[*subscriber]struct{}

	dropped atomic.Uint64 // events dropped from queues, all streams
}

// NewHub returns a hub over log; Run makes it follow the log.
func NewHub(log Log, cfg Config, logger *zap.Logger) *Hub {
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	return &Hub{log: log, cfg: cfg, conns: &connLimit{max: cfg.MaxPerIP, n: map[string]int{}}, logger: logger, done: make(chan struct{}),
		last: log.LastEventID(), subs: map[*subscriber]struct{}{}}
}

// Handler returns a stream route. Every route of the hub counts against
// one budget per client (Config.MaxPerIP).
func (h *Hub) Handler() http.Handler {
	return &streamHandler{hub: h, conns: h.conns}
}

// Run follows the log until ctx ends; the streams end with it.
func (h *Hub) Run(ctx context.Context) {
	defer close(h.done)
	for {
		changed := h.log.Changed()
		if err := h.pump(); err != nil {
			// A read of the log failed: try again shortly, whether or not
			// anything else is applied meanwhile.
			h.logger.Warn("reading the event log", zap.Error(err))
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// pump hands every event after h.last to the subscribers, in reads of at
// most ReadBatch events.
func (h *Hub) pump() error {
	for {
		h.mu.Lock()
		if len(h.subs) == 0 {
			// Nobody listens: nothing to read. A stream that attaches later
			// reads what it needs from the log itself.
			h.last = max(h.last, h.log.LastEventID())
			h.mu.Unlock()
			return nil
		}
		after := h.last
		h.mu.Unlock()
		if h.log.LastEventID() <= after && h.log.FirstEventID() <= after+1 {
			return nil // an apply without events: no read
		}

		gap, evs, err := readAfter(h.log, after, h.cfg.ReadBatch)
		if err != nil {
			return err
		}
		if gap == nil && len(evs) == 0 {
			return nil
		}
		frames := make([]*frame, 0, len(evs))
		for _, ev := range evs {
			f, err := render(ev)
			if err != nil {
				h.logger.Error("rendering an event", zap.Uint64("id", ev.GetId()), zap.Error(err))
				continue
			}
			frames = append(frames, f)
		}
		next := after
		if gap != nil {
			next = gap.first - 1
		}
		if len(evs) > 0 {
			next = evs[len(evs)-1].GetId()
		}
		h.mu.Lock()
		for s := range h.subs {
			s.offer(frames, gap)
		}
		h.last = next
		h.mu.Unlock()
		if len(evs) < h.cfg.ReadBatch {
			return nil
		}
	}
}

// readAfter reads up to limit events after the id after, and the gap
// before them when retention took events after it. The oldest kept id is
// asked first, so that a read never starts among deleted keys; ids are
// consecutive, so a first event beyond the start of the read means more
// were taken meanwhile.
func readAfter(log Log, after uint64, limit int) (*gapNotice, []*ledgerpb.Event, error) {
	var gap *gapNotice
	from := after
	if first := log.FirstEventID(); first > after+1 {
		gap = &gapNotice{after: after, first: first}
		from = first - 1
	}
	evs, err := log.EventsSince(from, limit)
	if err != nil {
		return nil, nil, err
	}
	if len(evs) > 0 && evs[0].GetId() > from+1 {
		if gap == nil {
			gap = &gapNotice{after: after}
		}
		gap.first = evs[0].GetId()
	}
	if gap != nil {
		gap.skipped = gap.first - gap.after - 1
	}
	return gap, evs, nil
}

// attach adds s to the subscribers if the stream is at cursor or past the
// hub's position, so that from now on the hub hands it every event after
// cursor; otherwise the stream has history to read first.
func (h *Hub) attach(s *subscriber, cursor uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cursor < h.last {
		return false
	}
	s.after = cursor
	h.subs[s] = struct{}{}
	return true
}

func (h *Hub) detach(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Subscribers is the number of streams attached.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Position is the newest event id the hub has handed out.
func (h *Hub) Position() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// Dropped is the number of events dropped from stream queues so far.
func (h *Hub) Dropped() uint64 { return h.dropped.Load() }
