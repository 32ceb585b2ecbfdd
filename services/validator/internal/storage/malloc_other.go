//go:build !linux || !cgo

package storage

// MallocArenas is 0: without cgo on Linux, Pebble's memory is Go's and no
// C malloc is tuned.
const MallocArenas = 0

func trimMalloc() bool { return false }
