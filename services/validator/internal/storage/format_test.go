package storage

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func TestOpenRecordsTheStoreFormat(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte(StoreFormatKey)); err != nil {
		t.Fatalf("a new store has no format key: %v", err)
	} else if n, _ := Uint64(v); n != StoreFormat {
		t.Fatalf("new store format %d, want %d", n, StoreFormat)
	}
	if err := db.Pebble().Set([]byte(AppliedIndexKey), PutUint64(7), db.DurableWrites()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopening a store of this format: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeRaw writes keys into a directory without Open's format check, as an
// earlier or a later build would have.
func writeRaw(t *testing.T, dir string, kv map[string][]byte) {
	t.Helper()
	pdb, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		if err := pdb.Set([]byte(k), v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesAnotherStoreFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   map[string][]byte
		want []string // in the message
	}{
		// A segment key of the layout before generations: an index, no part.
		{"state without a format key", map[string][]byte{AppliedIndexKey: PutUint64(7), string(SegmentKey(7, 0))[:len(segmentPrefix)+8]: {1}},
			[]string{"store format 1", "this build reads format 2", "under a new id", "catches up from its peers by snapshot", "Replace a validator", "restore a backup"}},
		{"raft log only, no format key", map[string][]byte{RaftHardStateKey: {1}}, []string{"store format 1"}},
		{"a newer format", map[string][]byte{StoreFormatKey: PutUint64(StoreFormat + 1), AppliedIndexKey: PutUint64(7)},
			[]string{"store format 3", "newer build", "run the build that wrote it"}},
		{"an older recorded format", map[string][]byte{StoreFormatKey: PutUint64(1)}, []string{"store format 1"}},
		{"a damaged format key", map[string][]byte{StoreFormatKey: {2}}, []string{"holds 1 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRaw(t, dir, tc.kv)
			db, err := Open(Options{Dir: dir})
			if err == nil {
				db.Close()
				t.Fatal("Open accepted the store")
			}
			if !errors.Is(err, ErrStoreFormat) {
				t.Fatalf("Open = %v, want ErrStoreFormat", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
			// Refusing leaves the directory as it was: a second look
			// refuses the same way (nothing was written, nothing is locked).
			if _, err2 := Open(Options{Dir: dir}); !errors.Is(err2, ErrStoreFormat) {
				t.Fatalf("second Open = %v, want ErrStoreFormat", err2)
			}
		})
	}
}
