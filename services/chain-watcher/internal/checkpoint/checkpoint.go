// Package checkpoint keeps the watcher's durable state in a JetStream
// key-value bucket, next to the stream it publishes to, so that a restarted
// watcher, on any machine, resumes where the last one stopped and can still
// take back what it published from blocks a reorg dropped while it was down.
//
// Two kinds of keys, one bucket:
//
//   - cursor-<chainId>: the State, one JSON value written by compare-and-set:
//     the cursor (last fully handled block), the recent handled blocks
//     within the reorg window, the blocks of a batch being published, and
//     the blocks in the window whose messages were retracted (how often).
//   - published-<chainId>-<block>-<hash>: a Journal, what was (or is about
//     to be) published from one block: the exact messages, so that their
//     retractions carry the same payload. One key per block keeps every
//     value small however many blocks the window spans; a key is purged
//     once its block leaves the window or its messages are retracted.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// DefaultBucket is the default key-value bucket of the cursors.
const DefaultBucket = "CHAIN_WATCHER"

// markerTTL is how long the bucket keeps the marker a purged journal key
// leaves. Without a TTL every journaled block would leave a marker behind
// for good.
const markerTTL = time.Hour

var (
	// ErrCorrupt is returned by Load for a stored state that does not
	// decode. It is not replaced silently: starting over from StartBlock
	// would republish the whole history, skipping ahead would lose payments.
	ErrCorrupt = errors.New("checkpoint: stored cursor is corrupt")
	// ErrConflict is returned by Save when the stored state is not the one
	// this Store last read or wrote: another watcher changed it. The caller
	// loads it again and goes on from there.
	ErrConflict = errors.New("checkpoint: state changed by another writer")
)

// KeyValueCreator is the part of jetstream.JetStream Open uses.
type KeyValueCreator interface {
	CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error)
}

// Config says where the state is kept.
type Config struct {
	// Bucket is the key-value bucket; empty means DefaultBucket.
	Bucket string
	// Replicas is the number of copies in a cluster; 0 means 1.
	Replicas int
}

// Block is a handled block as the state records it.
type Block struct {
	Number uint64      `json:"block"`
	Hash   common.Hash `json:"hash"`
	// Journaled: a Journal holds what was published from the block.
	Journaled bool `json:"journaled,omitempty"`
}

// Retracted is a block whose messages a reorg retracted, and how many
// times: the generation of its next publication, should the chain take it
// back (publish.Log.Generation).
type Retracted struct {
	Number uint64      `json:"block"`
	Hash   common.Hash `json:"hash"`
	Count  uint32      `json:"count"`
}

// State is what the watcher records of its progress.
type State struct {
	// Cursor is the last fully handled block: every payment at or below it
	// is in the stream. A zero hash is not checked against the chain (a
	// cursor set by hand to re-publish history).
	Cursor watch.Cursor
	// Recent are handled blocks at most the reorg depth below the cursor,
	// ascending, ending with the cursor: where a reorg is walked back to,
	// and which of them have a Journal.
	Recent []Block
	// Inflight are the journaled blocks of a batch whose publication began
	// and was not checkpointed: a crash may have left their messages in
	// the stream, so a reorg must retract them too.
	Inflight []Block
	// Retracted are the blocks at most the reorg depth below the cursor (or
	// above it) whose messages were retracted, ascending: only those can
	// become canonical again without a reorg deeper than the window.
	Retracted []Retracted
}

// Journal is what was published from one block, in chain order.
type Journal struct {
	Block uint64
	Hash  common.Hash
	// Generation is the generation the block's messages were published in
	// (publish.Log.Generation): their retractions carry it too.
	Generation uint32
	Payments   []payment.ProposalPaid
	Debts      []payment.DebtPaid
}

// Store holds the state and journals of one chain. It remembers the
// revision of the state it last read or wrote: one owner at a time.
type Store struct {
	kv      jetstream.KeyValue
	chainID uint64
	key     string
	rev     uint64 // revision of the state last read or written; 0: none stored
}

// Key is the key of a chain's state: one bucket serves every chain.
func Key(chainID uint64) string { return fmt.Sprintf("cursor-%d", chainID) }

// JournalKey is the key of the journal of one block.
func JournalKey(chainID, block uint64, hash common.Hash) string {
	return fmt.Sprintf("published-%d-%d-%x", chainID, block, hash)
}

// Open declares the bucket (idempotently) and returns the store of the
// chain's state. The bucket is file-backed; like the payments stream it is
// durable across a machine crash only on a server with sync_interval: always.
func Open(ctx context.Context, js KeyValueCreator, cfg Config, chainID uint64) (*Store, error) {
	bucket := cfg.Bucket
	if bucket == "" {
		bucket = DefaultBucket
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "chain-watcher state: last fully published block and recent blocks per chain, and what was published from them",
		// A few old states help an operator see how the watcher moved.
		History:        8,
		Storage:        jetstream.FileStorage,
		Replicas:       max(cfg.Replicas, 1),
		LimitMarkerTTL: markerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: declare bucket %s: %w", bucket, err)
	}
	return &Store{kv: kv, chainID: chainID, key: Key(chainID)}, nil
}

// record is the stored form of State: JSON, so `nats kv get` shows it
// plainly. block and hash are the cursor, as before reorg handling existed,
// so older states load as a cursor without recent blocks.
type record struct {
	Block     uint64      `json:"block"`
	Hash      common.Hash `json:"hash"`
	Recent    []Block     `json:"recent,omitempty"`
	Inflight  []Block     `json:"inflight,omitempty"`
	Retracted []Retracted `json:"retracted,omitempty"`
}

// Load returns the stored state; found is false when none was stored yet.
func (s *Store) Load(ctx context.Context) (st State, found bool, err error) {
	e, err := s.kv.Get(ctx, s.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		s.rev = 0
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("checkpoint: read %s: %w", s.key, err)
	}
	// The revision is kept even for a corrupt value, so that Save can
	// overwrite it once an operator has decided.
	s.rev = e.Revision()
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return State{}, true, fmt.Errorf("%w: %s revision %d: %v", ErrCorrupt, s.key, e.Revision(), err)
	}
	return State{Cursor: watch.Cursor{Block: r.Block, Hash: r.Hash}, Recent: r.Recent, Inflight: r.Inflight, Retracted: r.Retracted}, true, nil
}

// Save records st. It is a compare-and-set on the revision this Store last
// read or wrote: when another writer changed the state in between (a second
// watcher on the same chain), Save changes nothing and returns ErrConflict.
// The state may move backwards: a reorg rewinds the cursor.
func (s *Store) Save(ctx context.Context, st State) error {
	val, err := json.Marshal(record{Block: st.Cursor.Block, Hash: st.Cursor.Hash, Recent: st.Recent, Inflight: st.Inflight, Retracted: st.Retracted})
	if err != nil {
		return fmt.Errorf("checkpoint: encode state: %w", err)
	}
	var rev uint64
	if s.rev == 0 {
		rev, err = s.kv.Create(ctx, s.key, val)
	} else {
		rev, err = s.kv.Update(ctx, s.key, val, s.rev)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %s", ErrConflict, s.key)
	case err != nil:
		return fmt.Errorf("checkpoint: write %s: %w", s.key, err)
	}
	s.rev = rev
	return nil
}

// journalRecord is the stored form of a Journal: the messages as published
// (protobuf, base64 in JSON). A journal written before generations existed
// has none: generation 0.
type journalRecord struct {
	Block      uint64      `json:"block"`
	Hash       common.Hash `json:"hash"`
	Generation uint32      `json:"generation,omitempty"`
	Payments   [][]byte    `json:"payments,omitempty"`
	Debts      [][]byte    `json:"debts,omitempty"`
}

// PutJournal stores the journal of one block, replacing an earlier one of
// the same block and hash.
func (s *Store) PutJournal(ctx context.Context, j Journal) error {
	r := journalRecord{Block: j.Block, Hash: j.Hash, Generation: j.Generation}
	for _, p := range j.Payments {
		b, err := proto.Marshal(p.Proto())
		if err != nil {
			return fmt.Errorf("checkpoint: encode payment %s: %w", p.MsgID(), err)
		}
		r.Payments = append(r.Payments, b)
	}
	for _, d := range j.Debts {
		b, err := proto.Marshal(d.Proto())
		if err != nil {
			return fmt.Errorf("checkpoint: encode debt payment %s: %w", d.MsgID(), err)
		}
		r.Debts = append(r.Debts, b)
	}
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("checkpoint: encode journal of block %d: %w", j.Block, err)
	}
	key := JournalKey(s.chainID, j.Block, j.Hash)
	if _, err := s.kv.Put(ctx, key, val); err != nil {
		return fmt.Errorf("checkpoint: write %s: %w", key, err)
	}
	return nil
}

// Journal returns the journal of a block; found is false when none is
// stored (nothing was published from it, or it was purged).
func (s *Store) Journal(ctx context.Context, block uint64, hash common.Hash) (j Journal, found bool, err error) {
	key := JournalKey(s.chainID, block, hash)
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Journal{}, false, nil
	}
	if err != nil {
		return Journal{}, false, fmt.Errorf("checkpoint: read %s: %w", key, err)
	}
	var r journalRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.Block != block || r.Hash != hash {
		return Journal{}, true, fmt.Errorf("%w: %s revision %d", ErrCorrupt, key, e.Revision())
	}
	j = Journal{Block: block, Hash: hash, Generation: r.Generation}
	for _, b := range r.Payments {
		var m ledgerpb.Payment
		if err := proto.Unmarshal(b, &m); err != nil {
			return Journal{}, true, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
		}
		p, err := payment.FromProto(&m)
		if err != nil {
			return Journal{}, true, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
		}
		j.Payments = append(j.Payments, p)
	}
	for _, b := range r.Debts {
		var m ledgerpb.DebtPayment
		if err := proto.Unmarshal(b, &m); err != nil {
			return Journal{}, true, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
		}
		d, err := payment.DebtPaidFromProto(&m)
		if err != nil {
			return Journal{}, true, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
		}
		j.Debts = append(j.Debts, d)
	}
	return j, true, nil
}

// DropJournal purges the journal of a block. Purging a missing key is not
// an error.
func (s *Store) DropJournal(ctx context.Context, block uint64, hash common.Hash) error {
	key := JournalKey(s.chainID, block, hash)
	if err := s.kv.Purge(ctx, key, jetstream.PurgeTTL(markerTTL)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("checkpoint: purge %s: %w", key, err)
	}
	return nil
}
