package storage

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The store format.
//
// The key layout (keys.go) and the stored messages are read in place: a
// data directory written with another layout would be misread, not
// refused, unless the directory says which layout it holds. Open writes
// StoreFormat into a new, empty store and refuses any other: a store that
// holds keys but no format key was written before the format was recorded
// (format 1), one with a different number by an older or a newer build.
//
// The key is local (LocalPrefix): snapshots carry StatePrefix only, so
// restoring one replaces the state and keeps the format of the store it
// is restored into, which is this build's (Open checked it).

// StoreFormat is the store format this build writes and reads. Bump it
// whenever the layout of any namespace changes in a way an earlier build
// would misread, and say what changed in formatName.
const StoreFormat = 2

// formatName says what each store format is, for the refusal's message.
func formatName(format uint64) string {
	switch format {
	case 1:
		return "no format key: a build before segment generations, whose segment keys had no part"
	case 2:
		return "segment generations (ADR 0033): segment keys s/g/<index:8><part:4>, state hash v9"
	}
	if format > StoreFormat {
		return "written by a newer build than this one"
	}
	return "no build writes it: the directory is damaged"
}

// ErrStoreFormat is returned by Open for a store written in another format
// than StoreFormat.
var ErrStoreFormat = errors.New("storage: data directory holds another store format")

// checkFormat writes StoreFormat into an empty store, and refuses a store
// of any other format.
func checkFormat(pdb *pebble.DB, dir string) error {
	v, err := Get(pdb, []byte(StoreFormatKey))
	switch {
	case errors.Is(err, ErrNotFound):
		empty, err := isEmpty(pdb)
		if err != nil {
			return err
		}
		if !empty {
			return formatError(dir, 1)
		}
		// Synced whatever Options.NoSync says: every later write follows
		// it in the WAL, so no crash keeps data without its format.
		if err := pdb.Set([]byte(StoreFormatKey), PutUint64(StoreFormat), pebble.Sync); err != nil {
			return fmt.Errorf("storage: recording the store format: %w", err)
		}
		return nil
	case err != nil:
		return err
	}
	format, ok := Uint64(v)
	if !ok {
		return fmt.Errorf("%w: %s: the format key %q holds %d bytes, want 8; the directory is damaged: "+
			"replace this validator (docs/runbooks/membership.md, \"Replace a validator\"), or restore a backup", ErrStoreFormat, dir, StoreFormatKey, len(v))
	}
	if format != StoreFormat {
		return formatError(dir, format)
	}
	return nil
}

func formatError(dir string, format uint64) error {
	// A wiped directory must not come back under its old raft id (it
	// forgot what it acknowledged): the way back is a replacement.
	advice := "replace this validator by one on an empty data directory under a new id, which catches up from its peers by snapshot " +
		"(docs/runbooks/membership.md, \"Replace a validator\"), or restore a backup written in format %d"
	if format > StoreFormat {
		advice = "run the build that wrote it (or a newer one), or " + advice
	}
	return fmt.Errorf("%w: %s is in store format %d (%s); this build reads format %d (%s) only and does not convert: "+advice,
		ErrStoreFormat, dir, format, formatName(format), StoreFormat, formatName(StoreFormat), StoreFormat)
}

// isEmpty reports whether the store holds no key at all.
func isEmpty(r pebble.Reader) (bool, error) {
	it, err := r.NewIter(nil)
	if err != nil {
		return false, err
	}
	found := it.First()
	return !found, errors.Join(it.Error(), it.Close())
}
