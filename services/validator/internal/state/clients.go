package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// Client registrations (ClientRegister entries, docs/adr/0038): a client id
// bound to the wallet that signed the binding, once and for good.

// MaxClientsPerWallet is how many client ids one wallet may bind. Apply
// enforces it, so it is part of the replicated format: changing it changes
// which registrations every validator stores.
const MaxClientsPerWallet = 64

// clientRegister binds op's client id to op's wallet when the id is
// unbound and the wallet holds fewer than MaxClientsPerWallet clients. A
// malformed op, an id bound already (to this wallet or another) and a
// wallet at the cap change nothing: the route tells them apart by reading
// the state afterwards. The signature was verified by the leader that
// proposed the op; it is stored as provenance.
func (a *applier) clientRegister(index uint64, op *ledgerpb.ClientRegister) error {
	id := op.GetClientId()
	if signing.CheckClientID(id) != nil || len(op.GetWallet()) != 20 || len(op.GetSignature()) != signing.SignatureLen {
		return nil
	}
	bound, err := getClientBinding(a.b, id)
	if err != nil || bound != nil {
		return err
	}
	wallet := [20]byte(op.GetWallet())
	n, err := countWalletClients(a.b, wallet, MaxClientsPerWallet)
	if err != nil || n >= MaxClientsPerWallet {
		return err
	}
	if err := a.put(storage.ClientKey(id), &ledgerpb.ClientBinding{
		ClientId: id, Wallet: wallet[:], Signature: op.GetSignature(), Index: index, AtMs: op.GetAtMs(),
	}); err != nil {
		return err
	}
	return a.mut.set(storage.WalletClientKey(wallet, id), nil)
}

func getClientBinding(r pebble.Reader, id string) (*ledgerpb.ClientBinding, error) {
	return getMessage[*ledgerpb.ClientBinding](r, storage.ClientKey(id), fmt.Sprintf("client %q", id))
}

// countWalletClients counts wallet's clients, up to limit.
func countWalletClients(r pebble.Reader, wallet [20]byte, limit int) (int, error) {
	lower, upper := storage.WalletClientBounds(wallet)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok && n < limit; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// ClientBinding is the binding of a client id, nil when it is unbound.
func (m *Machine) ClientBinding(clientID string) (*ledgerpb.ClientBinding, error) {
	return getClientBinding(m.db.Pebble(), clientID)
}

// WalletClients counts the client ids bound to wallet (at most
// MaxClientsPerWallet).
func (m *Machine) WalletClients(wallet [20]byte) (int, error) {
	return countWalletClients(m.db.Pebble(), wallet, MaxClientsPerWallet)
}

// SegmentHead is the head of the segment chain as it was right after index
// was applied: the raft index of the newest segment at or below index and
// the hash of its last part (the value SegmentHash had then). ok is false
// when no segment at or below index is held: none was written yet, or
// compaction dropped the generation that held it.
func (m *Machine) SegmentHead(index uint64) (segIndex uint64, hash [32]byte, ok bool, err error) {
	lower, upper := storage.SegmentBounds()
	if index < ^uint64(0) {
		upper = storage.SegmentKey(index+1, 0)
	}
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, hash, false, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, hash, false, it.Error()
	}
	segIndex, _, _ = storage.SegmentKeyIndex(it.Key())
	return segIndex, segmentHash(it.Value()), true, nil
}
