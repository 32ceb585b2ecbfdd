package watch

import "testing"

func TestSpanShrinksAndGrowsBack(t *testing.T) {
	s := NewSpan(2000, 3)
	if s.Size() != 2000 {
		t.Fatalf("starts at %d", s.Size())
	}
	// Refused three times: 2000 -> 1000 -> 500 -> 250.
	for _, want := range []uint64{1000, 500, 250} {
		if !s.Refused(s.Size()) || s.Size() != want {
			t.Fatalf("after a refusal: %d, want %d", s.Size(), want)
		}
	}
	// Two passes are not enough; a short range does not count; a refusal
	// in between starts the count again.
	s.Passed(250)
	s.Passed(250)
	s.Passed(10)
	if s.Size() != 250 {
		t.Fatalf("grew early: %d", s.Size())
	}
	if !s.Passed(250) || s.Size() != 500 {
		t.Fatalf("third full pass: %d, want 500", s.Size())
	}
	s.Passed(500)
	s.Passed(500)
	s.Refused(500)
	if s.Size() != 250 {
		t.Fatalf("refused at 500: %d", s.Size())
	}
	// Growing stops at the maximum, however many passes.
	for range 20 {
		s.Passed(s.Size())
	}
	if s.Size() != 2000 {
		t.Fatalf("after many passes: %d, want the maximum", s.Size())
	}
	if s.Passed(2000) {
		t.Fatal("grew beyond the maximum")
	}
}

func TestSpanRefusedShortRangeAndFloor(t *testing.T) {
	s := NewSpan(64, 1)
	// A range cut short by the head (10 blocks) was refused: half of it.
	if !s.Refused(10) || s.Size() != 5 {
		t.Fatalf("refused a 10-block range: %d, want 5", s.Size())
	}
	for s.Size() > 1 {
		s.Refused(s.Size())
	}
	if s.Refused(1) || s.Size() != 1 {
		t.Fatalf("a refused single block must report nothing smaller, size %d", s.Size())
	}
	if !s.Passed(1) || s.Size() != 2 {
		t.Fatalf("grow from 1: %d", s.Size())
	}
	if z := NewSpan(0, 0); z.Size() != 1 || z.Max() != 1 {
		t.Fatalf("zero span: %d/%d", z.Size(), z.Max())
	}
}
