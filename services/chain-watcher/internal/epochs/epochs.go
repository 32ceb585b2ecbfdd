// Package epochs reads the chain's current and finalized epoch (ADR 0022)
// from a Source and publishes them on chain.<chainId>.epochs
// (payment.EpochSubject) when either changes, for the validators' epoch
// clocks.
//
// Two sources: BlockTime derives the epochs from block timestamps read
// through the watcher's RPC pool (the finalized epoch from the chain's
// finalized block, or current - 2 where the endpoint has no such tag), and
// Beacon asks a beacon node's API for its head slot and finalized
// checkpoint and converts them to the same numbering (unix time / length),
// so that one deployment may use either.
//
// The published figures never go backwards within a run: each is the
// highest read so far, so a lagging endpoint or a reading that lost the
// finalized tag does not retract an epoch the validators already have.
// There is no heartbeat: the stream keeps the last update, and validators
// read the subject from its last message, so a restarted validator learns
// the state at once; a restarted watcher publishes its first reading under
// the same message id as before, which the stream drops as a duplicate.
package epochs

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
)

// DefaultLength is the default epoch length of both sources: 32 slots of
// 12 s (ADR 0022).
const DefaultLength = 384 * time.Second

// DefaultInterval is how often a source is read by default: once a slot.
const DefaultInterval = 12 * time.Second

// maxBackoff caps the wait after failed reads.
const maxBackoff = 30 * time.Second

// Source reads the chain's epochs once. The update it returns has Current,
// Finalized, Source and what it knows of BlockNumber or Slot; the Runner
// fills in the chain id and the time.
type Source interface {
	Read(ctx context.Context) (payment.EpochUpdate, error)
}

// Publisher puts an update on the stream; *publish.Publisher satisfies it.
type Publisher interface {
	PublishEpoch(ctx context.Context, u payment.EpochUpdate) (publish.Result, error)
}

// Config configures a Runner.
type Config struct {
	ChainID   uint64
	Source    Source
	Publisher Publisher
	// Interval between reads; 0 means DefaultInterval. Failed reads are
	// retried from Interval, doubling up to 30 s, with jitter.
	Interval time.Duration
	// OnRead, if set, is called after every read or publication attempt
	// with its error (nil on success): health.
	OnRead func(err error)
	// OnPublished, if set, is called with every update the stream
	// acknowledged: metrics and health.
	OnPublished func(u payment.EpochUpdate, res publish.Result)
	// OnBehind, if set, is called when a reading had a figure below the
	// one already published (that figure is not published).
	OnBehind func(read payment.EpochUpdate)
	// Now is the clock stamped on updates; nil means time.Now.
	Now func() time.Time
	// Logger; nil means none.
	Logger *zap.Logger
}

// Runner reads a Source and publishes what changed. It is not safe for
// concurrent use: one Run (or Step) at a time.
type Runner struct {
	cfg  Config
	log  *zap.Logger
	last *payment.EpochUpdate // the last update the stream acknowledged
	// behind is set while readings stay below the published figures, so
	// that a lagging stretch is logged once, not at every read.
	behind bool
}

// New returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Source == nil || cfg.Publisher == nil {
		return nil, errors.New("epochs: no source or no publisher")
	}
	if cfg.ChainID == 0 {
		return nil, errors.New("epochs: no chain id")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Runner{cfg: cfg, log: log}, nil
}

// Last returns the last update the stream acknowledged; ok is false before
// the first.
func (r *Runner) Last() (u payment.EpochUpdate, ok bool) {
	if r.last == nil {
		return payment.EpochUpdate{}, false
	}
	return *r.last, true
}

// Run reads and publishes every Interval until ctx ends. A failed read or
// publication is logged and retried after a backoff; nothing is published
// meanwhile, and the validators keep the figures they have.
func (r *Runner) Run(ctx context.Context) {
	retry := backoff.New(backoff.Policy{Initial: r.cfg.Interval, Max: max(maxBackoff, r.cfg.Interval), Jitter: 0.2}, nil)
	for ctx.Err() == nil {
		_, err := r.Step(ctx)
		if ctx.Err() != nil {
			return
		}
		if r.cfg.OnRead != nil {
			r.cfg.OnRead(err)
		}
		wait := r.cfg.Interval
		if err != nil {
			wait = retry.Next()
			r.log.Warn("epoch update failed; retrying", zap.Duration("backoff", wait), zap.Error(err))
		} else {
			retry.Reset()
		}
		_ = backoff.Sleep(ctx, wait)
	}
}

// Step reads the source once and publishes the figures when either is
// higher than the last published one. Each published figure is the
// highest seen, so the update is never lower than the last in either.
func (r *Runner) Step(ctx context.Context) (published bool, err error) {
	u, err := r.cfg.Source.Read(ctx)
	if err != nil {
		return false, err
	}
	u.ChainID, u.ObservedAtMs = r.cfg.ChainID, r.cfg.Now().UnixMilli()
	if last := r.last; last != nil {
		behind := u.Current < last.Current || u.Finalized < last.Finalized
		if behind && !r.behind {
			r.log.Info("epoch reading behind the published one; its lower figure is not published",
				zap.Uint64("current", u.Current), zap.Uint64("finalized", u.Finalized), zap.String("source", u.Source),
				zap.Uint64("published_current", last.Current), zap.Uint64("published_finalized", last.Finalized))
		}
		if behind && r.cfg.OnBehind != nil {
			r.cfg.OnBehind(u)
		}
		r.behind = behind
		u.Current, u.Finalized = max(u.Current, last.Current), max(u.Finalized, last.Finalized)
		if u.Current == last.Current && u.Finalized == last.Finalized {
			return false, nil
		}
	}
	res, err := r.cfg.Publisher.PublishEpoch(ctx, u)
	if err != nil {
		return false, err
	}
	r.last = &u
	r.log.Info("epoch update published", zap.Uint64("current", u.Current), zap.Uint64("finalized", u.Finalized),
		zap.String("source", u.Source), zap.Bool("duplicate", res.Duplicate))
	if r.cfg.OnPublished != nil {
		r.cfg.OnPublished(u, res)
	}
	return true, nil
}
