package eventpub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Source is the replicated event log; *state.Machine satisfies it.
type Source interface {
	// EventsSince returns the events with id > afterID in id order, at
	// most limit of them.
	EventsSince(afterID uint64, limit int) ([]*ledgerpb.Event, error)
	// LastEventID is the id of the newest applied event.
	LastEventID() uint64
}

// Changes returns a channel closed after the next apply that may have added
// events. Take the channel, then read the log, then wait: no event is missed
// that way. (*state.Machine).Changed is one; any commit notification with
// the same contract can replace it.
type Changes func() <-chan struct{}

// Leader says whether this validator leads the cluster.
type Leader interface {
	IsLeader() bool
	// LeaderChanged returns a channel closed at the next change of
	// leadership; take it before calling IsLeader.
	LeaderChanged() <-chan struct{}
}

// JetStream is the part of jetstream.JetStream the publisher uses: the
// messages of a batch go out on its connection, the last one as a JetStream
// publication that waits for the batch's ack.
type JetStream interface {
	StreamManager
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
	Conn() *nats.Conn
	PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// AckTimeout bounds the wait for a batch's ack.
const AckTimeout = 10 * time.Second

// NewJetStream returns the JetStream context the publisher needs on nc.
func NewJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	return jetstream.New(nc)
}

// Config tunes a Publisher. Zero fields take the defaults.
type Config struct {
	Stream StreamConfig
	// Window is the most events published as one atomic batch, the only
	// publication waiting for its ack (default 256, at most MaxBatch).
	Window int
	// Linger is how long a batch that is not full waits for more events
	// before it goes (default 20ms; negative: it goes at once). Each batch
	// costs the server a staging store and a sync whatever its size, so a
	// short wait makes publication far cheaper at a steady rate, for that
	// much more latency.
	Linger time.Duration
	// Poll is how often the log is read when no change is signalled, in
	// case a signal is missed (default 1s).
	Poll time.Duration
	// Retry is the first pause after a failure; it doubles up to MaxRetry
	// (defaults 100ms and 5s).
	Retry, MaxRetry time.Duration
	// APITimeout bounds each JetStream API call (default 5s).
	APITimeout time.Duration
}

func (c Config) withDefaults() Config {
	c.Stream = c.Stream.WithDefaults()
	if c.Window <= 0 {
		c.Window = 256
	}
	c.Window = min(c.Window, MaxBatch)
	if c.Linger == 0 {
		c.Linger = 20 * time.Millisecond
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.Retry <= 0 {
		c.Retry = 100 * time.Millisecond
	}
	if c.MaxRetry < c.Retry {
		c.MaxRetry = max(5*time.Second, c.Retry)
	}
	if c.APITimeout <= 0 {
		c.APITimeout = 5 * time.Second
	}
	return c
}

// scanBack bounds how many of the newest stream messages a resumption
// inspects for an event id: only messages of another publisher (or deleted
// ones) can stand between the end of the stream and the last event.
const scanBack = 64

// ErrWrongStream is returned when an ack names a stream other than the
// configured one.
var ErrWrongStream = errors.New("eventpub: event stored in an unexpected stream")

// Publisher publishes the event log while this validator leads.
type Publisher struct {
	js      JetStream
	src     Source
	changes Changes
	leader  Leader
	cfg     Config
	log     *zap.Logger

	mu sync.Mutex
	st Status
}

// Status is what the publisher reports about itself.
type Status struct {
	Stream string `json:"stream"`
	// Publishing is true while this validator leads and publishes.
	Publishing bool `json:"publishing"`
	// LastPublishedID is the newest event the stream acknowledged, as this
	// validator last learned it (from the stream when it took over, then
	// from its own acks); current only while Publishing.
	LastPublishedID uint64 `json:"lastPublishedId"`
	// LastEventID is the newest event applied here.
	LastEventID uint64 `json:"lastEventId"`
	// Lag is LastEventID - LastPublishedID while Publishing, else 0.
	Lag uint64 `json:"lag"`
	// Published counts the events this validator had stored. Duplicates
	// counts its batches refused because the stream already held one of
	// their events (another leader published them first).
	Published  uint64 `json:"published"`
	Duplicates uint64 `json:"duplicates"`
	// Batches counts the atomic batches this validator had stored;
	// Published/Batches is their mean size.
	Batches uint64 `json:"batches"`
	// Resumptions counts the times the position was read from the stream:
	// at each takeover and after each failure.
	Resumptions uint64 `json:"resumptions"`
	// Skipped counts events the log no longer held when they were due
	// (event retention ran past an unpublished event).
	Skipped     uint64     `json:"skipped"`
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
}

// New returns a Publisher of src's events to js. changes may be nil: the
// log is then read every Config.Poll.
func New(js JetStream, src Source, changes Changes, leader Leader, cfg Config, log *zap.Logger) *Publisher {
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	return &Publisher{js: js, src: src, changes: changes, leader: leader, cfg: cfg, log: log, st: Status{Stream: cfg.Stream.Name}}
}

// Status returns the publisher's figures.
func (p *Publisher) Status() Status {
	last := p.src.LastEventID()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	st.LastEventID = last
	if st.Publishing && last > st.LastPublishedID {
		st.Lag = last - st.LastPublishedID
	}
	return st
}

// Run publishes while this validator leads, until ctx ends. It never fails:
// errors are logged, reported in Status and retried.
func (p *Publisher) Run(ctx context.Context) {
	var cur *term // nil while not leading
	defer func() { cur.stop() }()
	for {
		changed := p.leader.LeaderChanged()
		switch leading := p.leader.IsLeader(); {
		case leading && cur == nil:
			lctx, cancel := context.WithCancel(ctx)
			cur = &term{cancel: cancel, done: make(chan struct{})}
			go func(t *term) {
				defer close(t.done)
				p.lead(lctx)
			}(cur)
		case !leading && cur != nil:
			cur.stop()
			cur = nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// term is one period of leadership, publishing in its own goroutine.
type term struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the term's publication and waits for it (nil: nothing to stop).
func (t *term) stop() {
	if t == nil {
		return
	}
	t.cancel()
	<-t.done
}

// lead publishes until ctx ends, starting over from the stream's position
// after each failure.
func (p *Publisher) lead(ctx context.Context) {
	p.update(func(st *Status) { st.Publishing = true })
	defer p.update(func(st *Status) { st.Publishing = false })
	p.log.Info("leading: publishing events", zap.String("stream", p.cfg.Stream.Name))
	retry := p.cfg.Retry
	for {
		progressed, err := p.publish(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			retry = p.cfg.Retry
		}
		now := time.Now().UTC()
		p.update(func(st *Status) { st.LastError, st.LastErrorAt = err.Error(), &now })
		p.log.Warn("event publication interrupted; resuming from the stream's position", zap.Error(err), zap.Duration("after", retry))
		select {
		case <-time.After(retry):
		case <-ctx.Done():
			return
		}
		retry = min(2*retry, p.cfg.MaxRetry)
	}
}

// position is where publication resumes.
type position struct {
	after   uint64 // the newest event the stream holds
	lastSeq uint64 // the stream's last sequence, which the next message expects
}

// resume declares the stream and reads its position.
func (p *Publisher) resume(ctx context.Context) (position, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.APITimeout)
	defer cancel()
	stream, err := EnsureStream(ctx, p.js, p.cfg.Stream)
	if err != nil {
		return position{}, err
	}
	pos, found, err := lastEvent(ctx, stream)
	if err != nil {
		return position{}, err
	}
	if !found && pos.lastSeq > 0 {
		// Messages were stored but none of the newest is an event: the
		// stream was purged, or others publish into it. The events it held
		// cannot be known, so publication goes on with the events applied
		// from now on.
		pos.after = p.src.LastEventID()
		p.log.Warn("the stream holds no event to resume after; publishing from the next applied event",
			zap.String("stream", p.cfg.Stream.Name), zap.Uint64("streamLastSeq", pos.lastSeq), zap.Uint64("after", pos.after))
	}
	p.update(func(st *Status) { st.Resumptions++; st.LastPublishedID = pos.after })
	p.log.Info("resuming event publication", zap.Uint64("after", pos.after), zap.Uint64("streamLastSeq", pos.lastSeq))
	return pos, nil
}

// lastEvent finds the newest event id among the stream's newest messages.
func lastEvent(ctx context.Context, stream jetstream.Stream) (position, bool, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return position{}, false, fmt.Errorf("eventpub: stream info: %w", err)
	}
	st := info.State
	pos := position{lastSeq: st.LastSeq}
	if st.Msgs == 0 {
		return pos, false, nil
	}
	for seq, n := st.LastSeq, 0; seq >= st.FirstSeq && seq > 0 && n < scanBack; seq, n = seq-1, n+1 {
		msg, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return position{}, false, fmt.Errorf("eventpub: read stream message %d: %w", seq, err)
		}
		if id, ok := ParseMsgID(msg.Header.Get(jetstream.MsgIDHeader)); ok {
			pos.after = id
			return pos, true, nil
		}
	}
	return pos, false, nil
}

// publish resumes from the stream's position and publishes every event
// after it, in order, until ctx ends or a publication fails. progressed
// tells whether any event was acknowledged.
//
// The events go as atomic batches, one at a time: the server stores a
// batch whole or not at all, and only when the stream's last sequence is
// the one its first message expects, which is where the previous batch
// ended (or the stream's end as read at the start of the attempt). A batch
// that is lost, cut short or refused therefore leaves the stream as it was,
// and a batch that arrives late is stored only if nothing was stored since
// its publisher last looked (DESIGN.md).
func (p *Publisher) publish(ctx context.Context) (progressed bool, err error) {
	pos, err := p.resume(ctx)
	if err != nil {
		return false, err
	}
	b, err := newBatcher(p.js, p.cfg.Stream.Name)
	if err != nil {
		return false, err
	}
	lingered := false // the events read have waited Linger
	for {
		wake := p.wake()
		evs, err := p.src.EventsSince(pos.after, p.cfg.Window)
		if err != nil {
			return progressed, fmt.Errorf("eventpub: read events after %d: %w", pos.after, err)
		}
		if len(evs) == 0 {
			select {
			case <-wake:
			case <-time.After(p.cfg.Poll):
			case <-ctx.Done():
				return progressed, ctx.Err()
			}
			continue
		}
		if len(evs) < p.cfg.Window && p.cfg.Linger > 0 && !lingered {
			lingered = true
			select {
			case <-time.After(p.cfg.Linger):
			case <-ctx.Done():
				return progressed, ctx.Err()
			}
			continue
		}
		lingered = false
		if err := p.checkOrder(pos.after, evs); err != nil {
			return progressed, err
		}
		actx, cancel := context.WithTimeout(ctx, AckTimeout)
		ack, err := b.publish(actx, evs, pos.lastSeq)
		cancel()
		if err != nil {
			if isDuplicate(err) {
				p.update(func(st *Status) { st.Duplicates++ })
			}
			return progressed, err
		}
		last := evs[len(evs)-1].GetId()
		if ack.Stream != p.cfg.Stream.Name {
			return progressed, fmt.Errorf("%w: events %d to %d in %s, want %s", ErrWrongStream, evs[0].GetId(), last, ack.Stream, p.cfg.Stream.Name)
		}
		if want := pos.lastSeq + uint64(len(evs)); ack.Sequence != want {
			// Not the batch's place: the stream cannot be trusted to end
			// where this attempt believes, so it reads it again.
			return progressed, fmt.Errorf("eventpub: events %d to %d acknowledged up to sequence %d, want %d", evs[0].GetId(), last, ack.Sequence, want)
		}
		progressed = true
		pos = position{after: last, lastSeq: ack.Sequence}
		p.update(func(st *Status) {
			st.LastPublishedID = last
			st.Published += uint64(len(evs))
			st.Batches++
		})
	}
}

// checkOrder verifies that evs follow after in increasing id order, and
// reports the events retention removed before they were published.
func (p *Publisher) checkOrder(after uint64, evs []*ledgerpb.Event) error {
	prev := after
	for _, ev := range evs {
		id := ev.GetId()
		if id <= prev {
			return fmt.Errorf("eventpub: event log returned %d after %d", id, prev)
		}
		if missing := id - prev - 1; missing > 0 {
			p.update(func(st *Status) { st.Skipped += missing })
			p.log.Error("events left the log before they were published; they are missing from the stream",
				zap.Uint64("from", prev+1), zap.Uint64("to", id-1))
		}
		prev = id
	}
	return nil
}

func (p *Publisher) wake() <-chan struct{} {
	if p.changes == nil {
		return nil
	}
	return p.changes()
}

func (p *Publisher) update(fn func(*Status)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(&p.st)
}
