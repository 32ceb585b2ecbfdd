// Package checkpoint stores the watcher's cursor (the last fully handled
// block and its hash) in a JetStream key-value bucket, next to the stream it
// publishes to, so that a restarted watcher, on any machine, resumes where
// the last one stopped.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// DefaultBucket is the default key-value bucket of the cursors.
const DefaultBucket = "CHAIN_WATCHER"

// maxCASAttempts bounds the compare-and-set loop of Save. Only another
// watcher writing the same key makes an attempt fail, and then the next
// read usually shows it ahead of us.
const maxCASAttempts = 8

var (
	// ErrCorrupt is returned by Load for a stored cursor that does not
	// decode. It is not replaced silently: starting over from StartBlock
	// would republish the whole history, skipping ahead would lose payments.
	ErrCorrupt = errors.New("checkpoint: stored cursor is corrupt")
	// ErrContended is returned by Save when other writers kept changing the
	// key for every attempt.
	ErrContended = errors.New("checkpoint: cursor updated concurrently")
)

// KeyValueCreator is the part of jetstream.JetStream Open uses.
type KeyValueCreator interface {
	CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error)
}

// Config says where cursors are kept.
type Config struct {
	// Bucket is the key-value bucket; empty means DefaultBucket.
	Bucket string
	// Replicas is the number of copies in a cluster; 0 means 1.
	Replicas int
}

// Store holds the cursor of one chain.
type Store struct {
	kv  jetstream.KeyValue
	key string
}

// Key is the key of a chain's cursor: one bucket serves every chain.
func Key(chainID uint64) string { return fmt.Sprintf("cursor-%d", chainID) }

// Open declares the bucket (idempotently) and returns the store of the
// chain's cursor. The bucket is file-backed; like the payments stream it is
// durable across a machine crash only on a server with sync_interval: always.
func Open(ctx context.Context, js KeyValueCreator, cfg Config, chainID uint64) (*Store, error) {
	bucket := cfg.Bucket
	if bucket == "" {
		bucket = DefaultBucket
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "chain-watcher cursors: last fully published block per chain",
		// A few old cursors help an operator see how the watcher moved.
		History:  8,
		Storage:  jetstream.FileStorage,
		Replicas: max(cfg.Replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: declare bucket %s: %w", bucket, err)
	}
	return &Store{kv: kv, key: Key(chainID)}, nil
}

// record is the stored form: JSON, so `nats kv get` shows it plainly.
type record struct {
	Block uint64      `json:"block"`
	Hash  common.Hash `json:"hash"`
}

// Load returns the stored cursor; found is false when none was stored yet.
func (s *Store) Load(ctx context.Context) (c watch.Cursor, found bool, err error) {
	c, _, found, err = s.load(ctx)
	return c, found, err
}

func (s *Store) load(ctx context.Context) (watch.Cursor, uint64, bool, error) {
	e, err := s.kv.Get(ctx, s.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return watch.Cursor{}, 0, false, nil
	}
	if err != nil {
		return watch.Cursor{}, 0, false, fmt.Errorf("checkpoint: read %s: %w", s.key, err)
	}
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		// The revision is returned so that Save can overwrite it.
		return watch.Cursor{}, e.Revision(), true, fmt.Errorf("%w: %s revision %d: %v", ErrCorrupt, s.key, e.Revision(), err)
	}
	return watch.Cursor{Block: r.Block, Hash: r.Hash}, e.Revision(), true, nil
}

// Save records c as the cursor. The cursor never moves back: when the
// stored one is at or past c (a second, hot watcher got further) Save keeps
// it and returns nil, since everything up to c is published either way. The
// write is a compare-and-set on the revision read, so two watchers cannot
// interleave a read and a write.
func (s *Store) Save(ctx context.Context, c watch.Cursor) error {
	val, err := json.Marshal(record{Block: c.Block, Hash: c.Hash})
	if err != nil {
		return fmt.Errorf("checkpoint: encode cursor: %w", err)
	}
	for range maxCASAttempts {
		cur, rev, found, err := s.load(ctx)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return err
		}
		if err == nil && found && cur.Block >= c.Block {
			return nil
		}
		if found {
			_, err = s.kv.Update(ctx, s.key, val, rev)
		} else {
			_, err = s.kv.Create(ctx, s.key, val)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
			continue // someone wrote in between: look again
		default:
			return fmt.Errorf("checkpoint: write %s: %w", s.key, err)
		}
	}
	return fmt.Errorf("%w: %s after %d attempts", ErrContended, s.key, maxCASAttempts)
}
