package sysinfo

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// Memory is how much memory the process may still take before it reaches
// the bound that applies to it, the first of:
//
//   - the Go memory limit (GOMEMLIMIT, debug.SetMemoryLimit), against the
//     memory the Go runtime holds from the OS (not counting what it
//     released back): the runtime works to stay below it;
//   - the cgroup's memory.max (v2; v1's memory.limit_in_bytes), against
//     the cgroup's current use: past it the kernel reclaims, then kills;
//   - the host's MemTotal, with MemAvailable free (/proc/meminfo).
//
// Source names which one. ok is false when none can be read.
type Memory struct {
	Limit, Free uint64
	Source      string
}

// FreeFraction is Free over Limit.
func (m Memory) FreeFraction() float64 {
	if m.Limit == 0 {
		return 0
	}
	return float64(m.Free) / float64(m.Limit)
}

// Sources of Memory.
const (
	MemoryGoLimit = "GOMEMLIMIT"
	MemoryCgroup  = "cgroup"
	MemoryHost    = "host"
)

// FreeMemory reads the process's memory bound and what is left of it.
func FreeMemory() (Memory, bool) {
	if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
		samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(samples)
		used := samples[0].Value.Uint64() - samples[1].Value.Uint64()
		return Memory{Limit: uint64(limit), Free: uint64(limit) - min(used, uint64(limit)), Source: MemoryGoLimit}, true
	}
	if m, ok := cgroupMemory(); ok {
		return m, true
	}
	return hostMemory()
}
