package payment

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sources of an epoch update: where its figures come from.
const (
	// EpochSourceBlockTime: current is the head block's timestamp divided
	// by the epoch length; finalized comes the same way from the chain's
	// finalized block (its epoch counts only once no later block can fall
	// in it).
	EpochSourceBlockTime = "block-time"
	// EpochSourceBlockTimeLag: current as for EpochSourceBlockTime; the
	// endpoint does not answer the finalized block, so finalized is
	// current - EpochFinalityLag.
	EpochSourceBlockTimeLag = "block-time-lag"
	// EpochSourceBeacon: a beacon node's head slot and finalized
	// checkpoint, converted to the same numbering (the slots' start times /
	// the epoch length).
	EpochSourceBeacon = "beacon"
)

// EpochFinalityLag is how many epochs finality trails the current epoch
// where the chain does not say (ADR 0022).
const EpochFinalityLag = 2

// maxEpochSource bounds the source's length: it is a short name, and part
// of the message id.
const maxEpochSource = 64

// EpochUpdate is the chain's current and finalized epoch as the
// chain-watcher observed them, published on EpochSubject as JSON.
type EpochUpdate struct {
	ChainID   uint64 `json:"chainId"`
	Current   uint64 `json:"current"`
	Finalized uint64 `json:"finalized"`
	// Source is one of the EpochSource names.
	Source string `json:"source"`
	// BlockNumber is the head block the figures were read at (block-time
	// sources), Slot the beacon head slot (beacon source); 0 when unknown.
	BlockNumber uint64 `json:"blockNumber,omitempty"`
	Slot        uint64 `json:"slot,omitempty"`
	// ObservedAtMs is when the watcher read the figures, unix milliseconds.
	ObservedAtMs int64 `json:"observedAtMs"`
}

// ErrMalformedEpochUpdate is returned for an epoch message that does not
// decode or whose figures contradict each other.
var ErrMalformedEpochUpdate = errors.New("malformed epoch update")

// Validate checks what a consumer relies on: a chain, a source, and a
// finalized epoch no later than the current one.
func (u EpochUpdate) Validate() error {
	switch {
	case u.ChainID == 0:
		return fmt.Errorf("%w: no chain id", ErrMalformedEpochUpdate)
	case !validSource(u.Source):
		return fmt.Errorf("%w: source %q is not a short name", ErrMalformedEpochUpdate, u.Source)
	case u.Finalized > u.Current:
		return fmt.Errorf("%w: finalized epoch %d after current epoch %d", ErrMalformedEpochUpdate, u.Finalized, u.Current)
	}
	return nil
}

// validSource accepts a short name of letters, digits, '-', '_' and '.':
// it goes into the message id, a NATS header.
func validSource(s string) bool {
	if s == "" || len(s) > maxEpochSource {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	})
}

// MsgID is the NATS message id of the update: <chainId>:epochs:<source>:
// <current>:<finalized>. Two watchers that see the same figures publish the
// same id, so the stream keeps one; the block and time of the observation
// are left out for that reason.
func (u EpochUpdate) MsgID() string {
	return fmt.Sprintf("%d:epochs:%s:%d:%d", u.ChainID, u.Source, u.Current, u.Finalized)
}

// Encode returns the wire form of a valid update.
func (u EpochUpdate) Encode() ([]byte, error) {
	if err := u.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(u)
}

// DecodeEpochUpdate parses and validates the wire form. Unknown fields are
// ignored, so that a newer watcher may add some.
func DecodeEpochUpdate(data []byte) (EpochUpdate, error) {
	var u EpochUpdate
	if err := json.Unmarshal(data, &u); err != nil {
		return EpochUpdate{}, fmt.Errorf("%w: %w", ErrMalformedEpochUpdate, err)
	}
	if err := u.Validate(); err != nil {
		return EpochUpdate{}, err
	}
	return u, nil
}
