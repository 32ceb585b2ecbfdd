package opsevents

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// clock is a clock the tests move.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func total(s Stats, t Type) (n uint64) {
	for _, v := range s.Total[t] {
		n += v
	}
	return n
}

func day(s Stats, t Type) (n uint64) {
	for _, v := range s.Last24h[t] {
		n += v
	}
	return n
}

// TestRingIsBounded: the ring keeps the newest Capacity events, newest
// first, under ids that keep counting; the counts keep every one.
func TestRingIsBounded(t *testing.T) {
	c := newClock()
	r := New(Options{Capacity: 5, Now: c.now})
	if got, newest := r.Recent(10); len(got) != 0 || newest != 0 {
		t.Fatalf("empty recorder: %v %d", got, newest)
	}
	for i := range 12 {
		r.LeaderChanged(uint64(i+1), 1, "LEADER")
		c.advance(time.Millisecond)
	}
	got, newest := r.Recent(100)
	if len(got) != 5 || newest != 12 {
		t.Fatalf("%d events, newest %d; want 5 and 12", len(got), newest)
	}
	for i, e := range got {
		if want := uint64(12 - i); e.ID != want || e.Term != want {
			t.Errorf("event %d: id %d term %d, want %d", i, e.ID, e.Term, want)
		}
		if i > 0 && !e.At.Before(got[i-1].At) {
			t.Errorf("event %d is not older than the one before it", i)
		}
	}
	if got, _ := r.Recent(2); len(got) != 2 || got[0].ID != 12 || got[1].ID != 11 {
		t.Fatalf("Recent(2): %+v", got)
	}
	if got, _ := r.Recent(0); len(got) != 0 {
		t.Fatalf("Recent(0): %d events", len(got))
	}
	s := r.Stats()
	if s.Capacity != 5 || s.Retained != 5 || s.Recorded != 12 || total(s, LeaderChanged) != 12 || s.Total[LeaderChanged][Info] != 12 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCountsByTypeSeverityAndReason, and over the last 24 hours in whole
// hours.
func TestCountsByTypeSeverityAndReason(t *testing.T) {
	c := newClock()
	r := New(Options{Now: c.now, Fold: -1})
	w := common.HexToAddress("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
	r.Refused("invalid_signature", w, common.Hash{1})
	r.Refused("overloaded", w, common.Hash{2})
	r.Rejected("payment_not_found", w, common.Hash{3})
	r.Backpressure(true, 4, 4)
	r.LeaderChanged(2, 0, "CANDIDATE")
	c.advance(25 * time.Hour) // the events above leave the 24 hours
	r.Refused("overloaded", w, common.Hash{4})
	r.Backpressure(false, 1, 4)
	r.Retracted(common.Hash{5}, w, true, false)
	r.Retracted(common.Hash{6}, w, false, true)
	r.Snapshots(SnapshotSent, 2, 3)
	r.Snapshots(SnapshotSent, 2, 0) // nothing moved
	r.WriteStalls("memtable count limit reached", 2)

	s := r.Stats()
	for typ, want := range map[Type][2]uint64{ // since start, last 24 h
		IntakeRefused: {3, 1}, ProposalRejected: {1, 0}, BackpressureOn: {1, 0}, BackpressureOff: {1, 1}, LeaderChanged: {1, 0},
		PaymentRetracted: {2, 2}, SnapshotSent: {3, 3}, WriteStall: {2, 2}, WritesBlocked: {0, 0},
	} {
		if got := [2]uint64{total(s, typ), day(s, typ)}; got != want {
			t.Errorf("%s: counted %v, want %v", typ, got, want)
		}
	}
	if s.Total[IntakeRefused][Info] != 1 || s.Total[IntakeRefused][Warn] != 2 || s.Total[LeaderChanged][Warn] != 1 ||
		s.Total[PaymentRetracted][Critical] != 1 || s.Total[PaymentRetracted][Info] != 1 || s.Last24h[IntakeRefused][Warn] != 1 {
		t.Errorf("by severity: %v", s.Total)
	}
	if got := s.ByReason[IntakeRefused]; len(got) != 2 || got["invalid_signature"] != 1 || got["overloaded"] != 2 {
		t.Errorf("refusals by reason %v", got)
	}
	if got := s.ByReason[PaymentRetracted]; got[AfterCommit] != 1 || got[BeforeCommit] != 1 {
		t.Errorf("retractions by reason %v", got)
	}
	if got := s.ByReason[WriteStall]; got["memtable count limit reached"] != 2 {
		t.Errorf("stalls by reason %v", got)
	}
	if !s.LastAt[IntakeRefused].Equal(c.now()) || !s.LastAt[WritesBlocked].IsZero() {
		t.Errorf("last at %v", s.LastAt)
	}

	a := s.API()
	if a.Total != 14 || a.Last24h != 9 || a.BySeverity["info"]+a.BySeverity["warn"]+a.BySeverity["critical"] != 14 ||
		a.BySeverity24h["critical"] != 1 || len(a.ByType) != int(numTypes) || a.ByType["intake.refused"].Total != 3 ||
		a.ByType["gc.writes_blocked"].LastAt != nil || a.ByType["gc.writes_blocked"].ByReason == nil {
		t.Errorf("rendered stats %+v", a)
	}

	c.advance(24 * time.Hour)
	if s := r.Stats(); day(s, IntakeRefused) != 0 || total(s, IntakeRefused) != 3 {
		t.Errorf("a day later: last 24 h %d, total %d", day(s, IntakeRefused), total(s, IntakeRefused))
	}
}

// TestBurstsAreFolded: refusals of one reason within Fold of the last kept
// one are counted and folded into the next kept one; another reason keeps
// its own pace.
func TestBurstsAreFolded(t *testing.T) {
	c := newClock()
	r := New(Options{Now: c.now, Fold: time.Second})
	for i := range 10 {
		r.Refused("rate_limited", common.Address{}, common.Hash{byte(i)})
	}
	r.Refused("invalid_signature", common.Address{}, common.Hash{})
	got, _ := r.Recent(10)
	if len(got) != 2 || got[1].Reason != "rate_limited" || got[1].Count != 1 || got[0].Reason != "invalid_signature" {
		t.Fatalf("a burst: %+v", got)
	}
	c.advance(999 * time.Millisecond)
	r.Refused("rate_limited", common.Address{}, common.Hash{})
	c.advance(time.Millisecond)
	r.Refused("rate_limited", common.Address{}, common.Hash{0xee})
	got, _ = r.Recent(10)
	if len(got) != 3 || got[0].Count != 11 || got[0].ProposalID != (common.Hash{0xee}) ||
		!strings.HasSuffix(got[0].Message(), "(11 occurrences)") {
		t.Fatalf("after the fold interval: %+v", got[0])
	}
	if s := r.Stats(); s.ByReason[IntakeRefused]["rate_limited"] != 12 || s.Folded != 10 || s.Recorded != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// TestBlockedWalletsAreTransitions: a wallet's writes blocked is an event
// once, until they are allowed again.
func TestBlockedWalletsAreTransitions(t *testing.T) {
	r := New(Options{})
	a, b := common.Address{0xa}, common.Address{0xb}
	r.WritesAllowed(a) // never blocked: nothing
	r.WritesBlocked(a, 120_000_000, 100_000_000)
	r.WritesBlocked(a, 130_000_000, 100_000_000)
	r.WritesAllowed(b)
	r.WritesAllowed(a)
	r.WritesAllowed(a)
	r.WritesBlocked(a, 100_000_000, 100_000_000)
	got, _ := r.Recent(10)
	var seen []string
	for _, e := range got {
		seen = append(seen, e.Type.String()+" "+e.Wallet.Hex())
	}
	if want := []string{"gc.writes_blocked " + a.Hex(), "gc.writes_unblocked " + a.Hex(), "gc.writes_blocked " + a.Hex()}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", seen, want)
	}
	if m := got[2].Message(); m != "writes of "+strings.ToLower(a.Hex())+" are blocked: executed GC debt 120.00 is at or above its limit 100.00" {
		t.Errorf("message %q", m)
	}
	if e := got[2].API(); e.Type != "gc.writes_blocked" || e.Severity != "warn" || e.Attributes.ExecutedDebt != "120.00" ||
		e.Attributes.Limit != "100.00" || e.Attributes.Wallet != strings.ToLower(a.Hex()) || e.Count != 1 {
		t.Errorf("rendered %+v", e)
	}
}

// TestReasonsAreBounded: past maxReasons a type counts the rest as other.
func TestReasonsAreBounded(t *testing.T) {
	r := New(Options{Fold: -1})
	for i := range maxReasons + 10 {
		r.Refused("reason_"+strconv.Itoa(i), common.Address{}, common.Hash{})
	}
	s := r.Stats()
	if n := len(s.ByReason[IntakeRefused]); n != maxReasons+1 || s.ByReason[IntakeRefused][otherReason] != 10 {
		t.Fatalf("%d reasons, other %d", n, s.ByReason[IntakeRefused][otherReason])
	}
	if got, _ := r.Recent(1); got[0].Reason != otherReason {
		t.Fatalf("the event names %q", got[0].Reason)
	}
}

// TestChangedWakesWaiters: a waiter is woken by the next kept event, not by
// a folded one.
func TestChangedWakesWaiters(t *testing.T) {
	c := newClock()
	r := New(Options{Now: c.now})
	r.Refused("rate_limited", common.Address{}, common.Hash{})
	ch := r.Changed()
	r.Refused("rate_limited", common.Address{}, common.Hash{}) // folded
	select {
	case <-ch:
		t.Fatal("woken by a folded occurrence")
	default:
	}
	r.Backpressure(true, 2, 2)
	select {
	case <-ch:
	default:
		t.Fatal("not woken by a kept event")
	}
}

// TestConcurrentUse records from many goroutines while others read; run
// with -race. Every occurrence is counted once, ids are unique and the ring
// stays at its bound.
func TestConcurrentUse(t *testing.T) {
	r := New(Options{Capacity: 64})
	const writers, each = 8, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, _ := r.Recent(64)
				for i := 1; i < len(got); i++ {
					if got[i].ID >= got[i-1].ID {
						t.Errorf("ids out of order: %d after %d", got[i].ID, got[i-1].ID)
						return
					}
				}
				_ = r.Stats().API()
			}
		})
	}
	for w := range writers {
		wg.Go(func() {
			wallet := common.Address{byte(w)}
			for i := range each {
				r.Refused("rate_limited", wallet, common.Hash{})
				r.Rejected("payment_not_found", wallet, common.Hash{})
				r.Backpressure(i%2 == 0, i, each)
				if i%50 == 0 {
					r.WritesBlocked(wallet, 2, 1)
					r.WritesAllowed(wallet)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	s := r.Stats()
	if total(s, IntakeRefused) != writers*each || total(s, ProposalRejected) != writers*each ||
		total(s, BackpressureOn)+total(s, BackpressureOff) != writers*each || total(s, WritesBlocked) != writers*each/50 ||
		total(s, WritesUnblocked) != writers*each/50 {
		t.Fatalf("counted %v", s.Total)
	}
	if s.ByReason[IntakeRefused]["rate_limited"] != writers*each || s.Retained != 64 {
		t.Fatalf("stats %+v", s)
	}
	// Kept events plus folded occurrences are every occurrence.
	var occurrences uint64
	for _, typ := range Types() {
		occurrences += total(s, typ)
	}
	if s.Recorded+s.Folded > occurrences || s.Recorded < writers*each {
		t.Fatalf("recorded %d, folded %d, occurrences %d", s.Recorded, s.Folded, occurrences)
	}
}

// TestRefusalAllocatesNothing: the intake path of a refusal whose event is
// folded allocates nothing.
func TestRefusalAllocatesNothing(t *testing.T) {
	r := New(Options{Fold: time.Hour})
	w, id := common.Address{1}, common.Hash{2}
	r.Refused("rate_limited", w, id)
	if n := testing.AllocsPerRun(1000, func() { r.Refused("rate_limited", w, id) }); n != 0 {
		t.Fatalf("%.1f allocations per refusal", n)
	}
	r.WritesBlocked(common.Address{9}, 2, 1)
	if n := testing.AllocsPerRun(1000, func() { r.WritesAllowed(w) }); n != 0 {
		t.Fatalf("%.1f allocations per allowed write", n)
	}
}

func TestMessages(t *testing.T) {
	w := common.HexToAddress("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
	for _, c := range []struct {
		e    Event
		want string
	}{
		{Event{Type: LeaderChanged, Term: 3, Leader: 2, Role: "FOLLOWER"}, "validator-2 leads term 3; this validator is follower"},
		{Event{Type: LeaderChanged, Term: 4, Role: "CANDIDATE"}, "no leader known in term 4; this validator is candidate"},
		{Event{Type: BackpressureOn, InFlight: 2048, Ceiling: 2048}, "backpressure on: 2048 proposals in flight, at max_pending_messages 2048; decided proposals wait"},
		{Event{Type: IntakeRefused, Reason: "invalid_signature", Count: 1}, "a proposal was refused at intake: invalid_signature"},
		{Event{Type: SnapshotSent, Peer: 3, Count: 2}, "a raft snapshot was sent to validator-3 (2 occurrences)"},
		{Event{Type: WritesUnblocked, Wallet: w}, "writes of 0x70997970c51812dc3a010c7d01b50e0d17dc79c8 are no longer blocked by GC debt"},
		{Event{Type: PaymentRetracted, Reason: AfterCommit}, "a chain reorganization took back the payment of a committed proposal; the proposal is marked payment_orphaned"},
	} {
		if got := c.e.Message(); got != c.want {
			t.Errorf("%s: %q, want %q", c.e.Type, got, c.want)
		}
	}
	e := Event{ID: 7, Type: LeaderChanged, Severity: Warn, Term: 4, Role: "CANDIDATE", Count: 1}.API()
	if e.ID != 7 || e.Severity != "warn" || e.Attributes.Term == nil || *e.Attributes.Term != 4 || e.Attributes.Leader == nil ||
		*e.Attributes.Leader != 0 || e.Attributes.Wallet != "" || e.Attributes.InFlight != nil {
		t.Errorf("rendered %+v", e)
	}
}

// BenchmarkRefused is the intake path of a refusal under load: most are
// folded into the next kept event.
func BenchmarkRefused(b *testing.B) {
	r := New(Options{})
	w, id := common.Address{1}, common.Hash{2}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Refused("rate_limited", w, id)
		}
	})
}
