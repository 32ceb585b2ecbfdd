package rate

import (
	"testing"
	"time"
)

func TestMeter(t *testing.T) {
	m := NewMeter(3)
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

// TestLimiter: bursts of twice the rate, per identifier.
func TestLimiter(t *testing.T) {
	l := NewLimiter(1)
	for i := range 2 {
		if ok, err := l.Allow("a"); !ok || err != nil {
			t.Fatalf("request %d of the burst refused: %v", i, err)
		}
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("a third request at once was allowed")
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another identifier was limited by the first one's requests")
	}
}

// TestKeptFor: a view is kept at least MinReuse, and ten times its cost.
func TestKeptFor(t *testing.T) {
	if KeptFor(0) != MinReuse || KeptFor(50*time.Millisecond) != MinReuse || KeptFor(300*time.Millisecond) != 3*time.Second {
		t.Fatal("KeptFor is not max(MinReuse, 10× the cost)")
	}
}
