package storage

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// walProbe is the log-data record ProbeWAL writes; recovery skips it, and
// no key holds it.
var walProbe = []byte("contentledger health probe")

// ProbeWAL writes a record to the WAL and syncs it: the deep health check
// that the disk takes synced writes now. A stalled write cannot be
// interrupted, so the caller bounds how long it waits for the answer.
func (d *DB) ProbeWAL(context.Context) (string, error) {
	if err := d.Pebble().LogData(walProbe, pebble.Sync); err != nil {
		return "", fmt.Errorf("synced WAL write: %w", err)
	}
	return "synced WAL write", nil
}
