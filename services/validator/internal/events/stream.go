package events

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
)

// takeBatch is the most queued entries a stream takes at once.
const takeBatch = 256

// streamHandler serves one stream route.
type streamHandler[E any] struct {
	hub *Hub[E]
}

// ServeHTTP checks the request, holds one of the client's streams of the
// budget, then streams until the client leaves or the hub stops.
func (h *streamHandler[E]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hub := h.hub
	start, aerr := hub.kind.Open(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	budget := hub.cfg.Budget
	client := budget.key(r)
	if !budget.acquire(client) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(hub.cfg.Retry/time.Second))))
		writeError(w, apierror.New(apierror.RateLimited,
			"at most %d concurrent event streams per client, both stream routes together; close one before opening another", budget.max).
			WithDetail("limit", budget.max))
		return
	}
	defer budget.release(client)
	hub.open.Add(1)
	defer hub.open.Add(-1)
	// The server's read and write timeouts are for requests; a stream keeps
	// its own write deadline per flush (armDeadline).
	httpserver.LiftDeadlines(w)
	after := start.After
	if !start.Resume {
		// Without a resumption point the stream starts at new events.
		after = hub.log.LastEventID()
	}

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no") // proxies that buffer responses must not hold events back
	w.WriteHeader(http.StatusOK)
	burst := max(1, int(hub.cfg.Rate/20)) // 50 ms worth of events
	st := &stream[E]{
		hub: hub, bw: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w),
		lim: rate.NewLimiter(rate.Limit(hub.cfg.Rate), burst), sub: newSubscriber(start.Match, hub.cfg.Queue),
	}
	if err := st.run(r.Context(), after, start.Notice); err != nil && !errors.Is(err, context.Canceled) {
		hub.logger.Debug("event stream ended", zap.String("client", client), zap.Error(err))
	}
}

// stream is one client's connection.
type stream[E any] struct {
	hub *Hub[E]
	bw  *bufio.Writer
	rc  *http.ResponseController
	lim *rate.Limiter
	sub *subscriber[E]
}

var errHubStopped = errors.New("events: the validator is stopping")

func (st *stream[E]) run(ctx context.Context, cursor uint64, notice []byte) error {
	cfg, kind := st.hub.cfg, st.hub.kind
	if _, err := st.bw.WriteString("retry: " + strconv.FormatInt(cfg.Retry.Milliseconds(), 10) + "\n\n"); err != nil {
		return err
	}
	if _, err := st.bw.Write(notice); err != nil {
		return err
	}
	if err := st.flush(); err != nil {
		return err
	}
	// History first, read from the log by this stream alone, until it is
	// where the hub is; from then on the hub hands it every new event.
	for !st.hub.attach(st.sub, cursor) {
		var err error
		if cursor, err = st.catchUp(ctx, cursor); err != nil {
			return err
		}
	}
	defer st.hub.detach(st.sub)

	keepAlive := time.NewTicker(cfg.KeepAlive)
	defer keepAlive.Stop()
	buf := make([]item[E], takeBatch)
	for {
		gap, dropped, items := st.sub.take(buf)
		if gap == nil && dropped.count == 0 && len(items) == 0 {
			select {
			case <-st.sub.wake:
			case <-keepAlive.C:
				st.armDeadline()
				if _, err := st.bw.WriteString(": keep-alive\n\n"); err != nil {
					return err
				}
				if err := st.flush(); err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			case <-st.hub.done:
				return errHubStopped
			}
			continue
		}
		st.armDeadline()
		if gap != nil {
			if _, err := st.bw.Write(gap.frame(kind.StreamID)); err != nil {
				return err
			}
		}
		if dropped.count > 0 {
			st.hub.dropped.Add(dropped.count)
			if _, err := st.bw.Write(dropped.frame(kind.StreamID)); err != nil {
				return err
			}
		}
		for i, it := range items {
			var err error
			if it.gap != nil {
				_, err = st.bw.Write(it.gap.frame(kind.StreamID))
			} else if err = st.pace(ctx); err == nil {
				_, err = st.bw.Write(it.f.raw)
			}
			items[i] = item[E]{}
			if err != nil {
				return err
			}
		}
		if err := st.flush(); err != nil {
			return err
		}
	}
}

// catchUp sends one read of history after cursor and returns the new
// cursor.
func (st *stream[E]) catchUp(ctx context.Context, cursor uint64) (uint64, error) {
	log, kind := st.hub.log, st.hub.kind
	changed := log.Changed()
	gap, evs, err := readAfter(log, kind, cursor, st.hub.cfg.ReadBatch)
	if err != nil {
		return cursor, err
	}
	if gap != nil {
		if _, err := st.bw.Write(gap.frame(kind.StreamID)); err != nil {
			return cursor, err
		}
		cursor = gap.first - 1
	} else if len(evs) == 0 {
		// The hub saw events this read did not: they are being applied.
		select {
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return cursor, ctx.Err()
		}
		return cursor, nil
	}
	for _, ev := range evs {
		cursor = kind.ID(ev)
		if !st.sub.wants(ev) {
			continue
		}
		raw, err := kind.Render(ev)
		if err != nil {
			return cursor, err
		}
		if err := st.pace(ctx); err != nil {
			return cursor, err
		}
		if _, err := st.bw.Write(raw); err != nil {
			return cursor, err
		}
	}
	return cursor, st.flush()
}

// pace waits for the stream's rate (Config.Rate), sending what is
// buffered before it waits.
func (st *stream[E]) pace(ctx context.Context) error {
	r := st.lim.Reserve()
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	if err := st.flush(); err != nil {
		r.Cancel()
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	case <-st.hub.done:
		return errHubStopped
	}
}

// flush sends what is buffered. A client that takes nothing for
// WriteTimeout is cut off, so a stalled connection does not hold a
// goroutine and a connection slot forever.
func (st *stream[E]) flush() error {
	st.armDeadline()
	if err := st.bw.Flush(); err != nil {
		return err
	}
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// armDeadline gives the writes from now WriteTimeout to complete. Writers
// without deadlines (tests' recorders) simply have none.
func (st *stream[E]) armDeadline() {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.hub.cfg.WriteTimeout))
}

// writeError answers the error body of ADR 0006.
func writeError(w http.ResponseWriter, e *apierror.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status())
	_ = json.NewEncoder(w).Encode(apierror.Body{Error: e})
}
