package storage

import (
	"errors"
	"fmt"
)

// LocalValue is one key of the local namespace (LocalPrefix): kept durably
// by this validator for itself, never replicated, outside the state hash
// and snapshots. A value is replaced whole by one Pebble write, so a crash
// leaves the old value or the new one.
type LocalValue struct {
	db  *DB
	key string
}

// PaymentCheckpoint is where the payment index keeps its checkpoint.
func (d *DB) PaymentCheckpoint() LocalValue { return LocalValue{db: d, key: PaymentCheckpointKey} }

// PublicURL is where the public URL the operator set is kept
// (docs/adr/0038).
func (d *DB) PublicURL() LocalValue { return LocalValue{db: d, key: PublicURLKey} }

// Load returns the value; nil, nil when there is none.
func (v LocalValue) Load() ([]byte, error) {
	b, err := v.db.Get([]byte(v.key))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return b, err
}

// Save replaces the value, durably.
func (v LocalValue) Save(data []byte) error {
	if err := v.db.pdb.Set([]byte(v.key), data, v.db.durable); err != nil {
		return fmt.Errorf("storage: saving %s: %w", v.key, err)
	}
	return nil
}
