// Package publish puts observed payments on NATS JetStream: it declares the
// chain events stream and publishes each payment as a protobuf
// ledgerpb.Payment on chain.<chainId>.payments, and each debt payment as a
// ledgerpb.DebtPayment on chain.<chainId>.debts, with the log's
// Nats-Msg-Id, waiting for the stream's acknowledgement: one at a time, or a
// range's logs in order as atomic batches (PublishLogs). Epoch updates go on
// chain.<chainId>.epochs as JSON (payment.EpochUpdate), one at a time.
package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/payment"
)

// Subjects is the subject filter of the chain events stream: payments, debt
// payments and epochs of every chain (payment.Subject, payment.DebtSubject,
// payment.EpochSubject).
const Subjects = "chain.>"

// ErrWrongStream is returned when the server stored a payment in a stream
// other than the configured one (another stream also binds the subject).
var ErrWrongStream = errors.New("publish: payment stored in an unexpected stream")

// StreamConfig is what EnsureStream declares.
type StreamConfig struct {
	// Name of the stream, e.g. "CHAIN_EVENTS".
	Name string
	// DuplicateWindow is how long the server remembers message ids. A
	// payment republished within it (after a crash between publish and
	// checkpoint) is dropped as a duplicate.
	DuplicateWindow time.Duration
	// Replicas is the number of copies in a cluster; 0 means 1.
	Replicas int
}

// StreamManager is the part of jetstream.JetStream EnsureStream uses.
type StreamManager interface {
	CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

// EnsureStream creates the stream, or updates it to cfg when it exists, so
// that any number of watchers can declare it at start.
//
// Durability: the stream is file-backed and keeps payments with no age limit
// (validators rebuild their payment index from it). PersistMode is left at
// the default, where the ack follows the write, never async. JetStream has
// no per-stream fsync setting: acknowledged payments survive a machine crash
// only when the server runs with sync_interval: always (Options.SyncAlways);
// by default it fsyncs every 2 minutes.
func EnsureStream(ctx context.Context, js StreamManager, cfg StreamConfig) (*jetstream.StreamInfo, error) {
	if cfg.Name == "" {
		return nil, errors.New("publish: no stream name")
	}
	if cfg.DuplicateWindow <= 0 {
		return nil, fmt.Errorf("publish: duplicate window %s must be positive", cfg.DuplicateWindow)
	}
	replicas := max(cfg.Replicas, 1)
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Name,
		Description: "Payment contract logs and epoch updates, published by chain-watcher",
		Subjects:    []string{Subjects},
		// Kept until limits say otherwise, and there are none: validators
		// rebuild their payment index from the whole stream. Stated
		// explicitly so that a limit set by hand on the stream is undone
		// at the next start rather than silently dropping payments.
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      0,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  cfg.DuplicateWindow,
		PersistMode: jetstream.DefaultPersistMode,
		// A range's logs go as atomic batches (PublishLogs). A server
		// older than 2.12 ignores the setting; the publisher then
		// publishes one log at a time.
		AllowAtomicPublish: true,
	})
	if err != nil {
		return nil, fmt.Errorf("publish: declare stream %s: %w", cfg.Name, err)
	}
	info := s.CachedInfo()
	if info.Config.PersistMode == jetstream.AsyncPersistMode {
		// The persist mode of an existing stream cannot be changed: refuse
		// to publish where acks may precede writes.
		return nil, fmt.Errorf("publish: stream %s uses async persistence; acknowledged payments could be lost", cfg.Name)
	}
	return info, nil
}

// Sender is the part of jetstream.JetStream a Publisher uses.
type Sender interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Publisher publishes payments, debt payments and epoch updates to one
// stream. It is safe for concurrent use; PublishLogs calls run one at a
// time.
type Publisher struct {
	js     Sender
	stream string
	// nc sends the messages of atomic batches; nil when the Sender has no
	// connection (then PublishLogs publishes one log at a time).
	nc *nats.Conn

	// mu guards what follows: one batch at a time.
	mu sync.Mutex
	// atomicOff: the stream or server refused atomic batches.
	atomicOff   bool
	maxBatch    int
	batchPrefix string
	batches     uint64
	// msg serves every message of a batch (core publication copies it).
	msg nats.Msg
}

// Option tunes a Publisher.
type Option func(*Publisher)

// WithMaxBatch caps the logs of one atomic batch at n (1 publishes one log
// at a time). The default is MaxBatch, the server's own default limit; a
// lower server limit is learnt from its refusal.
func WithMaxBatch(n int) Option {
	return func(p *Publisher) { p.maxBatch = max(n, 1) }
}

// NewPublisher returns a Publisher that expects its messages to land in
// stream. Atomic batches need the core connection: js must also have
// Conn() *nats.Conn, as jetstream.JetStream has.
func NewPublisher(js Sender, stream string, opts ...Option) *Publisher {
	p := &Publisher{js: js, stream: stream, maxBatch: MaxBatch, batchPrefix: newBatchPrefix()}
	if c, ok := js.(interface{ Conn() *nats.Conn }); ok {
		p.nc = c.Conn()
	}
	p.msg.Header = nats.Header{}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Result is the stream's acknowledgement of one message.
type Result struct {
	Sequence uint64
	// Duplicate is true when the stream already held this message id: the
	// message was published before, by this watcher before a restart or
	// by another instance.
	Duplicate bool
}

// Publish publishes p and returns once the stream has acknowledged it (stored
// or recognised as a duplicate).
func (p *Publisher) Publish(ctx context.Context, pay payment.ProposalPaid) (Result, error) {
	return p.publish(ctx, "payment", payment.Subject(pay.ChainID), pay.MsgID(), pay.Proto())
}

// PublishDebt publishes a debt payment (a DebtPaid log) on
// payment.DebtSubject, like Publish: with its message id, and only into the
// expected stream.
func (p *Publisher) PublishDebt(ctx context.Context, d payment.DebtPaid) (Result, error) {
	return p.publish(ctx, "debt payment", payment.DebtSubject(d.ChainID), d.MsgID(), d.Proto())
}

// PublishEpoch publishes an epoch update on payment.EpochSubject, like
// Publish: with its message id (payment.EpochUpdate.MsgID), and only into
// the expected stream.
func (p *Publisher) PublishEpoch(ctx context.Context, u payment.EpochUpdate) (Result, error) {
	data, err := u.Encode()
	if err != nil {
		return Result{}, fmt.Errorf("publish: encode epoch update %s: %w", u.MsgID(), err)
	}
	return p.send(ctx, "epoch update", payment.EpochSubject(u.ChainID), u.MsgID(), data)
}

func (p *Publisher) publish(ctx context.Context, what, subject, msgID string, m proto.Message) (Result, error) {
	data, err := proto.Marshal(m)
	if err != nil {
		return Result{}, fmt.Errorf("publish: encode %s %s: %w", what, msgID, err)
	}
	return p.send(ctx, what, subject, msgID, data)
}

func (p *Publisher) send(ctx context.Context, what, subject, msgID string, data []byte) (Result, error) {
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	ack, err := p.js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(msgID),
		// The server refuses the message unless the subject binds to this
		// stream, so a misrouted payment is an error, not a silent loss.
		jetstream.WithExpectStream(p.stream),
	)
	if err != nil {
		return Result{}, fmt.Errorf("publish: %s %s: %w", what, msgID, err)
	}
	if ack.Stream != p.stream {
		return Result{}, fmt.Errorf("%w: %s, want %s", ErrWrongStream, ack.Stream, p.stream)
	}
	return Result{Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}
