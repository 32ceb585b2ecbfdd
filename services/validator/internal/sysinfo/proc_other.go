//go:build !linux

package sysinfo

// residentBytes is not reported on this platform.
func residentBytes() (*uint64, bool) { return nil, false }

// openFDs is not reported on this platform.
func openFDs() (*int, bool) { return nil, false }

// cgroupMemory is not read on this platform.
func cgroupMemory() (Memory, bool) { return Memory{}, false }

// hostMemory is not read on this platform.
func hostMemory() (Memory, bool) { return Memory{}, false }
