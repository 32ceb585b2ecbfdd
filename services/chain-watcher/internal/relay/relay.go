// Package relay runs the chain watcher's loop: it reads confirmed block
// ranges (internal/watch), publishes their ProposalPaid and DebtPaid logs
// (internal/publish), checkpoints (internal/checkpoint), and follows reorgs:
// it notices a dropped block by its hash, walks back to the common
// ancestor, retracts what it had published from the dropped blocks, rewinds
// the cursor and continues on the new chain.
//
// # Design
//
// Detection is by hash, never by number alone. Every range must continue
// the cursor (the first block's parent hash is the cursor's hash), and when
// there is nothing new to read the cursor block itself must still be
// canonical: a reorg to a chain of the same length or shorter shows there
// first. The state records the hashes of recent handled blocks, up to Depth
// below the cursor: every range's end, an anchor Depth below a long range's
// end, and every block something was published from. On a mismatch the
// recorded blocks are compared with the canonical chain, newest first; the
// newest one still canonical is the common ancestor (or an ancestor of it:
// rewinding further only re-reads blocks whose messages the stream
// deduplicates).
//
// What was published from a block is journaled (checkpoint.Journal) before
// it is published: the exact messages, so a retraction carries the same
// payload with removed = true and the ":removed" message id. The journal is
// written ahead because the stream is written before the checkpoint: a
// crash between publishing and checkpointing must not leave messages in the
// stream that nothing remembers. The state's Inflight list names the
// journals of a batch that began and did not checkpoint; each step first
// settles them (retracting those a reorg dropped meanwhile).
//
// A range's logs are published in chain order as atomic batches when the
// publisher can (BatchPublisher): a batch is sent once the one before it was
// acknowledged, and the stream stores it whole or not at all, so the stream
// order is the chain order as with one log at a time.
//
// Crash safety, step by step (the stream deduplicates a message id within
// its duplicate window, and that is the mechanism relied on):
//
//   - batch: save Inflight, write journals, publish, save the new cursor.
//     A crash before the last save leaves Inflight: the range is read
//     again and republished (same ids, dropped as duplicates), or, if a
//     reorg dropped its blocks meanwhile, retracted.
//   - reorg: publish every retraction, then save the rewound state. A crash
//     in between finds the same non-canonical cursor at restart and
//     publishes the same retractions again (same ids, dropped). The
//     re-mined payments of the new branch have new ids (other block hash)
//     and are published once, by the next batches.
//
// Journals are purged after the save that stops referencing them (a crash
// in between leaves an unreferenced key behind, harmless).
//
// A block can be retracted and then become canonical again (the chain flips
// back). Its messages' ids were spent on its first publication, and the
// stream would drop them as duplicates within its window, leaving consumers
// with the retraction only. So the state counts the retractions of each
// block within the window (State.Retracted), and the block's logs are
// published in the generation that count names (publish.Log.Generation,
// ":g<n>" in the id); the journal records it, so a later retraction names
// the same ids with ":removed". The count is saved in the state that stops
// naming the retracted journal: a crash before that save publishes the same
// retractions again (same generation, deduplicated), and one between a
// re-publication and its checkpoint publishes the same generation again.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// Reader reads the chain; *watch.Watcher implements it.
type Reader interface {
	// Next reads the confirmed range starting at next, whose parent must
	// be parent (zero: unchecked); ok is false when there is none yet.
	Next(ctx context.Context, next uint64, parent common.Hash) (watch.Batch, bool, error)
	// CanonicalHash returns the hash of the canonical block at number.
	CanonicalHash(ctx context.Context, number uint64) (common.Hash, bool, error)
}

// Publisher publishes to the stream; *publish.Publisher implements it. The
// logs of a re-adopted block (generation above 0) have ids Publish and
// PublishDebt cannot give: they need a BatchPublisher.
type Publisher interface {
	Publish(ctx context.Context, p payment.ProposalPaid) (publish.Result, error)
	PublishDebt(ctx context.Context, d payment.DebtPaid) (publish.Result, error)
}

// BatchPublisher is a Publisher that also publishes many logs in order,
// each acknowledged, in fewer round trips (atomic batches); the relay uses
// it when its Publisher has it. *publish.Publisher implements it.
//
// PublishLogs returns one result per log, or, with an error, the results
// of the logs acknowledged before it (a prefix). An error wrapping
// publish.ErrAtomicUnavailable means that batches are refused and it went
// on to one log at a time: the rest is published again.
type BatchPublisher interface {
	Publisher
	PublishLogs(ctx context.Context, logs []publish.Log) ([]publish.Result, error)
}

// Store keeps the state and the journals; *checkpoint.Store implements it.
type Store interface {
	Load(ctx context.Context) (checkpoint.State, bool, error)
	Save(ctx context.Context, st checkpoint.State) error
	PutJournal(ctx context.Context, j checkpoint.Journal) error
	Journal(ctx context.Context, block uint64, hash common.Hash) (checkpoint.Journal, bool, error)
	DropJournal(ctx context.Context, block uint64, hash common.Hash) error
}

// DefaultDepth is the default reorg depth handled, in blocks below the
// cursor.
const DefaultDepth = 128

// maxBackoff caps the wait between attempts after errors.
const maxBackoff = 30 * time.Second

// ErrReorgTooDeep is returned when no recorded block within Depth of the
// cursor is canonical any more: what was published from below the window
// cannot be retracted, so the relay stops for an operator rather than
// continue on a chain it cannot reconcile.
var ErrReorgTooDeep = errors.New("relay: reorg deeper than the recorded blocks")

// Config configures a Relay.
type Config struct {
	// StartBlock is the first block read when no state is stored.
	StartBlock uint64
	// Depth is the deepest reorg handled, in blocks below the cursor: the
	// window of recorded blocks and journals. 0 means DefaultDepth.
	Depth uint64
	// PollInterval is the wait between looks at the head when caught up,
	// and the first wait after an error.
	PollInterval time.Duration
	// Wake, if set, ends a wait between looks early: a new head announced
	// by a subscription (internal/heads).
	Wake <-chan struct{}
	// Logger; nil means no logging.
	Logger *zap.Logger
	// OnStep, if set, is called after every step with its error, nil when
	// it succeeded (also when there was nothing new): health reporting.
	OnStep func(error)
	// OnProgress, if set, is called with the cursor and the head seen
	// whenever the state moved.
	OnProgress func(cursor watch.Cursor, head uint64)
	// Rand is the jitter's random source (numbers in [0, 1)) for the waits
	// after errors; nil means math/rand/v2.
	Rand func() float64
}

// Relay moves payments from the chain to the stream. It is not safe for
// concurrent use: one Run (or Step) at a time.
type Relay struct {
	reader Reader
	pub    Publisher
	store  Store
	cfg    Config
	log    *zap.Logger

	// st is the state as last loaded or saved; loaded is false until the
	// first Load and after a conflicting Save. fresh: nothing was stored
	// yet, so reading starts at StartBlock.
	st     checkpoint.State
	loaded bool
	fresh  bool
}

// New returns a Relay.
func New(reader Reader, pub Publisher, store Store, cfg Config) (*Relay, error) {
	if reader == nil || pub == nil || store == nil {
		return nil, errors.New("relay: reader, publisher and store are required")
	}
	if cfg.PollInterval <= 0 {
		return nil, fmt.Errorf("relay: poll interval %s must be positive", cfg.PollInterval)
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultDepth
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Relay{reader: reader, pub: pub, store: store, cfg: cfg, log: log}, nil
}

// Run steps until ctx is done (then it returns nil). Errors are logged and
// retried with exponential backoff; Run returns early only for
// watch.ErrMalformedLog, ErrReorgTooDeep and checkpoint.ErrCorrupt, which
// retrying cannot mend.
func (r *Relay) Run(ctx context.Context) error {
	// Jitter: several watchers (a hot standby) that failed on the same
	// outage do not retry in lockstep.
	retry := backoff.New(backoff.Policy{Initial: r.cfg.PollInterval, Max: maxBackoff, Jitter: 0.2}, r.cfg.Rand)
	for ctx.Err() == nil {
		more, err := r.Step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if r.cfg.OnStep != nil {
			r.cfg.OnStep(err)
		}
		switch {
		case errors.Is(err, watch.ErrMalformedLog), errors.Is(err, ErrReorgTooDeep), errors.Is(err, checkpoint.ErrCorrupt):
			return err
		case err != nil:
			if errors.Is(err, checkpoint.ErrConflict) {
				r.loaded = false // another watcher moved the state: take it over
			}
			wait := retry.Next()
			r.log.Warn("chain watch step failed; retrying", zap.Duration("backoff", wait), zap.Error(err))
			_ = backoff.Sleep(ctx, wait)
			continue
		}
		retry.Reset()
		if !more {
			r.idle(ctx)
		}
	}
	return nil
}

// idle waits PollInterval, or less when Wake signals.
func (r *Relay) idle(ctx context.Context) {
	t := time.NewTimer(r.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.cfg.Wake:
	case <-ctx.Done():
	}
}

// State returns the state as last loaded or saved.
func (r *Relay) State() checkpoint.State { return r.st }

// Step does one unit of work: settle an interrupted batch, then read and
// publish the next range, or handle a reorg. more is true when there may be
// more to do at once.
func (r *Relay) Step(ctx context.Context) (more bool, err error) {
	if !r.loaded {
		st, found, err := r.store.Load(ctx)
		if err != nil {
			return false, err
		}
		r.st, r.fresh, r.loaded = st, !found, true
		if found && r.cfg.OnProgress != nil {
			r.cfg.OnProgress(st.Cursor, 0)
		}
	}
	if err := r.settleInflight(ctx); err != nil {
		return false, err
	}
	next, parent := r.cfg.StartBlock, common.Hash{}
	if !r.fresh {
		next, parent = r.st.Cursor.Block+1, r.st.Cursor.Hash
	}
	b, ok, err := r.reader.Next(ctx, next, parent)
	switch {
	case errors.Is(err, watch.ErrParentMismatch):
		return r.reorg(ctx)
	case err != nil:
		return false, err
	case !ok:
		// Nothing new to read. A reorg to a chain as long as this one, or
		// shorter, shows only at the cursor block itself.
		if r.fresh || r.st.Cursor.Hash == (common.Hash{}) {
			return false, nil
		}
		hash, found, err := r.reader.CanonicalHash(ctx, r.st.Cursor.Block)
		if err != nil {
			return false, err
		}
		if !found || hash != r.st.Cursor.Hash {
			return r.reorg(ctx)
		}
		return false, nil
	}
	if err := r.handle(ctx, b); err != nil {
		return false, err
	}
	return b.To < b.Safe, nil
}

// blockKey names a block by number and hash.
type blockKey struct {
	n uint64
	h common.Hash
}

// handle journals, publishes and checkpoints one batch.
func (r *Relay) handle(ctx context.Context, b watch.Batch) error {
	bottom := b.To - min(b.To, r.cfg.Depth) // the window is [bottom, To]
	// Blocks retracted before are published in their next generation
	// (overtaken blocks below are not in the batch, so retracting them
	// changes none of these).
	gens := generations(r.st.Retracted)
	journals := journalsOf(b, bottom, gens)

	// Inflight blocks of an interrupted batch inside this range that this
	// batch does not publish again were dropped by a reorg: they are
	// journaled because they had logs, and the same block would have them
	// again. Retract them before the state forgets them. (Inflight blocks
	// are always above the cursor, so none is below the range.)
	inBatch := map[blockKey]bool{}
	for _, p := range b.Payments {
		inBatch[blockKey{p.BlockNumber, p.BlockHash}] = true
	}
	for _, d := range b.Debts {
		inBatch[blockKey{d.BlockNumber, d.BlockHash}] = true
	}
	var overtaken, pending []checkpoint.Block
	for _, e := range r.st.Inflight {
		if e.Number <= b.To && !inBatch[blockKey{e.Number, e.Hash}] {
			overtaken = append(overtaken, e)
		} else {
			pending = append(pending, e)
		}
	}
	retracted := r.st.Retracted
	for _, e := range overtaken {
		gen, found, err := r.retract(ctx, e)
		if err != nil {
			return err
		}
		if found {
			retracted = countRetraction(retracted, e, gen)
		}
	}

	// Write ahead: the state names the journals before they are written,
	// and they are written before anything is published.
	var wal []checkpoint.Block
	for _, j := range journals {
		wal = append(wal, checkpoint.Block{Number: j.Block, Hash: j.Hash, Journaled: true})
	}
	if ahead := addBlocks(pending, wal); len(overtaken) > 0 || len(ahead) != len(pending) {
		st := r.st
		if r.fresh {
			// The first state: its cursor is the block before the range,
			// unchecked (zero hash), so a restart resumes at the range.
			st.Cursor = watch.Cursor{Block: max(b.From, 1) - 1}
		}
		st.Inflight, st.Retracted = ahead, retracted
		if err := r.save(ctx, st); err != nil {
			return err
		}
	}
	for _, j := range journals {
		if err := r.store.PutJournal(ctx, j); err != nil {
			return err
		}
	}
	if err := r.publish(ctx, b.Payments, b.Debts, gens); err != nil {
		return err
	}

	var handled []checkpoint.Block
	for _, a := range b.Anchors {
		handled = append(handled, checkpoint.Block{Number: a.Block, Hash: a.Hash})
	}
	recent := mergeBlocks(mergeBlocks(r.st.Recent, handled), wal)
	// Everything in the window is kept, everything below it goes: deeper
	// reorgs are not handled, so their journals are of no use.
	var kept, gone []checkpoint.Block
	for _, e := range recent {
		if e.Number >= bottom {
			kept = append(kept, e)
		} else if e.Journaled {
			gone = append(gone, e)
		}
	}
	var inflight []checkpoint.Block
	for _, e := range r.st.Inflight {
		switch {
		case e.Number > b.To:
			inflight = append(inflight, e)
		case e.Number < bottom:
			gone = append(gone, e) // published again, but below the window now
		}
	}
	// A retracted block below the window cannot become canonical again
	// without a reorg deeper than the window, which stops the relay.
	var keptRetracted []checkpoint.Retracted
	for _, e := range retracted {
		if e.Number >= bottom {
			keptRetracted = append(keptRetracted, e)
		}
	}
	st := checkpoint.State{Cursor: b.Cursor, Recent: kept, Inflight: inflight, Retracted: keptRetracted}
	if err := r.save(ctx, st); err != nil {
		return err
	}
	if r.cfg.OnProgress != nil {
		r.cfg.OnProgress(b.Cursor, b.Head)
	}
	r.log.Debug("handled block range", zap.Uint64("from", b.From), zap.Uint64("to", b.To),
		zap.Uint64("head", b.Head), zap.Int("payments", len(b.Payments)), zap.Int("debts", len(b.Debts)))
	r.dropJournals(ctx, append(gone, overtaken...))
	return nil
}

// journalsOf groups the batch's logs of blocks at or above bottom by block,
// in chain order, each with the generation it is published in.
func journalsOf(b watch.Batch, bottom uint64, gens map[blockKey]uint32) []checkpoint.Journal {
	var out []checkpoint.Journal
	at := func(n uint64, h common.Hash) *checkpoint.Journal {
		for i := range out {
			if out[i].Block == n && out[i].Hash == h {
				return &out[i]
			}
		}
		out = append(out, checkpoint.Journal{Block: n, Hash: h, Generation: gens[blockKey{n, h}]})
		return &out[len(out)-1]
	}
	for _, p := range b.Payments {
		if p.BlockNumber >= bottom {
			j := at(p.BlockNumber, p.BlockHash)
			j.Payments = append(j.Payments, p)
		}
	}
	for _, d := range b.Debts {
		if d.BlockNumber >= bottom {
			j := at(d.BlockNumber, d.BlockHash)
			j.Debts = append(j.Debts, d)
		}
	}
	slices.SortFunc(out, func(a, b checkpoint.Journal) int { return cmp.Compare(a.Block, b.Block) })
	return out
}

// generations returns the generation each retracted block is published in
// next: the number of its retractions.
func generations(rs []checkpoint.Retracted) map[blockKey]uint32 {
	out := make(map[blockKey]uint32, len(rs))
	for _, e := range rs {
		out[blockKey{e.Number, e.Hash}] = e.Count
	}
	return out
}

// countRetraction returns rs recording that block e's messages of
// generation gen were retracted: its next publication is generation gen+1
// (never lower than one already recorded).
func countRetraction(rs []checkpoint.Retracted, e checkpoint.Block, gen uint32) []checkpoint.Retracted {
	out := slices.Clone(rs)
	i := slices.IndexFunc(out, func(x checkpoint.Retracted) bool { return x.Number == e.Number && x.Hash == e.Hash })
	if i < 0 {
		out = append(out, checkpoint.Retracted{Number: e.Number, Hash: e.Hash})
		i = len(out) - 1
	}
	out[i].Count = max(out[i].Count, gen+1)
	slices.SortStableFunc(out, func(x, y checkpoint.Retracted) int { return cmp.Compare(x.Number, y.Number) })
	return out
}

// mergeBlocks returns the blocks of a and b in ascending order, one per
// number: b's entry replaces a's of the same number (a newer reading of the
// chain), and a block keeps its journal mark when both name the same hash.
func mergeBlocks(a, b []checkpoint.Block) []checkpoint.Block {
	out := slices.Clone(a)
	for _, e := range b {
		i := slices.IndexFunc(out, func(x checkpoint.Block) bool { return x.Number == e.Number })
		switch {
		case i < 0:
			out = append(out, e)
		case out[i].Hash == e.Hash:
			out[i].Journaled = out[i].Journaled || e.Journaled
		default:
			out[i] = e
		}
	}
	slices.SortFunc(out, func(x, y checkpoint.Block) int { return cmp.Compare(x.Number, y.Number) })
	return out
}

// addBlocks returns a with the blocks of b it lacks (by number and hash),
// ascending. Unlike mergeBlocks it keeps two hashes of one number: an
// inflight list must not forget a block before its retraction.
func addBlocks(a, b []checkpoint.Block) []checkpoint.Block {
	out := slices.Clone(a)
	for _, e := range b {
		if !slices.ContainsFunc(out, func(x checkpoint.Block) bool { return x.Number == e.Number && x.Hash == e.Hash }) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(x, y checkpoint.Block) int { return cmp.Compare(x.Number, y.Number) })
	return out
}

// settleInflight resolves the journaled blocks of an interrupted batch:
// those no longer canonical are retracted and forgotten; canonical ones
// stay until a batch publishes them again.
func (r *Relay) settleInflight(ctx context.Context) error {
	if len(r.st.Inflight) == 0 {
		return nil
	}
	var keep, dropped []checkpoint.Block
	retracted := r.st.Retracted
	for _, e := range r.st.Inflight {
		hash, found, err := r.reader.CanonicalHash(ctx, e.Number)
		if err != nil {
			return err
		}
		if found && hash == e.Hash {
			keep = append(keep, e)
			continue
		}
		gen, found, err := r.retract(ctx, e)
		if err != nil {
			return err
		}
		if found {
			retracted = countRetraction(retracted, e, gen)
		}
		dropped = append(dropped, e)
	}
	if len(dropped) == 0 {
		return nil
	}
	st := r.st
	st.Inflight, st.Retracted = keep, retracted
	if err := r.save(ctx, st); err != nil {
		return err
	}
	r.dropJournals(ctx, dropped)
	return nil
}

// reorg walks back from the cursor to the newest recorded block that is
// still canonical, retracts what was published from the recorded blocks
// above it, and rewinds the cursor to it. rewound is false when the cursor
// turned out to be canonical after all.
func (r *Relay) reorg(ctx context.Context) (rewound bool, err error) {
	recent := r.st.Recent
	if len(recent) == 0 { // a state written before blocks were recorded
		recent = []checkpoint.Block{{Number: r.st.Cursor.Block, Hash: r.st.Cursor.Hash}}
	}
	ancestor := -1
	for i := len(recent) - 1; i >= 0; i-- {
		hash, found, err := r.reader.CanonicalHash(ctx, recent[i].Number)
		if err != nil {
			return false, err
		}
		if found && hash == recent[i].Hash {
			ancestor = i
			break
		}
	}
	if ancestor < 0 {
		return false, fmt.Errorf("%w: none of the %d blocks recorded from %d to %d is canonical (cursor %d %s); what was published from them cannot be retracted",
			ErrReorgTooDeep, len(recent), recent[0].Number, recent[len(recent)-1].Number, r.st.Cursor.Block, r.st.Cursor.Hash.Hex())
	}
	dropped := recent[ancestor+1:]
	if len(dropped) == 0 {
		// The cursor is canonical after all: an inconsistent answer (a
		// node behind a load balancer). The next step, after the poll
		// interval, reads again.
		return false, nil
	}
	var journaled []checkpoint.Block
	retracted := r.st.Retracted
	for _, e := range dropped {
		if e.Journaled {
			gen, found, err := r.retract(ctx, e)
			if err != nil {
				return false, err
			}
			if found {
				retracted = countRetraction(retracted, e, gen)
			}
			journaled = append(journaled, e)
		}
	}
	to := recent[ancestor]
	st := checkpoint.State{
		Cursor:    watch.Cursor{Block: to.Number, Hash: to.Hash},
		Recent:    slices.Clone(recent[:ancestor+1]),
		Inflight:  r.st.Inflight,
		Retracted: retracted,
	}
	if err := r.save(ctx, st); err != nil {
		return false, err
	}
	r.log.Warn("chain reorganization: rewound to the common ancestor",
		zap.Uint64("from_block", dropped[len(dropped)-1].Number), zap.String("from_hash", dropped[len(dropped)-1].Hash.Hex()),
		zap.Uint64("ancestor_block", to.Number), zap.String("ancestor_hash", to.Hash.Hex()),
		zap.Int("blocks_with_retractions", len(journaled)))
	if r.cfg.OnProgress != nil {
		r.cfg.OnProgress(st.Cursor, 0)
	}
	r.dropJournals(ctx, journaled)
	return true, nil
}

// retract publishes the retraction of every message journaled for a block:
// the same payload with removed = true, under the message id of the
// generation the journal records, with ":removed". found is false when
// there is no journal (nothing to retract); gen is the generation
// retracted.
func (r *Relay) retract(ctx context.Context, e checkpoint.Block) (gen uint32, found bool, err error) {
	j, found, err := r.store.Journal(ctx, e.Number, e.Hash)
	if err != nil || !found {
		// The journal is written before anything is published: without
		// one, nothing was.
		return 0, false, err
	}
	for i := range j.Payments {
		j.Payments[i].Removed = true
	}
	for i := range j.Debts {
		j.Debts[i].Removed = true
	}
	return j.Generation, true, r.publish(ctx, j.Payments, j.Debts, map[blockKey]uint32{{j.Block, j.Hash}: j.Generation})
}

// publish publishes payments and debt payments merged by (block, log
// index), each acknowledged before the checkpoint that follows, in chain
// order: as batches when the publisher can (each batch sent once the one
// before was acknowledged, and stored whole and in order), else one at a
// time, each acknowledged before the next. Either way a log reaches the
// stream only after every log before it in chain order is there. gens
// names the generation of the logs of re-adopted blocks (0 for the rest).
func (r *Relay) publish(ctx context.Context, ps []payment.ProposalPaid, ds []payment.DebtPaid, gens map[blockKey]uint32) error {
	logs := make([]publish.Log, 0, len(ps)+len(ds))
	for len(ps) > 0 || len(ds) > 0 {
		if len(ds) == 0 || len(ps) > 0 && chainBefore(ps[0].BlockNumber, ps[0].LogIndex, ds[0].BlockNumber, ds[0].LogIndex) {
			logs = append(logs, publish.Log{Payment: &ps[0], Generation: gens[blockKey{ps[0].BlockNumber, ps[0].BlockHash}]})
			ps = ps[1:]
		} else {
			logs = append(logs, publish.Log{Debt: &ds[0], Generation: gens[blockKey{ds[0].BlockNumber, ds[0].BlockHash}]})
			ds = ds[1:]
		}
	}
	bp, batches := r.pub.(BatchPublisher)
	refusals := 0
	for len(logs) > 0 {
		if !batches {
			res, err := r.publishOne(ctx, logs[0])
			if err != nil {
				return err
			}
			r.logPublished(logs[0], res)
			logs = logs[1:]
			continue
		}
		res, err := bp.PublishLogs(ctx, logs)
		for i, l := range logs[:min(len(res), len(logs))] {
			r.logPublished(l, res[i])
		}
		logs = logs[min(len(res), len(logs)):]
		switch {
		case errors.Is(err, publish.ErrAtomicUnavailable) && refusals == 0:
			// Returned once, when the publisher switched to one log at a
			// time: slower, not wrong.
			refusals++
			r.log.Warn("atomic batch publication unavailable; publishing one log at a time", zap.Error(err))
		case err != nil:
			return err
		}
	}
	return nil
}

// publishOne publishes one log through the Publisher.
func (r *Relay) publishOne(ctx context.Context, l publish.Log) (publish.Result, error) {
	if l.Generation > 0 {
		// Publish would use the first generation's id, which the stream
		// drops as a duplicate: the payment would be lost to consumers.
		return publish.Result{}, fmt.Errorf("relay: %s is of a re-adopted block and needs a BatchPublisher", l.MsgID())
	}
	if l.Debt != nil {
		return r.pub.PublishDebt(ctx, *l.Debt)
	}
	return r.pub.Publish(ctx, *l.Payment)
}

// logPublished logs one acknowledged log.
func (r *Relay) logPublished(l publish.Log, res publish.Result) {
	var (
		what string
		f    []zap.Field
	)
	if d := l.Debt; d != nil {
		what, f = "debt payment", []zap.Field{zap.String("msg_id", l.MsgID()), zap.String("wallet", d.Wallet.Hex()), zap.Uint64("block", d.BlockNumber)}
	} else {
		p := l.Payment
		what, f = "payment", []zap.Field{zap.String("msg_id", l.MsgID()), zap.String("proposal_id", p.ProposalID.Hex()), zap.Uint64("block", p.BlockNumber)}
	}
	if l.Removed() {
		what += " retraction"
	}
	msg := what + " published"
	if res.Duplicate {
		// Published before a restart whose checkpoint lagged, or by a
		// second watcher: the stream kept the first copy.
		msg = what + " already in the stream"
	}
	r.log.Info(msg, append(f, zap.Uint64("seq", res.Sequence))...)
}

func chainBefore(blockA uint64, indexA uint, blockB uint64, indexB uint) bool {
	return blockA < blockB || blockA == blockB && indexA < indexB
}

// save stores st and makes it the relay's state.
func (r *Relay) save(ctx context.Context, st checkpoint.State) error {
	if err := r.store.Save(ctx, st); err != nil {
		return err
	}
	r.st, r.fresh = st, false
	return nil
}

// dropJournals purges journals no state refers to any more. A failure only
// leaves a key behind, so it is logged, not returned.
func (r *Relay) dropJournals(ctx context.Context, blocks []checkpoint.Block) {
	for _, e := range blocks {
		if err := r.store.DropJournal(ctx, e.Number, e.Hash); err != nil {
			r.log.Warn("purging a journal failed", zap.Uint64("block", e.Number), zap.String("hash", e.Hash.Hex()), zap.Error(err))
		}
	}
}
