package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
)

// KeySpaceBytes is the disk a key space takes.
type KeySpaceBytes struct {
	Name  string
	Bytes uint64
}

// KeySpaceUsage estimates the disk each of KeySpaces takes, in tables and
// the blob file values they reference, and adds "otherState" for the
// replicated state outside them. Unflushed writes are not counted (they
// are in the WAL), and a table partly in a key space counts its data
// blocks that overlap it: the figures are estimates at block granularity.
func (d *DB) KeySpaceUsage() ([]KeySpaceBytes, error) {
	estimate := func(lower, upper []byte) (uint64, error) {
		// Pebble's bounds are inclusive; no key equals a prefix end.
		n, err := d.pdb.EstimateDiskUsage(lower, upper)
		if err != nil {
			return 0, fmt.Errorf("storage: disk use of [%q, %q): %w", lower, upper, err)
		}
		return n, nil
	}
	state, err := estimate([]byte(StatePrefix), PrefixEnd([]byte(StatePrefix)))
	if err != nil {
		return nil, err
	}
	var out []KeySpaceBytes
	var inState uint64
	for _, ks := range KeySpaces() {
		n, err := estimate(ks.Lower, ks.Upper)
		if err != nil {
			return nil, err
		}
		out = append(out, KeySpaceBytes{Name: ks.Name, Bytes: n})
		if bytes.HasPrefix(ks.Lower, []byte(StatePrefix)) {
			inState += n
		}
	}
	// Block granularity can make the parts add up to more than the whole.
	return append(out, KeySpaceBytes{Name: "otherState", Bytes: state - min(state, inState)}), nil
}

// SnapshotFiles counts the files in the raft snapshot directory and their
// bytes (the storage snapshot's raft figures).
func (d *DB) SnapshotFiles() (files int, size uint64, err error) {
	dir := d.SnapshotDir()
	names, err := d.FS().List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	for _, name := range names {
		info, err := d.FS().Stat(d.FS().PathJoin(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // replaced by a newer snapshot meanwhile
		}
		if err != nil {
			return 0, 0, err
		}
		if !info.IsDir() {
			files++
			size += uint64(info.Size())
		}
	}
	return files, size, nil
}
