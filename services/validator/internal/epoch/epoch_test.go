package epoch

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	m := NewMock(DefaultLength, clock)
	if m.Current() != MockStart || m.Finalized() != MockStart-FinalityLag {
		t.Fatalf("mock starts at %d/%d", m.Current(), m.Finalized())
	}
	now = now.Add(DefaultLength*3 + time.Second)
	if m.Current() != MockStart+3 {
		t.Fatalf("after 3 lengths: %d", m.Current())
	}
	m.Advance(5)
	if m.Current() != MockStart+8 {
		t.Fatalf("after advance: %d", m.Current())
	}
	if m.Offset() != 5 || m.NextIn() != DefaultLength-time.Second {
		t.Fatalf("offset %d, next in %v", m.Offset(), m.NextIn())
	}
	if !m.SetOffset(-10) || m.Current() != MockStart+3-10 || m.Offset() != -10 {
		t.Fatalf("after offset -10: %d (offset %d)", m.Current(), m.Offset())
	}
	if m.SetOffset(-MockStart-1) || m.Offset() != -10 {
		t.Fatalf("an offset below epoch 0 was taken: %d", m.Offset())
	}
	c := NewChain(DefaultLength, 0, clock)
	if want := uint64(now.Unix()) / 384; c.Current() != want {
		t.Fatalf("chain clock %d, want %d", c.Current(), want)
	}
}

// TestChainClockAdoptsUpdates: a chain clock estimates from wall time until
// the first update, then shows the chain's figures, never lower than it
// showed: a regressing figure is kept and counted, a rising one taken.
func TestChainClockAdoptsUpdates(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	c := NewChain(DefaultLength, 0, clock)
	estimate := uint64(now.Unix()) / 384
	if c.Current() != estimate || c.Finalized() != estimate-FinalityLag || c.Chain().Adopted {
		t.Fatalf("before any update: %d/%d %+v", c.Current(), c.Finalized(), c.Chain())
	}

	// The chain's figures replace the estimate, also when they are lower.
	if c.Observe(estimate-1, estimate-5) != nil || c.Current() != estimate-1 || c.Finalized() != estimate-5 {
		t.Fatalf("first update: %d/%d", c.Current(), c.Finalized())
	}
	// Wall time no longer moves the figures: the chain does.
	now = now.Add(3 * DefaultLength)
	if c.Current() != estimate-1 || c.Finalized() != estimate-5 {
		t.Fatalf("after wall time passed: %d/%d", c.Current(), c.Finalized())
	}
	steps := []struct {
		current, finalized     uint64
		ok                     bool
		wantCurrent, wantFinal uint64
	}{
		{estimate, estimate - 4, true, estimate, estimate - 4},          // both rise
		{estimate, estimate - 4, true, estimate, estimate - 4},          // a repeat
		{estimate - 2, estimate - 6, false, estimate, estimate - 4},     // both lower: ignored
		{estimate + 1, estimate - 6, false, estimate + 1, estimate - 4}, // current rises, finalized lower: kept
		{estimate + 1, estimate - 1, true, estimate + 1, estimate - 1},
		{estimate + 2, estimate + 9, true, estimate + 2, estimate + 2}, // finalized capped at current
	}
	for i, s := range steps {
		if ok := c.Observe(s.current, s.finalized) == nil; ok != s.ok || c.Current() != s.wantCurrent || c.Finalized() != s.wantFinal {
			t.Fatalf("step %d: ok %v, %d/%d, want %v %d/%d", i, ok, c.Current(), c.Finalized(), s.ok, s.wantCurrent, s.wantFinal)
		}
	}
	if st := c.Chain(); !st.Adopted || st.Updates != 7 || st.Regressions != 2 || !st.At.Equal(now) ||
		st.Current != estimate+2 || st.Finalized != estimate+2 {
		t.Fatalf("chain state %+v", st)
	}
}

// TestMockClockIgnoresUpdates: MOCK mode keeps its own clock.
func TestMockClockIgnoresUpdates(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := NewMock(DefaultLength, func() time.Time { return now })
	if m.Observe(5, 3) != nil || m.Current() != MockStart || m.Finalized() != MockStart-FinalityLag || m.Chain().Updates != 0 {
		t.Fatalf("a mock clock took an update: %d/%d %+v", m.Current(), m.Finalized(), m.Chain())
	}
	m.Advance(2)
	if m.Current() != MockStart+2 {
		t.Fatalf("after advance: %d", m.Current())
	}
}

// TestChainClockRefusesUpdatesAhead: an update further ahead of the wall
// clock than maxAhead epochs is refused whole, before the first adoption
// and after, and counted; one within the bound is taken. A forged epoch of
// 2^64-1 would otherwise hold for good.
func TestChainClockRefusesUpdatesAhead(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	c := NewChain(DefaultLength, 3, clock)
	estimate := uint64(now.Unix()) / 384
	for _, forged := range []struct{ current, finalized uint64 }{
		{math.MaxUint64, math.MaxUint64}, {estimate + 4, estimate - 2}, {estimate + 4, estimate + 4},
	} {
		if err := c.Observe(forged.current, forged.finalized); !errors.Is(err, ErrAhead) {
			t.Fatalf("Observe(%d, %d) = %v, want ErrAhead", forged.current, forged.finalized, err)
		}
	}
	if st := c.Chain(); st.Adopted || st.Ahead != 3 || st.Updates != 3 || c.Current() != estimate || c.Finalized() != estimate-FinalityLag {
		t.Fatalf("after refused updates: %d/%d %+v", c.Current(), c.Finalized(), st)
	}
	if err := c.Observe(estimate+3, estimate+1); err != nil || c.Current() != estimate+3 || c.Finalized() != estimate+1 {
		t.Fatalf("an update at the bound: %v, %d/%d", err, c.Current(), c.Finalized())
	}
	if err := c.Observe(math.MaxUint64, math.MaxUint64); !errors.Is(err, ErrAhead) || c.Current() != estimate+3 || c.Finalized() != estimate+1 {
		t.Fatalf("a forged jump after adoption: %v, %d/%d", err, c.Current(), c.Finalized())
	}
	// The bound moves with the wall clock.
	now = now.Add(2 * DefaultLength)
	if err := c.Observe(estimate+5, estimate+3); err != nil || c.Current() != estimate+5 {
		t.Fatalf("an update within the moved bound: %v, %d", err, c.Current())
	}
	if st := c.Chain(); st.Ahead != 4 || st.Regressions != 0 {
		t.Fatalf("chain state %+v", st)
	}
	if d := NewChain(DefaultLength, 0, clock); d.Observe(estimate+2+DefaultMaxAhead+1, 0) == nil {
		t.Fatal("the default bound took an update past it")
	}
}
