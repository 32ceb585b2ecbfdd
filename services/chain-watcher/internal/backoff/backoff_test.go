package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := Delay(p, i); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %s, want %s", i, got, w*time.Millisecond)
		}
	}
	// No cap: doubling stops before it overflows.
	if got := Delay(Policy{Initial: time.Second}, 200); got <= 0 {
		t.Errorf("uncapped Delay(200) = %s, overflowed", got)
	}
	if got := Delay(Policy{Initial: -time.Second, Max: time.Second}, 3); got != 0 {
		t.Errorf("negative initial: %s", got)
	}
}

func TestJitterShortensWithinBounds(t *testing.T) {
	rs := []float64{0, 0.5, 0.999, 7, -1} // out-of-range values are clamped
	i := 0
	b := New(Policy{Initial: time.Second, Max: 4 * time.Second, Jitter: 0.5}, func() float64 { r := rs[i%len(rs)]; i++; return r })
	want := []time.Duration{
		time.Second,                               // r=0
		2*time.Second - time.Second/2,             // r=0.5: 2s - 0.5*2s*0.5
		4*time.Second - time.Duration(0.4995*4e9), // r=0.999
		4*time.Second - 2*time.Second,             // r clamped to 1
		4 * time.Second,                           // r clamped to 0
	}
	for k, w := range want {
		if got := b.Next(); got != w {
			t.Errorf("wait %d = %s, want %s", k, got, w)
		}
	}
	if b.Attempts() != len(want) {
		t.Errorf("attempts %d", b.Attempts())
	}
	b.Reset()
	if got := b.Next(); got != time.Second {
		t.Errorf("after Reset: %s", got)
	}
}

func TestDefaultRandStaysInBounds(t *testing.T) {
	b := New(Policy{Initial: time.Second, Max: time.Second, Jitter: 1}, nil)
	for range 1000 {
		if d := b.Next(); d < 0 || d > time.Second {
			t.Fatalf("wait %s outside [0, 1s]", d)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not return at once")
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
