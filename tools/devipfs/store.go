package devipfs

import (
	"context"
	"errors"
	"sync"

	ds "github.com/ipfs/go-datastore"
	"github.com/ipfs/go-datastore/query"
)

// ErrClosed is the error of an operation on a closed node.
var ErrClosed = errors.New("devipfs: the node is closed")

// guardedStore answers ErrClosed once closed instead of reaching a closed
// Pebble, which panics: an Add racing Close, or a request the servers'
// shutdown stopped waiting for (lifecycle.ShutdownTimeout), gets an error.
// Close waits for the operations under way.
type guardedStore struct {
	mu     sync.RWMutex
	closed bool
	ds     ds.Batching
}

var _ ds.Batching = (*guardedStore)(nil)

// do runs op unless the store is closed.
func (s *guardedStore) do(op func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return op()
}

func (s *guardedStore) Get(ctx context.Context, key ds.Key) (value []byte, err error) {
	err = s.do(func() error { value, err = s.ds.Get(ctx, key); return err })
	return value, err
}

func (s *guardedStore) Has(ctx context.Context, key ds.Key) (exists bool, err error) {
	err = s.do(func() error { exists, err = s.ds.Has(ctx, key); return err })
	return exists, err
}

func (s *guardedStore) GetSize(ctx context.Context, key ds.Key) (size int, err error) {
	err = s.do(func() error { size, err = s.ds.GetSize(ctx, key); return err })
	return size, err
}

// Query is guarded while it starts; the node queries nothing (it lists no
// keys), so results outliving Close are not a concern here.
func (s *guardedStore) Query(ctx context.Context, q query.Query) (results query.Results, err error) {
	err = s.do(func() error { results, err = s.ds.Query(ctx, q); return err })
	return results, err
}

func (s *guardedStore) Put(ctx context.Context, key ds.Key, value []byte) error {
	return s.do(func() error { return s.ds.Put(ctx, key, value) })
}

func (s *guardedStore) Delete(ctx context.Context, key ds.Key) error {
	return s.do(func() error { return s.ds.Delete(ctx, key) })
}

func (s *guardedStore) Sync(ctx context.Context, prefix ds.Key) error {
	return s.do(func() error { return s.ds.Sync(ctx, prefix) })
}

func (s *guardedStore) Batch(ctx context.Context) (ds.Batch, error) {
	var b ds.Batch
	err := s.do(func() (err error) { b, err = s.ds.Batch(ctx); return err })
	if err != nil {
		return nil, err
	}
	return &guardedBatch{Batch: b, store: s}, nil
}

// Close closes the store once the operations under way have ended.
func (s *guardedStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.ds.Close()
}

// guardedBatch commits through its store's guard; Put and Delete only fill
// the batch in memory.
type guardedBatch struct {
	ds.Batch
	store *guardedStore
}

func (b *guardedBatch) Commit(ctx context.Context) error {
	return b.store.do(func() error { return b.Batch.Commit(ctx) })
}
