package ledgerclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contentledger/contentledger/pkg/apierror"
)

// EventFilter narrows GET /v1/events/stream (contract "Events").
type EventFilter struct {
	Wallets       []string // wallet addresses
	Organizations []string // only together with Wallets
	Path          string   // path prefix
}

func (f EventFilter) query() url.Values {
	q := url.Values{}
	if len(f.Wallets) > 0 {
		q.Set("wallets", strings.Join(f.Wallets, ","))
	}
	if len(f.Organizations) > 0 {
		q.Set("organizations", strings.Join(f.Organizations, ","))
	}
	if f.Path != "" {
		q.Set("path", f.Path)
	}
	return q
}

// EventWatch follows the event stream of a list of validators: when the
// connection to one ends it connects to the next, with Last-Event-ID set to
// the last event id received, so every event comes once and in order, as
// long as the validators still hold it (a gap message says otherwise).
type EventWatch struct {
	URLs   []string // validator base URLs, tried in turn
	Token  string   // bearer token, when the validators require one
	Filter EventFilter
	// LastEventID resumes after this event id; empty: new events only.
	// Updated as events arrive.
	LastEventID string
	// HTTP makes the requests; nil: a client with no overall timeout (a
	// stream lasts) but a bounded wait for response headers.
	HTTP *http.Client
	// MinBackoff is the first wait before reconnecting when the stream
	// suggested none (retry:); MaxBackoff caps the doubling waits of
	// consecutive failures (defaults 500ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// IdleTimeout ends a connection that brings nothing, not even a
	// keep-alive comment, for this long (default 60s: four keep-alives).
	IdleTimeout time.Duration
	// Notify, when set, hears of connections and disconnections.
	Notify func(WatchNotice)
}

// WatchNotice is a change of the watch's connection.
type WatchNotice struct {
	URL         string
	Connected   bool          // true: connected; false: the attempt or connection ended
	LastEventID string        // the resumption point sent or to be sent
	Err         error         // why it ended (nil when connected)
	Wait        time.Duration // the pause before the next attempt
}

// StreamMessage is one message of the event stream: an event (Event is its
// type, ID its id, Data the api.Event JSON) or a control message (gap,
// dropped: no id of its own).
type StreamMessage struct {
	ID    string
	HasID bool
	Event string
	Data  json.RawMessage
}

// ErrStopWatch ends EventWatch.Run without an error when a handler returns
// it.
var ErrStopWatch = errors.New("ledgerclient: stop watching")

// watchErr is an answer that retrying cannot change.
type watchErr struct{ err error }

func (e watchErr) Error() string { return e.err.Error() }
func (e watchErr) Unwrap() error { return e.err }

// Run follows the stream until ctx ends (nil), handle returns ErrStopWatch
// (nil) or another error (that error), or a validator refuses the request
// for good (a 400, 401 or 403 answer).
func (w *EventWatch) Run(ctx context.Context, handle func(StreamMessage) error) error {
	if len(w.URLs) == 0 {
		return errors.New("ledgerclient: no validator URL to watch")
	}
	minWait, maxWait := w.MinBackoff, w.MaxBackoff
	if minWait <= 0 {
		minWait = 500 * time.Millisecond
	}
	if maxWait < minWait {
		maxWait = max(30*time.Second, minWait)
	}
	var (
		hint     time.Duration // the stream's retry:
		failures int           // attempts in a row that delivered nothing
	)
	for i := 0; ; i = (i + 1) % len(w.URLs) {
		u := w.URLs[i]
		delivered, retry, err := w.follow(ctx, u, handle)
		if retry > 0 {
			hint = retry
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrStopWatch) {
			return nil
		}
		var fatal watchErr
		if errors.As(err, &fatal) {
			return fatal.err
		}
		if delivered {
			failures = 0
		}
		failures++
		base := minWait
		if hint > 0 {
			base = hint
		}
		wait := min(base<<min(failures-1, 16), maxWait)
		var after retryAfter
		if errors.As(err, &after) {
			wait = max(wait, after.d)
		}
		wait += rand.N(wait/5 + 1) // so that many clients do not return at once
		if w.Notify != nil {
			w.Notify(WatchNotice{URL: u, LastEventID: w.LastEventID, Err: err, Wait: wait})
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
}

// retryAfter is a refusal that named its own wait (Retry-After).
type retryAfter struct {
	err error
	d   time.Duration
}

func (e retryAfter) Error() string { return e.err.Error() }
func (e retryAfter) Unwrap() error { return e.err }

// follow reads one connection to u until it ends. delivered says whether
// any message came; retry is the stream's reconnection hint.
func (w *EventWatch) follow(ctx context.Context, u string, handle func(StreamMessage) error) (delivered bool, retry time.Duration, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	target := strings.TrimRight(u, "/") + "/v1/events/stream"
	if q := w.Filter.query(); len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false, 0, watchErr{err}
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if w.LastEventID != "" {
		req.Header.Set("Last-Event-ID", w.LastEventID)
	}
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	resp, err := w.client().Do(req)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	if err := streamAnswer(resp); err != nil {
		return false, 0, err
	}
	if w.Notify != nil {
		w.Notify(WatchNotice{URL: u, Connected: true, LastEventID: w.LastEventID})
	}
	idle := w.IdleTimeout
	if idle <= 0 {
		idle = 60 * time.Second
	}
	body := newIdleReader(resp.Body, idle, cancel)
	defer body.stop()
	sse := NewSSEReader(body, 0)
	defer func() { retry = sse.Retry() }()
	for {
		m, err := sse.Next()
		if err != nil {
			if body.expired() {
				err = fmt.Errorf("no data for %s", idle)
			} else if errors.Is(err, io.EOF) {
				err = errors.New("the validator ended the stream")
			}
			return delivered, 0, err
		}
		delivered = true
		msg := StreamMessage{ID: m.ID, HasID: m.HasID, Event: m.Event, Data: json.RawMessage(m.Data)}
		if m.HasID && m.ID != "" {
			w.LastEventID = m.ID
		}
		if err := handle(msg); err != nil {
			return delivered, 0, err
		}
	}
}

// streamAnswer checks that resp opens an event stream; an error says why
// not, as a watchErr when retrying cannot help.
func streamAnswer(resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt != "text/event-stream" {
			return fmt.Errorf("answer is %q, not an event stream", resp.Header.Get("Content-Type"))
		}
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	err := fmt.Errorf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(body)))
	var eb apierror.Body
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		err = eb.Error
	}
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		return watchErr{err}
	}
	if s, e := strconv.Atoi(resp.Header.Get("Retry-After")); e == nil && s > 0 {
		return retryAfter{err: err, d: time.Duration(s) * time.Second}
	}
	return err
}

func (w *EventWatch) client() *http.Client {
	if w.HTTP != nil {
		return w.HTTP
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 15 * time.Second
	w.HTTP = &http.Client{Transport: t}
	return w.HTTP
}

// idleReader cancels its connection when no byte arrives for a while.
type idleReader struct {
	r     io.Reader
	d     time.Duration
	timer *time.Timer

	mu   sync.Mutex
	gone bool // the timer fired
}

func newIdleReader(r io.Reader, d time.Duration, cancel context.CancelFunc) *idleReader {
	ir := &idleReader{r: r, d: d}
	ir.timer = time.AfterFunc(d, func() {
		ir.mu.Lock()
		ir.gone = true
		ir.mu.Unlock()
		cancel()
	})
	return ir
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.d)
	}
	return n, err
}

func (ir *idleReader) expired() bool {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	return ir.gone
}

func (ir *idleReader) stop() { ir.timer.Stop() }
