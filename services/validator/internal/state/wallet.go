package state

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

func getWalletStats(r pebble.Reader, wallet []byte) (*ledgerpb.WalletStats, error) {
	if len(wallet) != 20 {
		return nil, nil
	}
	return getRecentMessage[*ledgerpb.WalletStats](r, storage.WalletStatsKey([20]byte(wallet)), fmt.Sprintf("wallet stats %x", wallet))
}

// countWallet updates a wallet's figures after a committed write (write
// true, at and path set) or delete, which added created live nodes and
// removed removed ones (in the entry's cache: see flushEntryRecords).
func (a *applier) countWallet(wallet []byte, write bool, created, removed uint64, atMs int64, path string) error {
	if len(wallet) != 20 {
		return nil
	}
	if a.walletStats == nil {
		a.walletStats = map[[20]byte]*ledgerpb.WalletStats{}
	}
	ws, ok := a.walletStats[[20]byte(wallet)]
	if !ok {
		var err error
		if ws, err = getWalletStats(a.b, wallet); err != nil {
			return err
		}
		if ws == nil {
			ws = &ledgerpb.WalletStats{Wallet: append([]byte(nil), wallet...)}
		}
		a.walletStats[[20]byte(wallet)] = ws
	}
	ws.Nodes = ws.GetNodes() + created - min(removed, ws.GetNodes()+created)
	if write {
		ws.Writes++
		ws.LastWriteAtMs, ws.LastWritePath = atMs, path
	} else {
		ws.Deletes++
	}
	return nil
}

// flushEntryRecords writes the wallet figures and GC accounts the entry
// changed, accounts first, each in wallet order, and empties the caches.
// Every validator applies the same entry alike, so the writes, and the
// state hash over them, are the same everywhere.
func (a *applier) flushEntryRecords() error {
	for _, w := range sortedWallets(a.dirty) {
		if err := a.putAccount(a.accounts[w]); err != nil {
			return err
		}
	}
	for _, w := range sortedWallets(a.walletStats) {
		if err := a.put(storage.WalletStatsKey(w), a.walletStats[w]); err != nil {
			return err
		}
	}
	clear(a.accounts)
	clear(a.dirty)
	clear(a.walletStats)
	return nil
}

func sortedWallets[V any](m map[[20]byte]V) [][20]byte {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(x, y [20]byte) int { return bytes.Compare(x[:], y[:]) })
	return keys
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
