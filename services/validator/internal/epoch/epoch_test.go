package epoch

import (
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
	c := NewChain(DefaultLength, clock)
	if want := uint64(now.Unix()) / 384; c.Current() != want {
		t.Fatalf("chain clock %d, want %d", c.Current(), want)
	}
}
