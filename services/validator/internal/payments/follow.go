package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// Follower feeds an Index from the payments and debts subjects of one chain.
type Follower struct {
	JS      jetstream.JetStream
	Stream  string // stream holding chain.<chainId>.payments and .debts, declared by the chain-watcher
	ChainID uint64
	Index   *Index
	Log     *zap.Logger
	// Retry is the pause before re-subscribing after the stream was missing
	// or the subscription failed.
	Retry time.Duration
}

// Run reads the subjects from their first message until ctx ends. The index is
// rebuilt from the stream on every start; the stream is the durable record.
// The stream may not exist yet (the watcher declares it): Run waits for it.
func (f *Follower) Run(ctx context.Context) error {
	retry := f.Retry
	if retry <= 0 {
		retry = time.Second
	}
	var lastSeq uint64
	for ctx.Err() == nil {
		err := f.follow(ctx, &lastSeq)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			// Expected at start: the chain-watcher declares the stream.
			f.Log.Info("payment stream not declared yet; waiting for the chain-watcher", zap.String("stream", f.Stream))
		} else {
			f.Log.Warn("payment subscription interrupted; resubscribing", zap.Error(err), zap.Duration("after", retry))
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
		}
	}
	return nil
}

// follow consumes from after lastSeq, so a resubscription neither loses nor
// repeats messages (a repeat would be harmless, Observe is idempotent). One
// consumer reads both subjects, so the index learns payments and debt
// payments in stream order, which is chain order.
func (f *Follower) follow(ctx context.Context, lastSeq *uint64) error {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{payment.Subject(f.ChainID), payment.DebtSubject(f.ChainID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if *lastSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *lastSeq+1
	}
	cons, err := f.JS.OrderedConsumer(ctx, f.Stream, cfg)
	if err != nil {
		return fmt.Errorf("ordered consumer on %s: %w", f.Stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("messages of %s: %w", f.Stream, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if meta, err := msg.Metadata(); err == nil {
			*lastSeq = meta.Sequence.Stream
		}
		f.dispatch(msg.Subject(), msg.Data(), *lastSeq)
	}
}

// dispatch hands one message to the index by its subject. A message that
// does not decode is logged and skipped: the stream is the watcher's, and
// one bad message must not stop the index.
func (f *Follower) dispatch(subject string, data []byte, seq uint64) {
	switch subject {
	case payment.Subject(f.ChainID):
		f.observePayment(data, seq)
	case payment.DebtSubject(f.ChainID):
		f.observeDebt(data, seq)
	default: // the consumer's filter lets no other subject through
		f.Log.Error("message on an unexpected subject; skipped", zap.String("subject", subject), zap.Uint64("seq", seq))
	}
}

func (f *Follower) observePayment(data []byte, seq uint64) {
	var wire ledgerpb.Payment
	if err := proto.Unmarshal(data, &wire); err != nil {
		f.Log.Error("payment message does not decode; skipped", zap.Uint64("seq", seq), zap.Error(err))
		return
	}
	p, err := payment.FromProto(&wire)
	if err != nil {
		f.Log.Error("payment message is malformed; skipped", zap.Uint64("seq", seq), zap.Error(err))
		return
	}
	f.Index.Observe(p)
}

func (f *Follower) observeDebt(data []byte, seq uint64) {
	var wire ledgerpb.DebtPayment
	if err := proto.Unmarshal(data, &wire); err != nil {
		f.Log.Error("debt payment message does not decode; skipped", zap.Uint64("seq", seq), zap.Error(err))
		return
	}
	d, err := payment.DebtPaidFromProto(&wire)
	if err != nil {
		f.Log.Error("debt payment message is malformed; skipped", zap.Uint64("seq", seq), zap.Error(err))
		return
	}
	f.Index.ObserveDebt(d)
}
