package state

// Event retention (ADR 0023)
//
// Every batch entry prunes the oldest events once they are outside the
// window: older than the window before the entry's sealed_at_ms, or beyond
// the newest maximum. Everything comes from the entry and the state: the
// leader's clock and its retention settings are written into the batch
// (event_window_ms, event_max), and the event counter is state. Nothing
// comes from the local clock or configuration, so every validator deletes
// the same events at the same index, and the deletes are part of the state
// hash like any other mutation. Changing the settings takes effect with the
// batches of the leader that has them.
//
// An entry deletes at most maxPrunePerEntry events, so that lowering the
// settings on a large history spreads the work over the following batches
// instead of stalling one apply; it is well above what one batch emits, so
// the window still holds in steady state.

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// Retention defaults (ADR 0023).
const (
	DefaultEventWindow = 72 * time.Hour
	DefaultMaxEvents   = 1_000_000
)

// maxPrunePerEntry bounds the events one entry deletes. It is part of the
// replicated format: changing it changes which entry deletes what.
const maxPrunePerEntry = 4096

// EventRetention is how much event history the state keeps, as a batch
// carries it. Zero fields take the defaults.
type EventRetention struct {
	// Window keeps events sealed at most this long before the newest batch.
	Window time.Duration
	// MaxEvents keeps at most this many of the newest events.
	MaxEvents uint64
}

func (r EventRetention) withDefaults() EventRetention {
	if r.Window <= 0 {
		r.Window = DefaultEventWindow
	}
	if r.MaxEvents == 0 {
		r.MaxEvents = DefaultMaxEvents
	}
	return r
}

// RetentionOf is the retention a batch carries.
func RetentionOf(b *ledgerpb.ProposalBatch) EventRetention {
	return EventRetention{Window: time.Duration(b.GetEventWindowMs()) * time.Millisecond, MaxEvents: b.GetEventMax()}.withDefaults()
}

// pruneEvents deletes, oldest first, the events outside the retention window
// the batch carries, as of its sealing time.
func (a *applier) pruneEvents(batch *ledgerpb.ProposalBatch) error {
	retention, sealedAtMs := RetentionOf(batch), batch.GetSealedAtMs()
	first, last := a.meta.firstEvent, a.meta.lastEvent
	if first > last {
		return nil
	}
	var excess uint64
	if kept := last - first + 1; kept > retention.MaxEvents {
		excess = kept - retention.MaxEvents
	}
	cutoff := sealedAtMs - retention.Window.Milliseconds()
	if excess == 0 && cutoff <= 0 {
		return nil
	}
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: storage.EventKey(first), UpperBound: storage.EventKey(last + 1)})
	if err != nil {
		return err
	}
	var (
		keys [][]byte
		ev   ledgerpb.Event
		next = first
	)
	for ok := it.First(); ok && len(keys) < maxPrunePerEntry; ok = it.Next() {
		k := it.Key()
		id, _ := storage.Uint64(k[len(k)-8:])
		if uint64(len(keys)) >= excess {
			if err := proto.Unmarshal(it.Value(), &ev); err != nil {
				_ = it.Close()
				return fmt.Errorf("%w: event %d: %v", ErrCorruptState, id, err)
			}
			if ev.GetTimestamp() >= cutoff {
				break
			}
		}
		keys = append(keys, append([]byte(nil), k...))
		next = id + 1
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, k := range keys {
		if err := a.mut.delete(k); err != nil {
			return err
		}
	}
	a.meta.firstEvent = next
	return nil
}

// firstEventID finds the oldest stored event: its id, or last+1 when no
// event is kept. It runs when the state is opened or restored; Apply keeps
// it up to date after that.
func firstEventID(r pebble.Reader, last uint64) (uint64, error) {
	lower, upper := storage.EventBounds()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.First() {
		return last + 1, it.Error()
	}
	id, ok := storage.Uint64(it.Key()[len(lower):])
	if !ok {
		return 0, fmt.Errorf("%w: event key %x", ErrCorruptState, it.Key())
	}
	return id, nil
}
