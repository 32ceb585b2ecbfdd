package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

func getWalletStats(r pebble.Reader, wallet []byte) (*ledgerpb.WalletStats, error) {
	if len(wallet) != 20 {
		return nil, nil
	}
	v, err := storage.Get(r, storage.WalletStatsKey([20]byte(wallet)))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ws := &ledgerpb.WalletStats{}
	if err := proto.Unmarshal(v, ws); err != nil {
		return nil, fmt.Errorf("%w: wallet stats %x: %v", ErrCorruptState, wallet, err)
	}
	return ws, nil
}

// countWallet updates a wallet's figures after a committed write (write
// true, at and path set) or delete, which added created live nodes and
// removed removed ones.
func (a *applier) countWallet(wallet []byte, write bool, created, removed uint64, atMs int64, path string) error {
	ws, err := getWalletStats(a.b, wallet)
	if err != nil {
		return err
	}
	if ws == nil {
		ws = &ledgerpb.WalletStats{Wallet: append([]byte(nil), wallet...)}
	}
	ws.Nodes = ws.GetNodes() + created - min(removed, ws.GetNodes()+created)
	if write {
		ws.Writes++
		ws.LastWriteAtMs, ws.LastWritePath = atMs, path
	} else {
		ws.Deletes++
	}
	return a.put(storage.WalletStatsKey([20]byte(wallet)), ws)
}

// WalletStats returns a wallet's content figures, nil when it never wrote.
func (m *Machine) WalletStats(wallet [20]byte) (*ledgerpb.WalletStats, error) {
	return getWalletStats(m.db.Pebble(), wallet[:])
}

// WalletNodes returns up to limit nodes of the subtree at root in key order
// (a parent before its children), after skipping offset of them, and
// whether more follow. The skip walks the keys: deep pages cost their
// offset.
func (m *Machine) WalletNodes(root string, offset, limit int) ([]*ledgerpb.Node, bool, error) {
	lower, upper := storage.SubtreeBounds(root)
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	var out []*ledgerpb.Node
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i++; i <= offset {
			continue
		}
		if len(out) == limit {
			return out, true, it.Error()
		}
		n := &ledgerpb.Node{}
		if err := proto.Unmarshal(it.Value(), n); err != nil {
			return nil, false, fmt.Errorf("%w: node %x: %v", ErrCorruptState, it.Key(), err)
		}
		out = append(out, n)
	}
	return out, false, it.Error()
}
