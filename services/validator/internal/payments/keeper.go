package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/payment"
)

// Defaults of KeeperConfig.
const (
	// DefaultPruneInterval is the pause between two prune passes.
	DefaultPruneInterval = 5 * time.Second
	// DefaultPruneBatch is the keys one pass examines: a pass holds the
	// index's lock for a walk over that many keys, and reads applied state
	// for the final ones among them (one Pebble read each).
	DefaultPruneBatch = 20_000
	// DefaultCheckpointInterval is the pause between two checkpoints: what
	// a restart replays at most, at ~170,000 payments/s.
	DefaultCheckpointInterval = time.Minute
	// DefaultReorgDepth is how deep a block must be under the chain's head
	// to count as final when the chain reports no finalized block: the
	// chain-watcher's upper bound for its REORG_DEPTH (it cannot retract a
	// log deeper than that), so it holds whatever the watcher is set to.
	DefaultReorgDepth = 4096
)

// ChainFinality is the chain-watcher's latest status; *ChainStatus
// satisfies it.
type ChainFinality interface {
	Latest() (s payment.WatcherStatus, receivedAt time.Time, ok bool)
}

// KeeperConfig is what a Keeper reads. Zero durations and sizes take the
// defaults above.
type KeeperConfig struct {
	Index *Index
	// State is the applied state pruning reads.
	State AppliedState
	// Chain tells how far the chain is final.
	Chain ChainFinality
	// Checkpoints, when set, receives the index's checkpoint every
	// CheckpointInterval and when Run ends; the Follower reads it at start.
	Checkpoints        CheckpointStore
	PruneInterval      time.Duration
	PruneBatch         int
	CheckpointInterval time.Duration
	// ReorgDepth: see DefaultReorgDepth.
	ReorgDepth uint64
	Log        *zap.Logger
}

func (c KeeperConfig) withDefaults() KeeperConfig {
	if c.PruneInterval == 0 {
		c.PruneInterval = DefaultPruneInterval
	}
	if c.PruneBatch == 0 {
		c.PruneBatch = DefaultPruneBatch
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.ReorgDepth == 0 {
		c.ReorgDepth = DefaultReorgDepth
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	return c
}

// Validate reports a config a Keeper cannot run with.
func (c KeeperConfig) Validate() error {
	var errs []error
	if c.Index == nil || c.State == nil || c.Chain == nil {
		errs = append(errs, errors.New("payments keeper: Index, State and Chain are required"))
	}
	if c.PruneInterval < 0 || c.CheckpointInterval < 0 || c.PruneBatch < 0 {
		errs = append(errs, fmt.Errorf("payments keeper: negative interval or batch (%s, %s, %d)", c.PruneInterval, c.CheckpointInterval, c.PruneBatch))
	}
	return errors.Join(errs...)
}

// Keeper keeps the payment index as small as the payments in flight: it
// prunes what applied state has spent and the chain made final, and writes
// the checkpoint a restart resumes from (ADR 0031). Run is its only
// goroutine.
type Keeper struct {
	cfg KeeperConfig
	// savedSeq and savedPruned are what the last checkpoint held: an
	// unchanged index is not written again.
	savedSeq, savedPruned uint64
}

// NewKeeper returns the keeper of cfg.
func NewKeeper(cfg KeeperConfig) (*Keeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Keeper{cfg: cfg.withDefaults()}, nil
}

// Final returns the newest block no reorg can take back, by the watcher's
// latest status: its finalized block (never above its head), or head -
// ReorgDepth when the chain reports none; ok is false before a status, or
// while the chain is shallower than ReorgDepth.
func (k *Keeper) Final() (uint64, bool) {
	s, _, ok := k.cfg.Chain.Latest()
	if !ok {
		return 0, false
	}
	if s.Finalized != nil {
		return min(*s.Finalized, s.Head.Number), true
	}
	if s.Head.Number < k.cfg.ReorgDepth {
		return 0, false
	}
	return s.Head.Number - k.cfg.ReorgDepth, true
}

// Prune makes one prune pass; nothing when no block is final yet.
func (k *Keeper) Prune() (PruneStats, error) {
	final, ok := k.Final()
	if !ok {
		return PruneStats{}, nil
	}
	return k.cfg.Index.Prune(final, k.cfg.State, k.cfg.PruneBatch)
}

// Checkpoint writes the index's checkpoint, unless the index holds no
// message yet (it would replace a good checkpoint with an empty one) or
// nothing changed since the last one.
func (k *Keeper) Checkpoint() error {
	if k.cfg.Checkpoints == nil {
		return nil
	}
	cp, ok := k.cfg.Index.snapshot()
	pruned := k.cfg.Index.Stats().Pruned
	if !ok || (cp.seq == k.savedSeq && pruned == k.savedPruned) {
		return nil
	}
	data, err := cp.encode()
	if err != nil {
		return fmt.Errorf("encoding the payment index checkpoint: %w", err)
	}
	if err := k.cfg.Checkpoints.Save(data); err != nil {
		return fmt.Errorf("saving the payment index checkpoint: %w", err)
	}
	k.savedSeq, k.savedPruned = cp.seq, pruned
	return nil
}

// Run prunes every PruneInterval (at once again while a sweep is not
// done, so that a backlog drains at one batch per pass) and checkpoints
// every CheckpointInterval, until ctx ends; then it writes a last
// checkpoint.
func (k *Keeper) Run(ctx context.Context) {
	prune := time.NewTicker(k.cfg.PruneInterval)
	defer prune.Stop()
	save := time.NewTicker(k.cfg.CheckpointInterval)
	defer save.Stop()
	defer func() {
		if err := k.Checkpoint(); err != nil {
			k.cfg.Log.Warn("last payment index checkpoint not written", zap.Error(err))
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			k.pruneSweep(ctx)
		case <-save.C:
			if err := k.Checkpoint(); err != nil {
				k.cfg.Log.Warn("payment index checkpoint not written; the next one tries again", zap.Error(err))
			}
		}
	}
}

// pruneSweep runs passes until one ends a sweep or ctx ends.
func (k *Keeper) pruneSweep(ctx context.Context) {
	total := 0
	for ctx.Err() == nil {
		st, err := k.Prune()
		total += st.Pruned
		if err != nil {
			k.cfg.Log.Warn("payment index prune pass failed; the next one looks again", zap.Error(err))
			return
		}
		if st.Swept || st.Examined == 0 {
			break
		}
	}
	if total > 0 {
		k.cfg.Log.Debug("payments spent and final left the index", zap.Int("pruned", total))
	}
}
