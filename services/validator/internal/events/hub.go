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

// Hub follows one event log and fans new events out to the attached
// streams: one read of the log per change that added events, whatever the
// number of subscribers, and each event rendered once.
type Hub[E any] struct {
	log    Source[E]
	kind   Kind[E]
	cfg    Config
	logger *zap.Logger
	done   chan struct{} // closed when Run returns

	mu   sync.Mutex
	last uint64 // newest event id handed to the subscribers (or skipped as gone)
	subs map[*subscriber[E]]struct{}

	dropped atomic.Uint64 // events dropped from queues, all streams
	open    atomic.Int64  // streams open on the route, reading history or attached
}

// NewHub returns a hub over the replicated event log; Run makes it follow
// the log.
func NewHub(log Log, cfg Config, logger *zap.Logger) *Hub[*ledgerpb.Event] {
	return New[*ledgerpb.Event](log, Content{}, cfg, logger)
}

// New returns a hub over log, whose events are of kind; Run makes it
// follow the log.
func New[E any](log Source[E], kind Kind[E], cfg Config, logger *zap.Logger) *Hub[E] {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Hub[E]{log: log, kind: kind, cfg: cfg.withDefaults(), logger: logger, done: make(chan struct{}),
		last: log.LastEventID(), subs: map[*subscriber[E]]struct{}{}}
}

// Handler returns the hub's stream route. Its streams count against the
// hub's Budget, with those of every hub that shares it.
func (h *Hub[E]) Handler() http.Handler {
	return &streamHandler[E]{hub: h}
}

// Run follows the log until ctx ends; the streams end with it.
func (h *Hub[E]) Run(ctx context.Context) {
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
func (h *Hub[E]) pump() error {
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
			return nil // a change without events: no read
		}

		gap, evs, err := readAfter(h.log, h.kind, after, h.cfg.ReadBatch)
		if err != nil {
			return err
		}
		if gap == nil && len(evs) == 0 {
			return nil
		}
		frames := make([]*frame[E], 0, len(evs))
		for _, ev := range evs {
			raw, err := h.kind.Render(ev)
			if err != nil {
				h.logger.Error("rendering an event", zap.Uint64("id", h.kind.ID(ev)), zap.Error(err))
				continue
			}
			frames = append(frames, &frame[E]{ev: ev, id: h.kind.ID(ev), raw: raw})
		}
		next := after
		if gap != nil {
			next = gap.first - 1
		}
		if len(evs) > 0 {
			next = h.kind.ID(evs[len(evs)-1])
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
// before them when the log no longer keeps events after it. The oldest
// kept id is asked first, so that a read never starts among deleted keys;
// ids are consecutive, so a first event beyond the start of the read means
// more were taken meanwhile.
func readAfter[E any](log Source[E], kind Kind[E], after uint64, limit int) (*gapNotice, []E, error) {
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
	if len(evs) > 0 && kind.ID(evs[0]) > from+1 {
		if gap == nil {
			gap = &gapNotice{after: after}
		}
		gap.first = kind.ID(evs[0])
	}
	if gap != nil {
		gap.skipped = gap.first - gap.after - 1
	}
	return gap, evs, nil
}

// attach adds s to the subscribers if the stream is at cursor or past the
// hub's position, so that from now on the hub hands it every event after
// cursor; otherwise the stream has history to read first.
func (h *Hub[E]) attach(s *subscriber[E], cursor uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cursor < h.last {
		return false
	}
	s.after = cursor
	h.subs[s] = struct{}{}
	return true
}

func (h *Hub[E]) detach(s *subscriber[E]) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Subscribers is the number of streams attached.
func (h *Hub[E]) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Position is the newest event id the hub has handed out.
func (h *Hub[E]) Position() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// Open is the number of streams open on the hub's route: from the moment a
// stream holds its place in the budget until it ends, whether it is still
// reading history or attached (Subscribers counts only those).
func (h *Hub[E]) Open() int { return int(h.open.Load()) }

// Dropped is the number of events dropped from stream queues so far.
func (h *Hub[E]) Dropped() uint64 { return h.dropped.Load() }
