package sysinfo

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestFreeMemory: without a Go memory limit the bound is the cgroup's or
// the host's; with one, it is the limit, and what the runtime holds counts
// against it.
func TestFreeMemory(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	m, ok := FreeMemory()
	if !ok || m.Limit == 0 || m.Free > m.Limit || (m.Source != MemoryCgroup && m.Source != MemoryHost) {
		t.Fatalf("without GOMEMLIMIT: %+v %v", m, ok)
	}
	t.Logf("without GOMEMLIMIT: %d of %d B free (%s)", m.Free, m.Limit, m.Source)

	const limit = 1 << 40
	debug.SetMemoryLimit(limit)
	m, ok = FreeMemory()
	if !ok || m.Source != MemoryGoLimit || m.Limit != limit || m.Free >= limit || m.FreeFraction() <= 0.99 {
		t.Fatalf("with GOMEMLIMIT %d: %+v %v", limit, m, ok)
	}
	// A limit below what the runtime holds leaves nothing free.
	debug.SetMemoryLimit(1)
	if m, ok = FreeMemory(); !ok || m.Free != 0 || m.FreeFraction() != 0 {
		t.Fatalf("with a 1-byte GOMEMLIMIT: %+v %v", m, ok)
	}
}
