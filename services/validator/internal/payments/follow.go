package payments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// EpochSink takes the chain's epochs; *epoch.Clock satisfies it. Observe
// reports why an update was not adopted whole: a figure below the one it
// has, or an epoch further ahead of the wall clock than it allows.
type EpochSink interface {
	Observe(current, finalized uint64) error
}

// Follower feeds an Index from the payments and debts subjects of one chain,
// and an EpochSink from its epochs subject.
type Follower struct {
	JS      jetstream.JetStream
	Stream  string // stream holding chain.<chainId>.payments, .debts and .epochs, declared by the chain-watcher
	ChainID uint64
	Index   *Index
	// Epochs, when set, receives the chain's epoch updates.
	Epochs EpochSink
	Log    *zap.Logger
	// Retry is the pause before re-subscribing after the stream was missing
	// or the subscription failed.
	Retry time.Duration
	// Checkpoints, when set, holds the index's checkpoint (a Keeper writes
	// it): Run resumes after it rather than reading the whole stream.
	Checkpoints CheckpointStore

	// behind is how many payment messages the stream held beyond the last
	// one the index read, as the server counted when it delivered that
	// one (or created the consumer); -1 while not subscribed.
	behind atomic.Int64
}

// Behind reports whether the index may lack payments the stream holds:
// not subscribed, or messages were still waiting at the last delivery.
func (f *Follower) Behind() bool { return f.behind.Load() != 0 }

// Run reads the subjects until ctx ends. The index starts from the
// checkpoint when there is one the stream still continues (ADR 0031), and
// is otherwise rebuilt from the stream's first message; the stream is the
// durable record. Epochs are read from the subject's last message on: only the
// newest figures matter, and the watcher publishes no heartbeat, so the
// stored last update is what tells a starting validator where the chain
// is. The stream may not exist yet (the watcher declares it): Run waits for
// it.
func (f *Follower) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if f.Epochs != nil {
		wg.Go(func() { f.resubscribe(ctx, "epoch", f.followEpochs) })
	}
	var lastSeq uint64
	f.behind.Store(-1)
	resume := f.loadCheckpoint()
	f.resubscribe(ctx, "payment", func(ctx context.Context) error {
		defer f.behind.Store(-1)
		return f.follow(ctx, &lastSeq, &resume)
	})
	wg.Wait()
	return nil
}

// resubscribe runs follow until ctx ends, again after a pause whenever it
// returns.
func (f *Follower) resubscribe(ctx context.Context, what string, follow func(context.Context) error) {
	retry := f.Retry
	if retry <= 0 {
		retry = time.Second
	}
	for ctx.Err() == nil {
		err := follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			// Expected at start: the chain-watcher declares the stream.
			f.Log.Info(what+" stream not declared yet; waiting for the chain-watcher", zap.String("stream", f.Stream))
		} else {
			f.Log.Warn(what+" subscription interrupted; resubscribing", zap.Error(err), zap.Duration("after", retry))
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
		}
	}
}

// follow consumes from after lastSeq, so a resubscription neither loses nor
// repeats messages (a repeat would be harmless, Observe is idempotent). One
// consumer reads both subjects, so the index learns payments and debt
// payments in stream order, which is chain order. On the first
// subscription, a checkpoint the stream continues is restored and lastSeq
// set to its sequence.
func (f *Follower) follow(ctx context.Context, lastSeq *uint64, resume **checkpoint) error {
	stream, err := f.JS.Stream(ctx, f.Stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", f.Stream, err)
	}
	info := stream.CachedInfo()
	if cp := *resume; cp != nil {
		*resume = nil
		if why := resumable(*cp, info); why != "" {
			f.Log.Warn("payment index checkpoint not usable; replaying the whole payment stream", zap.String("reason", why),
				zap.Uint64("checkpoint_seq", cp.seq))
		} else {
			f.Index.restore(*cp)
			*lastSeq = cp.seq
			f.Log.Info("payment index restored from its checkpoint", zap.Uint64("seq", cp.seq),
				zap.Int("payments", cp.count(recordPayment)), zap.Int("retractions", cp.count(recordRetraction)), zap.Int("debts", cp.count(recordDebt)))
		}
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{payment.Subject(f.ChainID), payment.DebtSubject(f.ChainID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if *lastSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *lastSeq+1
	}
	return f.consume(ctx, cfg, func(created *jetstream.ConsumerInfo) {
		f.behind.Store(int64(min(created.NumPending, math.MaxInt64)))
	}, func(msg jetstream.Msg) {
		meta, err := msg.Metadata()
		if err == nil {
			*lastSeq = meta.Sequence.Stream
		}
		f.dispatch(msg.Subject(), msg.Data(), *lastSeq)
		// After the message is observed: a checkpoint holds at least what
		// the sequence it records says.
		f.Index.consumedThrough(*lastSeq, info.Created)
		if err == nil {
			f.behind.Store(int64(min(meta.NumPending, math.MaxInt64)))
		}
	})
}

// loadCheckpoint reads the checkpoint, nil when there is none or it does
// not decode (a full replay, logged).
func (f *Follower) loadCheckpoint() *checkpoint {
	if f.Checkpoints == nil {
		return nil
	}
	data, err := f.Checkpoints.Load()
	if err != nil {
		f.Log.Warn("payment index checkpoint not read; replaying the whole payment stream", zap.Error(err))
		return nil
	}
	if data == nil {
		f.Log.Info("no payment index checkpoint yet; replaying the whole payment stream")
		return nil
	}
	cp, err := decodeCheckpoint(data)
	if err != nil {
		f.Log.Warn("payment index checkpoint does not decode; replaying the whole payment stream", zap.Error(err))
		return nil
	}
	return &cp
}

// resumable says why the stream does not continue checkpoint cp, "" when
// it does: the stream must be the one the checkpoint was taken from and
// still hold every message after its sequence.
func resumable(cp checkpoint, info *jetstream.StreamInfo) string {
	switch {
	case info.Created.UnixNano() != cp.streamCreated:
		return "the stream was created again since the checkpoint"
	case info.State.LastSeq < cp.seq:
		return "the stream ends before the checkpoint's sequence"
	case info.State.FirstSeq > cp.seq+1:
		return "the stream no longer holds the messages after the checkpoint's sequence"
	}
	return ""
}

// followEpochs consumes the epochs subject from its last message. A
// resubscription starts there again: the last update may be one already
// observed, which changes nothing.
func (f *Follower) followEpochs(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{payment.EpochSubject(f.ChainID)},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	}
	return f.consume(ctx, cfg, nil, func(msg jetstream.Msg) {
		var seq uint64
		if meta, err := msg.Metadata(); err == nil {
			seq = meta.Sequence.Stream
		}
		f.dispatch(msg.Subject(), msg.Data(), seq)
	})
}

// consume hands every message of an ordered consumer to handle until ctx
// ends (nil) or the subscription fails; started, when set, is given the
// consumer's info as created.
func (f *Follower) consume(ctx context.Context, cfg jetstream.OrderedConsumerConfig, started func(*jetstream.ConsumerInfo), handle func(jetstream.Msg)) error {
	cons, err := f.JS.OrderedConsumer(ctx, f.Stream, cfg)
	if err != nil {
		return fmt.Errorf("ordered consumer on %s: %w", f.Stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("messages of %s: %w", f.Stream, err)
	}
	// The consumer exists once its messages are asked for.
	if info := cons.CachedInfo(); started != nil && info != nil {
		started(info)
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
		handle(msg)
	}
}

// dispatch hands one message to the index, or the epoch sink, by its
// subject. A message that does not decode is logged and skipped: the stream
// is the watcher's, and one bad message must not stop the index.
func (f *Follower) dispatch(subject string, data []byte, seq uint64) {
	switch subject {
	case payment.Subject(f.ChainID):
		f.observePayment(data, seq)
	case payment.DebtSubject(f.ChainID):
		f.observeDebt(data, seq)
	case payment.EpochSubject(f.ChainID):
		f.observeEpoch(data, seq)
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

func (f *Follower) observeEpoch(data []byte, seq uint64) {
	u, err := payment.DecodeEpochUpdate(data)
	if err != nil {
		f.Log.Error("epoch message is malformed; skipped", zap.Uint64("seq", seq), zap.Error(err))
		return
	}
	if u.ChainID != f.ChainID {
		f.Log.Error("epoch message of another chain; skipped", zap.Uint64("seq", seq), zap.Uint64("chain_id", u.ChainID))
		return
	}
	if f.Epochs == nil {
		return
	}
	if err := f.Epochs.Observe(u.Current, u.Finalized); err != nil {
		f.Log.Warn("epoch update not adopted whole", zap.Error(err), zap.Uint64("seq", seq),
			zap.Uint64("current", u.Current), zap.Uint64("finalized", u.Finalized), zap.String("source", u.Source))
	}
}
