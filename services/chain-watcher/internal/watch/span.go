package watch

// DefaultGrowAfter is how many consecutive full-span queries must pass
// before the span doubles again.
const DefaultGrowAfter = 4

// Span is the number of blocks the next eth_getLogs query asks for. It
// starts at the maximum, halves when the provider refuses a range as too
// large (too many blocks, results or bytes, or too slow), and doubles back
// towards the maximum after growAfter consecutive queries that used the
// whole span passed: a dense stretch of the chain shrinks it, a sparse one
// lets it grow again. It is deterministic: the same outcomes give the same
// sizes. Not safe for concurrent use.
type Span struct {
	max, size uint64
	growAfter int
	streak    int
}

// NewSpan returns a span of maxSize blocks (at least 1) that grows back after
// growAfter passes in a row (at least 1).
func NewSpan(maxSize uint64, growAfter int) *Span {
	limit := max(maxSize, 1)
	return &Span{max: limit, size: limit, growAfter: max(growAfter, 1)}
}

// Size is the number of blocks to ask for next.
func (s *Span) Size() uint64 { return s.size }

// Max is the largest size.
func (s *Span) Max() uint64 { return s.max }

// Refused records that a query of asked blocks was refused as too large.
// The span becomes half of what was asked (a range cut short by the head
// may be smaller than the span), at least 1. It returns false when asked
// was a single block already: there is nothing smaller to try.
func (s *Span) Refused(asked uint64) bool {
	s.streak = 0
	if asked <= 1 {
		s.size = 1
		return false
	}
	s.size = min(s.size, asked/2)
	return true
}

// Passed records that a query of asked blocks was answered. Only a query
// that used the whole span counts towards growing: short ranges at the head
// say nothing about what the provider accepts. It returns true when the
// span grew.
func (s *Span) Passed(asked uint64) bool {
	if asked < s.size || s.size == s.max {
		return false
	}
	s.streak++
	if s.streak < s.growAfter {
		return false
	}
	s.streak = 0
	s.size = min(s.max, 2*s.size)
	return true
}
