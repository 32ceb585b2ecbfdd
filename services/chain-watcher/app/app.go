// Package app runs the chain watcher: it follows the payment contract's
// ProposalPaid and DebtPaid logs on an Ethereum JSON-RPC endpoint behind a
// number of confirmations, publishes each to NATS JetStream with a
// deduplicating message id, and checkpoints its cursor in a JetStream
// key-value bucket once the logs up to it are acknowledged. See DESIGN.md in
// the module for the reasoning.
package app

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

const (
	// startupMaxBackoff caps the wait between attempts to reach the chain
	// and NATS at start: in a compose file or a pod they may come up later.
	startupMaxBackoff = 10 * time.Second
)

// Run runs the watcher until ctx is cancelled and returns nil after a clean
// shutdown. It returns an error for an invalid configuration, an endpoint
// that cannot be dialled at all, a checkpoint that cannot be read, or a
// malformed log of the contract; unreachable services are retried.
func Run(ctx context.Context, cfg Config, log *zap.Logger) (err error) {
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.HTTPListener != nil {
		// Run owns the listener from here on, also on early errors.
		defer func() { _ = cfg.HTTPListener.Close() }()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	st := newStatus()
	stopHealth, err := serveHealth(cfg, st, log)
	if err != nil {
		return err
	}
	defer stopHealth()

	eth, err := ethclient.DialContext(ctx, cfg.RPCURL)
	if err != nil {
		return fmt.Errorf("dial ethereum %s: %w", cfg.RPCURL, err)
	}
	defer eth.Close()

	nc, err := nats.Connect(cfg.NATSURL,
		nats.Name("chain-watcher"),
		// Keep trying: payments wait in the chain, not in memory, so an
		// outage of NATS delays publication and loses nothing.
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected", zap.Error(err))
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", c.ConnectedUrlRedacted()))
		}),
	)
	if err != nil {
		return fmt.Errorf("connect nats %s: %w", cfg.NATSURL, err)
	}
	// Close, not Drain: every publish was acknowledged before its
	// checkpoint, there are no subscriptions, and a flush would wait out
	// its timeout when NATS is unreachable.
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}

	var chainID uint64
	err = retry(ctx, log, "read chain id", func(ctx context.Context) error {
		id, err := eth.ChainID(ctx)
		if err != nil {
			return err
		}
		if !id.IsUint64() {
			return fmt.Errorf("chain id %s does not fit 64 bits", id)
		}
		chainID = id.Uint64()
		return nil
	})
	if err != nil {
		return ignoreCancel(ctx, err)
	}
	log = log.With(zap.Uint64("chain_id", chainID), zap.String("contract", cfg.contract().Hex()))

	err = retry(ctx, log, "declare stream", func(ctx context.Context) error {
		_, err := publish.EnsureStream(ctx, js, publish.StreamConfig{
			Name: cfg.Stream, DuplicateWindow: cfg.DuplicateWindow, Replicas: cfg.Replicas,
		})
		return err
	})
	if err != nil {
		return ignoreCancel(ctx, err)
	}
	var store *checkpoint.Store
	err = retry(ctx, log, "open checkpoint bucket", func(ctx context.Context) error {
		var err error
		store, err = checkpoint.Open(ctx, js, checkpoint.Config{Bucket: cfg.Bucket, Replicas: cfg.Replicas}, chainID)
		return err
	})
	if err != nil {
		return ignoreCancel(ctx, err)
	}
	var (
		cursor watch.Cursor
		found  bool
	)
	err = retry(ctx, log, "load checkpoint", func(ctx context.Context) error {
		var err error
		cursor, found, err = store.Load(ctx)
		if errors.Is(err, checkpoint.ErrCorrupt) {
			return permanent{err}
		}
		return err
	})
	if err != nil {
		return ignoreCancel(ctx, err)
	}
	next := cfg.StartBlock
	if found {
		next = cursor.Block + 1
		checkCursorHash(ctx, eth, cursor, log)
		st.setCursor(cursor)
	}
	log.Info("chain watcher starting", zap.Uint64("next_block", next), zap.Bool("resumed", found),
		zap.Uint64("confirmations", cfg.Confirmations), zap.String("stream", cfg.Stream))

	w, err := watch.New(eth, watch.Config{
		ChainID:       chainID,
		Contract:      cfg.contract(),
		Confirmations: cfg.Confirmations,
		PollInterval:  cfg.PollInterval,
		MaxRange:      cfg.MaxBlockRange,
		Logger:        log,
		OnStep:        st.setStep,
	})
	if err != nil {
		return err
	}
	pub := publish.NewPublisher(js, cfg.Stream)
	st.setReady(chainID)
	handler := watch.HandlerFunc(func(ctx context.Context, b watch.Batch) error {
		// Publish in chain order, payments and debt payments merged, each
		// acknowledged before the next: the stream then holds both in chain
		// order, and the checkpoint below is written only when all of them
		// are stored.
		if err := publishInChainOrder(ctx, pub, b, log); err != nil {
			return err
		}
		if err := store.Save(ctx, b.Cursor); err != nil {
			return err
		}
		st.setCursor(b.Cursor)
		st.setHead(b.Head)
		return nil
	})
	if err := w.Run(ctx, next, handler); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	log.Info("chain watcher stopped")
	return nil
}

// publishInChainOrder publishes the batch's payments and debt payments
// merged by (block, log index); each list is in that order already.
func publishInChainOrder(ctx context.Context, pub *publish.Publisher, b watch.Batch, log *zap.Logger) error {
	ps, ds := b.Payments, b.Debts
	for len(ps) > 0 || len(ds) > 0 {
		var (
			res  publish.Result
			err  error
			what string
			f    []zap.Field
		)
		if len(ds) == 0 || len(ps) > 0 && chainBefore(ps[0].BlockNumber, ps[0].LogIndex, ds[0].BlockNumber, ds[0].LogIndex) {
			p := ps[0]
			ps = ps[1:]
			res, err = pub.Publish(ctx, p)
			what, f = "payment", []zap.Field{zap.String("msg_id", p.MsgID()), zap.String("proposal_id", p.ProposalID.Hex()), zap.Uint64("block", p.BlockNumber)}
		} else {
			d := ds[0]
			ds = ds[1:]
			res, err = pub.PublishDebt(ctx, d)
			what, f = "debt payment", []zap.Field{zap.String("msg_id", d.MsgID()), zap.String("wallet", d.Wallet.Hex()), zap.Uint64("block", d.BlockNumber)}
		}
		if err != nil {
			return err
		}
		msg := what + " published"
		if res.Duplicate {
			// Published before a restart whose checkpoint lagged, or by a
			// second watcher: the stream kept the first copy.
			msg = what + " already in the stream"
		}
		log.Info(msg, append(f, zap.Uint64("seq", res.Sequence))...)
	}
	return nil
}

func chainBefore(blockA uint64, indexA uint, blockB uint64, indexB uint) bool {
	return blockA < blockB || blockA == blockB && indexA < indexB
}

// checkCursorHash warns when the checkpointed block is no longer canonical:
// a reorg deeper than the confirmations happened while the watcher was
// down. Handling it (retracting payments) is future work; see DESIGN.md.
func checkCursorHash(ctx context.Context, eth *ethclient.Client, c watch.Cursor, log *zap.Logger) {
	h, err := eth.HeaderByNumber(ctx, new(big.Int).SetUint64(c.Block))
	if err != nil {
		log.Warn("cannot check the checkpointed block", zap.Uint64("block", c.Block), zap.Error(err))
		return
	}
	if h.Hash() != c.Hash {
		log.Error("checkpointed block is no longer canonical: a reorg deeper than the confirmations",
			zap.Uint64("block", c.Block), zap.String("checkpoint_hash", c.Hash.Hex()), zap.String("chain_hash", h.Hash().Hex()))
	}
}

// permanent marks an error retry must not retry.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retry runs f until it succeeds, returns a permanent error, or ctx ends,
// with exponential backoff.
func retry(ctx context.Context, log *zap.Logger, what string, f func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	for {
		err := f(ctx)
		var p permanent
		switch {
		case err == nil:
			return nil
		case errors.As(err, &p):
			return fmt.Errorf("%s: %w", what, p.err)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		log.Warn(what+" failed; retrying", zap.Duration("backoff", backoff), zap.Error(err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, startupMaxBackoff)
	}
}

// ignoreCancel turns the error of a start-up step cut short by shutdown
// into a clean stop.
func ignoreCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}
