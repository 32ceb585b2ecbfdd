package storage

import (
	"errors"
	"io/fs"
)

// SnapshotFiles counts the files in the raft snapshot directory and their
// bytes (the storage snapshot's raft figures).
func (d *DB) SnapshotFiles() (files int, bytes uint64, err error) {
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
			bytes += uint64(info.Size())
		}
	}
	return files, bytes, nil
}
