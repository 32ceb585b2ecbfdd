package payment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// MaxPendingPayments bounds the payments a WatcherStatus lists: the value
// must stay well under the NATS message size however busy the contract is,
// and an operator needs the newest payments, not all of them.
const MaxPendingPayments = 256

// MaxStatusBytes bounds the wire form a consumer accepts: 256 payments of
// about 600 bytes each, with room to spare, and far below NATS' 1 MiB.
const MaxStatusBytes = 512 << 10

// StatusKey is the key of a chain's status in the chain-watcher's key-value
// bucket (next to its checkpoint, cursor-<chainId>).
func StatusKey(chainID uint64) string { return fmt.Sprintf("status-%d", chainID) }

// ErrMalformedStatus is returned for a status that does not decode or whose
// figures contradict each other.
var ErrMalformedStatus = errors.New("malformed watcher status")

// StatusBlock is a block by number and hash.
type StatusBlock struct {
	Number uint64      `json:"number"`
	Hash   common.Hash `json:"hash"`
}

// WatcherStatus is the chain as the chain-watcher last saw it and where it
// is: the head, the finalized and safe blocks, its cursor, and the payments
// of the blocks it has not published yet. It is observability, not a
// record: only the latest value matters, and consumers never derive
// replicated state from it.
type WatcherStatus struct {
	ChainID  uint64         `json:"chainId"`
	Contract common.Address `json:"contract"`
	// Head is the chain's head block; HeadTimeS its timestamp, unix seconds.
	Head      StatusBlock `json:"head"`
	HeadTimeS uint64      `json:"headTime"`
	// Finalized is the chain's finalized block; nil when the endpoint does
	// not answer the tag.
	Finalized *uint64 `json:"finalizedBlock,omitempty"`
	// Safe is the newest block the watcher may read: head - Confirmations,
	// or the finalized block when it follows finality and that is higher.
	Safe          uint64 `json:"safeBlock"`
	Confirmations uint64 `json:"confirmations"`
	// Cursor is the last block whose payments are all in the stream; nil
	// before the watcher has one.
	Cursor *StatusBlock `json:"cursor,omitempty"`
	// PendingFrom..Head are the blocks whose payments Pending lists: the
	// blocks above the cursor (or the safe block), the newest ones when
	// there are many. Pending is in chain order; PendingTruncated says that
	// more than MaxPendingPayments were seen and the oldest were left out.
	PendingFrom      uint64           `json:"pendingFrom"`
	Pending          []PendingPayment `json:"pending"`
	PendingTruncated bool             `json:"pendingTruncated,omitempty"`
	// ObservedAtMs is when the watcher read these figures, unix ms.
	ObservedAtMs int64 `json:"observedAtMs"`
}

// PendingPayment is a ProposalPaid log the watcher has seen on chain and
// not published yet (too few confirmations, or not reached yet).
type PendingPayment struct {
	TxHash        common.Hash    `json:"txHash"`
	ProposalID    common.Hash    `json:"proposalId"`
	BlockNumber   uint64         `json:"blockNumber"`
	BlockHash     common.Hash    `json:"blockHash"`
	LogIndex      uint           `json:"logIndex"`
	Confirmations uint64         `json:"confirmations"`
	Payer         common.Address `json:"payer"`
	Amount        *big.Int       `json:"amount"` // the token's smallest unit, a JSON number
	Class         Class          `json:"class"`  // contract enum
	Token         Token          `json:"token"`  // contract enum
	TimestampS    uint64         `json:"timestamp"`
}

// PendingFromPaid is the pending form of a decoded log, confirmations
// counted from head.
func PendingFromPaid(p ProposalPaid, head uint64) PendingPayment {
	return PendingPayment{TxHash: p.TxHash, ProposalID: p.ProposalID, BlockNumber: p.BlockNumber, BlockHash: p.BlockHash,
		LogIndex: p.LogIndex, Confirmations: head - min(head, p.BlockNumber), Payer: p.Payer, Amount: p.Amount,
		Class: p.Class, Token: p.Token, TimestampS: p.Timestamp}
}

// maxAmount is the largest uint256: the contract's amount type.
var maxAmount = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// Validate checks what a consumer relies on: one chain, blocks that agree
// with each other, and a bounded, ordered list of well-formed payments.
func (s WatcherStatus) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrMalformedStatus}, args...)...)
	}
	switch {
	case s.ChainID == 0:
		return bad("no chain id")
	case s.Head.Hash == (common.Hash{}):
		return bad("no head hash")
	case s.Safe > s.Head.Number:
		return bad("safe block %d above the head %d", s.Safe, s.Head.Number)
	case s.Finalized != nil && *s.Finalized > s.Head.Number:
		return bad("finalized block %d above the head %d", *s.Finalized, s.Head.Number)
	case s.PendingFrom > 0 && s.PendingFrom-1 > s.Head.Number:
		return bad("pending blocks from %d above the head %d", s.PendingFrom, s.Head.Number)
	case len(s.Pending) > MaxPendingPayments:
		return bad("%d pending payments, at most %d", len(s.Pending), MaxPendingPayments)
	case s.ObservedAtMs <= 0:
		return bad("no observation time")
	}
	// A cursor above the head is possible (the head was read from a
	// lagging endpoint), so it is not refused.
	for i, p := range s.Pending {
		switch {
		case p.BlockNumber < s.PendingFrom || p.BlockNumber > s.Head.Number:
			return bad("pending payment %d in block %d, outside %d..%d", i, p.BlockNumber, s.PendingFrom, s.Head.Number)
		case p.Confirmations != s.Head.Number-p.BlockNumber:
			return bad("pending payment %d has %d confirmations, its block %d is %d below the head", i, p.Confirmations,
				p.BlockNumber, s.Head.Number-p.BlockNumber)
		case p.TxHash == (common.Hash{}) || p.BlockHash == (common.Hash{}):
			return bad("pending payment %d has no transaction or block hash", i)
		case p.Amount == nil || p.Amount.Sign() < 0 || p.Amount.Cmp(maxAmount) > 0:
			return bad("pending payment %d amount is not a uint256", i)
		case !p.Class.Valid() || !p.Token.Valid():
			return bad("pending payment %d class %d or token %d unknown", i, p.Class, p.Token)
		}
		if i > 0 {
			q := s.Pending[i-1]
			if p.BlockNumber < q.BlockNumber || p.BlockNumber == q.BlockNumber && p.LogIndex <= q.LogIndex {
				return bad("pending payments out of chain order at %d", i)
			}
			if p.BlockNumber == q.BlockNumber && p.BlockHash != q.BlockHash {
				return bad("block %d under two hashes", p.BlockNumber)
			}
		}
	}
	return nil
}

// Encode returns the wire form (JSON, so that `nats kv get` shows it
// plainly) of a valid status.
func (s WatcherStatus) Encode() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Pending == nil {
		s.Pending = []PendingPayment{}
	}
	return json.Marshal(s)
}

// DecodeWatcherStatus parses and validates the wire form: at most
// MaxStatusBytes, one JSON object, numbers that fit their fields, hashes of
// their exact length. Unknown fields are ignored, so that a newer watcher
// may add some without blinding older validators.
func DecodeWatcherStatus(data []byte) (WatcherStatus, error) {
	if len(data) > MaxStatusBytes {
		return WatcherStatus{}, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformedStatus, len(data), MaxStatusBytes)
	}
	var s WatcherStatus
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return WatcherStatus{}, fmt.Errorf("%w: %w", ErrMalformedStatus, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return WatcherStatus{}, fmt.Errorf("%w: data after the object", ErrMalformedStatus)
	}
	if err := s.Validate(); err != nil {
		return WatcherStatus{}, err
	}
	if s.Pending == nil {
		s.Pending = []PendingPayment{}
	}
	return s, nil
}

// Same reports whether two statuses say the same but for when they were
// observed: a watcher writes a status only when it changed.
func (s WatcherStatus) Same(o WatcherStatus) bool {
	s.ObservedAtMs, o.ObservedAtMs = 0, 0
	a, errA := json.Marshal(s)
	b, errB := json.Marshal(o)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// LagBlocks is how far the cursor is behind the safe block: the blocks the
// watcher could have published and has not. 0 when caught up, whatever the
// confirmations; nil without a cursor.
func (s WatcherStatus) LagBlocks() *uint64 {
	if s.Cursor == nil {
		return nil
	}
	lag := s.Safe - min(s.Safe, s.Cursor.Number)
	return &lag
}
