// Package app runs the chain watcher: it follows the payment contract's
// ProposalPaid and DebtPaid logs on an Ethereum JSON-RPC endpoint behind a
// number of confirmations (or the chain's finalized block), publishes each to
// NATS JetStream with a deduplicating message id, checkpoints its cursor in a
// JetStream key-value bucket once the logs up to it are acknowledged, and
// retracts what it published from blocks a reorg dropped (internal/relay).
// Beside them it publishes the chain's current and finalized epoch when
// they change (internal/epochs), and the chain's head, finalized and safe
// blocks, its cursor and the payments not published yet, for operators
// (internal/chainstatus).
// See DESIGN.md in the module for the reasoning.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/lifecycle"
	"github.com/contentledger/contentledger/pkg/natsconn"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/chainstatus"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/epochs"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/heads"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/relay"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

const (
	// startupMaxBackoff caps the wait between attempts to reach the chain
	// and NATS at start: in a compose file or a pod they may come up later.
	startupMaxBackoff = 10 * time.Second
)

// Run runs the watcher until ctx is cancelled and returns nil after a clean
// shutdown. It returns an error for an invalid configuration, a checkpoint
// that cannot be read, a malformed log of the contract, or a reorg deeper
// than REORG_DEPTH; unreachable services (endpoints, NATS) are retried.
//
// Its parts start in order and stop in reverse (pkg/lifecycle): the health
// and metrics endpoints first, so that they answer while the chain and NATS
// are still being reached; then the RPC endpoints and NATS; then the
// epochs, the chain status, the new-head subscriptions and, last, the relay,
// whose failure stops the watcher.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	if log == nil {
		log = zap.NewNop()
	}
	if err := cfg.Validate(); err != nil {
		if cfg.HTTPListener != nil {
			// Run owns the listener, also on early errors.
			_ = cfg.HTTPListener.Close()
		}
		return err
	}
	// A NATS server older than natsconn.MinServerVersion, reached at start
	// or later (the first connection retried, a reconnect), stops the
	// watcher: its refusal cancels ctx, whether assemble still waits for
	// NATS or the parts run, and Run returns it.
	guard := natsconn.NewVersionGuard()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-guard.Done():
			cancel(guard.Err())
		case <-ctx.Done():
		}
	}()
	var g lifecycle.Group
	if err := assemble(ctx, &g, cfg, guard, log); err != nil {
		if refused := guard.Err(); refused != nil {
			return errors.Join(refused, g.Stop())
		}
		return errors.Join(ignoreCancel(ctx, err), g.Stop())
	}
	err := g.Run(ctx)
	log.Info("chain watcher stopped")
	return errors.Join(guard.Err(), err)
}

// assemble builds the watcher's parts into g, waiting at start for the
// chain and NATS (until ctx ends).
func assemble(ctx context.Context, g *lifecycle.Group, cfg Config, guard *natsconn.VersionGuard, log *zap.Logger) error {
	st := newStatus(cfg.mode())
	m := newMetrics()
	stopHTTP, err := serveHTTP(cfg, st, m, log)
	if err != nil {
		return err
	}
	g.Add("health and metrics endpoints", func() error { stopHTTP(); return nil })
	eth, subscribers, err := rpcEndpoints(g, cfg, log)
	if err != nil {
		return err
	}
	st.setEndpoints(eth.Health)
	m.reg.MustRegister(newEndpointCollector(eth.Health))
	js, err := connectNATS(g, cfg, guard, log)
	if err != nil {
		return err
	}
	chainID, err := readChainID(ctx, eth, log)
	if err != nil {
		return err
	}
	log = log.With(zap.Uint64("chain_id", chainID), zap.String("contract", cfg.contract().Hex()))
	store, statusKV, err := openBuckets(ctx, js, cfg, chainID, log)
	if err != nil {
		return err
	}
	chainStatus, err := newChainStatus(cfg, eth, statusKV, st, m, chainID, log)
	if err != nil {
		return err
	}
	// New heads from WebSocket endpoints wake the relay between polls.
	wake := make(chan struct{}, 1)
	rl, err := newRelay(cfg, eth, js, store, wake, st, m, chainID, log)
	if err != nil {
		return err
	}
	ep, err := newEpochs(cfg, eth, js, st, m, chainID, log)
	if err != nil {
		return err
	}
	log.Info("chain watcher starting", zap.String("mode", string(cfg.mode())), zap.Uint64("start_block", cfg.StartBlock),
		zap.Uint64("confirmations", cfg.Confirmations), zap.Bool("finalized", cfg.Finalized),
		zap.Uint64("reorg_depth", cfg.reorgDepth()), zap.String("stream", cfg.Stream),
		zap.String("epoch_source", epochSourceName(cfg)))
	st.setReady(chainID)
	// Epochs, the chain status and the head subscriptions go on beside the
	// payments, on the same pool and stream, and stop after the relay
	// (before NATS and the endpoints close).
	g.Go("epochs", func(ctx context.Context) error { ep.Run(ctx); return nil })
	g.Go("chain status", func(ctx context.Context) error { chainStatus.Run(ctx); return nil })
	g.Go("heads", func(ctx context.Context) error {
		heads.Run(ctx, heads.Config{
			Endpoints: subscribers,
			Retry:     backoff.Policy{Initial: cfg.RPCBackoff, Max: cfg.RPCBackoffMax, Jitter: 0.5},
			Logger:    log.Named("heads"),
			OnHead:    func(uint64) { m.heads.Inc() },
		}, wake)
		return nil
	})
	// The relay loads the checkpoint itself, and a reorg that happened
	// while the watcher was down is found by its first step.
	g.Go("watch", rl.Run)
	return nil
}

// rpcEndpoints opens the pool of the configured RPC endpoints, and lists
// those that announce new heads (WebSocket).
func rpcEndpoints(g *lifecycle.Group, cfg Config, log *zap.Logger) (*rpcpool.Pool, []heads.Endpoint, error) {
	var endpoints []rpcpool.Endpoint
	var subscribers []heads.Endpoint
	for i, u := range cfg.RPCURLs() {
		name := rpcpool.Name(i, u)
		c := newLazyEndpoint(u, name)
		g.Add("endpoint "+name, func() error { c.Close(); return nil })
		endpoints = append(endpoints, rpcpool.Endpoint{Name: name, URL: u, Client: c})
		if strings.HasPrefix(u, "ws://") || strings.HasPrefix(u, "wss://") {
			subscribers = append(subscribers, heads.Endpoint{Name: name, Client: c})
		}
	}
	eth, err := rpcpool.New(endpoints, rpcpool.Config{
		CallTimeout: cfg.RPCTimeout,
		Attempts:    cfg.RPCAttempts,
		Retry:       backoff.Policy{Initial: cfg.RPCBackoff, Max: cfg.RPCBackoffMax, Jitter: 0.5},
		Cooldown:    backoff.Policy{Initial: cfg.RPCCooldown, Max: cfg.RPCCooldownMax, Jitter: 0.2},
		Logger:      log,
	})
	return eth, subscribers, err
}

// connectNATS connects to NATS, retrying for ever: payments wait in the
// chain, not in memory, so an outage of NATS delays publication and loses
// nothing. A server older than natsconn.MinServerVersion is refused: at
// once when it is reached now, through guard when it is reached later.
func connectNATS(g *lifecycle.Group, cfg Config, guard *natsconn.VersionGuard, log *zap.Logger) (jetstream.JetStream, error) {
	auth := cfg.NATS()
	opts, err := auth.Options()
	if err != nil {
		return nil, fmt.Errorf("NATS_*: %w", err)
	}
	log.Info("nats connection", zap.String("auth", auth.Method()), zap.Bool("tls", auth.TLS()))
	nc, err := nats.Connect(cfg.NATSURL, append(opts,
		nats.Name("chain-watcher"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected", zap.Error(err))
		}),
		nats.ConnectHandler(guard.Handler),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", c.ConnectedUrlRedacted()))
			guard.Handler(c)
		}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", cfg.NATSURL, err)
	}
	if err := guard.Check(nc); err != nil {
		return nil, err
	}
	// Close, not Drain: every publish was acknowledged before its
	// checkpoint, there are no subscriptions, and a flush would wait out
	// its timeout when NATS is unreachable.
	g.Add("nats", func() error { nc.Close(); return nil })
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// readChainID asks the endpoints for the chain id until one answers.
func readChainID(ctx context.Context, eth *rpcpool.Pool, log *zap.Logger) (uint64, error) {
	var chainID uint64
	err := retry(ctx, log, "read chain id", func(ctx context.Context) error {
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
	return chainID, err
}

// openBuckets declares the payment stream and opens the checkpoint and the
// chain status, which share the checkpoint's bucket.
func openBuckets(ctx context.Context, js jetstream.JetStream, cfg Config, chainID uint64, log *zap.Logger) (*checkpoint.Store, jetstream.KeyValue, error) {
	err := retry(ctx, log, "declare stream", func(ctx context.Context) error {
		_, err := publish.EnsureStream(ctx, js, publish.StreamConfig{
			Name: cfg.Stream, DuplicateWindow: cfg.DuplicateWindow, Replicas: cfg.Replicas,
		})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	var store *checkpoint.Store
	err = retry(ctx, log, "open checkpoint bucket", func(ctx context.Context) error {
		var err error
		store, err = checkpoint.Open(ctx, js, checkpoint.Config{Bucket: cfg.Bucket, Replicas: cfg.Replicas}, chainID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	var statusKV jetstream.KeyValue
	err = retry(ctx, log, "open status bucket", func(ctx context.Context) error {
		var err error
		statusKV, err = js.KeyValue(ctx, cmp.Or(cfg.Bucket, checkpoint.DefaultBucket))
		return err
	})
	return store, statusKV, err
}

// newChainStatus builds the publication of the chain's status for
// operators: head, finalized and safe blocks, the relay's cursor, the
// payments not published yet.
func newChainStatus(cfg Config, eth *rpcpool.Pool, kv jetstream.KeyValue, st *status, m *metrics, chainID uint64,
	log *zap.Logger) (*chainstatus.Loop, error) {
	return chainstatus.New(eth, kv, chainstatus.Config{
		ChainID:       chainID,
		Contract:      cfg.contract(),
		Confirmations: cfg.Confirmations,
		Finalized:     cfg.Finalized,
		Interval:      cfg.PollInterval,
		Cursor:        st.cursorNow,
		Logger:        log.Named("status"),
		OnStep: func(s payment.WatcherStatus, written bool, err error) {
			st.setChain(s, written, err)
			m.chainStatus(s, written, err)
		},
	})
}

// newRelay builds the relay: the watch of the contract's logs behind the
// confirmations, published to the stream and checkpointed.
func newRelay(cfg Config, eth *rpcpool.Pool, js jetstream.JetStream, store *checkpoint.Store, wake <-chan struct{}, st *status, m *metrics,
	chainID uint64, log *zap.Logger) (*relay.Relay, error) {
	w, err := watch.New(eth, watch.Config{
		ChainID:       chainID,
		Contract:      cfg.contract(),
		Confirmations: cfg.Confirmations,
		Finalized:     cfg.Finalized,
		MaxRange:      cfg.MaxBlockRange,
		GrowAfter:     cfg.RangeGrowAfter,
		AnchorDepth:   cfg.reorgDepth(),
		Logger:        log,
		OnRangeSize: func(n uint64) {
			st.setRangeSize(n)
			m.rangeSize.Set(float64(n))
		},
	})
	if err != nil {
		return nil, err
	}
	return relay.New(countingReader{Reader: w, m: m}, countingPublisher{next: publish.NewPublisher(js, cfg.Stream), m: m}, store, relay.Config{
		StartBlock:   cfg.StartBlock,
		Depth:        cfg.reorgDepth(),
		PollInterval: cfg.PollInterval,
		Wake:         wake,
		Logger:       log,
		OnStep:       st.setStep,
		OnProgress: func(c watch.Cursor, head uint64) {
			st.setCursor(c)
			if head > 0 {
				st.setHead(head)
			}
			m.progress(c, head)
		},
	})
}

// newEpochs builds the publication of the chain's epochs.
func newEpochs(cfg Config, eth *rpcpool.Pool, js jetstream.JetStream, st *status, m *metrics, chainID uint64, log *zap.Logger) (*epochs.Runner, error) {
	source, err := epochSource(cfg, eth, log)
	if err != nil {
		return nil, err
	}
	return epochs.New(epochs.Config{
		ChainID:   chainID,
		Source:    source,
		Publisher: publish.NewPublisher(js, cfg.Stream),
		Interval:  cfg.EpochInterval,
		Logger:    log.Named("epochs"),
		OnRead: func(err error) {
			st.setEpochRead(err)
			if err != nil {
				m.epochErrors.Inc()
			}
		},
		OnPublished: func(u payment.EpochUpdate, res publish.Result) {
			st.setEpoch(u)
			m.epochPublished(u, res)
		},
		OnBehind: func(payment.EpochUpdate) { m.epochBehind.Inc() },
	})
}

// epochSource is the beacon source when BEACON_URL is set, else the
// block-time source reading through the RPC pool.
func epochSource(cfg Config, eth *rpcpool.Pool, log *zap.Logger) (epochs.Source, error) {
	if cfg.BeaconURL != "" {
		return epochs.NewBeacon(cfg.BeaconURL, cfg.RPCTimeout, epochs.WithEpochLength(cfg.epochLength()))
	}
	return epochs.NewBlockTime(eth, cfg.epochLength(), log.Named("epochs"))
}

// epochSourceName names the epoch source for the start-up log.
func epochSourceName(cfg Config) string {
	if cfg.BeaconURL != "" {
		return payment.EpochSourceBeacon
	}
	return fmt.Sprintf("%s (%s epochs)", payment.EpochSourceBlockTime, cfg.epochLength())
}

// permanent marks an error retry must not retry.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retry runs f until it succeeds, returns a permanent error, or ctx ends,
// with exponential backoff and jitter.
func retry(ctx context.Context, log *zap.Logger, what string, f func(context.Context) error) error {
	wait := backoff.New(backoff.Policy{Initial: 100 * time.Millisecond, Max: startupMaxBackoff, Jitter: 0.2}, nil)
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
		d := wait.Next()
		log.Warn(what+" failed; retrying", zap.Duration("backoff", d), zap.Error(err))
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
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
