package app

import (
	"testing"
	"time"
)

func TestRateMeter(t *testing.T) {
	m := newRateMeter(3)
	start := time.Unix(1000, 0)
	if m.PerSecond() != 0 {
		t.Fatal("rate without samples")
	}
	for i, v := range []uint64{0, 10, 20, 60, 100} {
		m.add(start.Add(time.Duration(i)*time.Second), v)
	}
	// window 3 keeps the last 4 samples: 10 at t=1 .. 100 at t=4.
	if got := m.PerSecond(); got != 30 {
		t.Fatalf("rate %v, want 30", got)
	}
}
