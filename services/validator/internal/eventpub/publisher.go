package eventpub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
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

// JetStream is the part of jetstream.JetStream the publisher uses. Its
// asynchronous publications must time out (NewJetStream), or an ack lost
// with its connection would stall the publisher.
type JetStream interface {
	StreamManager
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
	PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

// AckTimeout bounds the wait for one asynchronous publication's ack.
const AckTimeout = 10 * time.Second

// NewJetStream returns the JetStream context the publisher needs on nc.
func NewJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	return jetstream.New(nc, jetstream.WithPublishAsyncTimeout(AckTimeout))
}

// Config tunes a Publisher. Zero fields take the defaults.
type Config struct {
	Stream StreamConfig
	// Window is how many publications may wait for their ack at once
	// (default 256).
	Window int
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
	// Published and Duplicates count the acks this validator received:
	// stored, or already held by the stream.
	Published  uint64 `json:"published"`
	Duplicates uint64 `json:"duplicates"`
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

// inflight is a publication waiting for its ack.
type inflight struct {
	id  uint64
	ack jetstream.PubAckFuture
}

// publish resumes from the stream's position and publishes every event
// after it, in order, until ctx ends or a publication fails. progressed
// tells whether any event was acknowledged.
//
// Each message states what the stream must end with for it to be stored:
// the first one the stream's last sequence as read, every later one the id
// of the event before it. A message that is lost or refused therefore makes
// every later one fail too, instead of leaving a gap or reordering the
// stream, and a message of an earlier attempt that arrives late is only
// stored if it is exactly the next event.
func (p *Publisher) publish(ctx context.Context) (progressed bool, err error) {
	pos, err := p.resume(ctx)
	if err != nil {
		return false, err
	}
	sent := pos.after
	var queue []inflight
	for {
		wake := p.wake()
		if room := p.cfg.Window - len(queue); room > 0 {
			evs, err := p.src.EventsSince(sent, room)
			if err != nil {
				return progressed, fmt.Errorf("eventpub: read events after %d: %w", sent, err)
			}
			for _, ev := range evs {
				if ev.GetId() <= sent {
					return progressed, fmt.Errorf("eventpub: event log returned %d after %d", ev.GetId(), sent)
				}
				if missing := ev.GetId() - sent - 1; missing > 0 {
					p.update(func(st *Status) { st.Skipped += missing })
					p.log.Error("events left the log before they were published; they are missing from the stream",
						zap.Uint64("from", sent+1), zap.Uint64("to", ev.GetId()-1))
				}
				expect := jetstream.WithExpectLastMsgID(MsgID(sent))
				if sent == pos.after { // the first message of this attempt
					expect = jetstream.WithExpectLastSequence(pos.lastSeq)
				}
				msg, err := message(ev)
				if err != nil {
					return progressed, err
				}
				ack, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(MsgID(ev.GetId())),
					jetstream.WithExpectStream(p.cfg.Stream.Name), expect)
				if err != nil {
					return progressed, fmt.Errorf("eventpub: publish event %d: %w", ev.GetId(), err)
				}
				queue = append(queue, inflight{id: ev.GetId(), ack: ack})
				sent = ev.GetId()
			}
		}
		if len(queue) == 0 {
			select {
			case <-wake:
			case <-time.After(p.cfg.Poll):
			case <-ctx.Done():
				return progressed, ctx.Err()
			}
			continue
		}
		// Wait for the oldest ack, then take the ones already in, so that
		// the log is read once per burst of acks rather than once per ack.
		for wait := true; len(queue) > 0; wait = false {
			took, err := p.takeAck(ctx, queue[0], wait)
			if err != nil {
				return progressed, err
			}
			if !took {
				break
			}
			progressed = true
			queue = queue[1:]
		}
	}
}

// takeAck takes the ack of head, waiting for it when wait is set; took is
// false when it has not come (without wait) or the publication failed.
func (p *Publisher) takeAck(ctx context.Context, head inflight, wait bool) (took bool, err error) {
	var ack *jetstream.PubAck
	if wait {
		select {
		case ack = <-head.ack.Ok():
		case err := <-head.ack.Err():
			return false, fmt.Errorf("eventpub: event %d: %w", head.id, err)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	} else {
		select {
		case ack = <-head.ack.Ok():
		case err := <-head.ack.Err():
			return false, fmt.Errorf("eventpub: event %d: %w", head.id, err)
		default:
			return false, nil
		}
	}
	if ack.Stream != p.cfg.Stream.Name {
		return false, fmt.Errorf("%w: event %d in %s, want %s", ErrWrongStream, head.id, ack.Stream, p.cfg.Stream.Name)
	}
	p.update(func(st *Status) {
		st.LastPublishedID = head.id
		if ack.Duplicate {
			st.Duplicates++
		} else {
			st.Published++
		}
	})
	return true, nil
}

func (p *Publisher) wake() <-chan struct{} {
	if p.changes == nil {
		return nil
	}
	return p.changes()
}

// message is the NATS message of ev: its subject and the api.Event JSON.
func message(ev *ledgerpb.Event) (*nats.Msg, error) {
	data, err := json.Marshal(api.EventOf(ev))
	if err != nil {
		return nil, fmt.Errorf("eventpub: encode event %d: %w", ev.GetId(), err)
	}
	return &nats.Msg{Subject: Subject(ev), Data: data, Header: nats.Header{}}, nil
}

func (p *Publisher) update(fn func(*Status)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(&p.st)
}
