// Package opsevents records a validator's operational events: what an
// operator wants to see happen, such as leader changes, backpressure, refused
// and rejected proposals, payments a chain reorganization took back, wallets
// blocked by GC debt, raft snapshots and write stalls. They are this
// validator's own observations, kept in memory and gone at restart; the
// replicated content events are state's event log, not these.
//
// A Recorder keeps the newest events in a ring and counts every occurrence
// since start and per hour over the last 24 hours, by type, severity and
// reason. See DESIGN.md for what makes it cheap on the intake path.
package opsevents

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Type is the kind of an event.
type Type uint8

// The event types. Their names (String) are what the routes publish.
const (
	LeaderChanged Type = iota
	BackpressureOn
	BackpressureOff
	IntakeRefused
	ProposalRejected
	PaymentRetracted
	WritesBlocked
	WritesUnblocked
	SnapshotSent
	SnapshotFailed
	SnapshotReceived
	WriteStall
	FeedStale
	FeedCurrent
	CompactionStarted
	CompactionFinished
	CompactionAbandoned
	numTypes
)

// Types lists every event type.
func Types() []Type {
	out := make([]Type, numTypes)
	for i := range out {
		out[i] = Type(i)
	}
	return out
}

func (t Type) String() string {
	switch t {
	case LeaderChanged:
		return "leader.changed"
	case BackpressureOn:
		return "backpressure.on"
	case BackpressureOff:
		return "backpressure.off"
	case IntakeRefused:
		return "intake.refused"
	case ProposalRejected:
		return "proposal.rejected"
	case PaymentRetracted:
		return "payment.retracted"
	case WritesBlocked:
		return "gc.writes_blocked"
	case WritesUnblocked:
		return "gc.writes_unblocked"
	case SnapshotSent:
		return "snapshot.sent"
	case SnapshotFailed:
		return "snapshot.failed"
	case SnapshotReceived:
		return "snapshot.received"
	case WriteStall:
		return "storage.write_stall"
	case FeedStale:
		return "chain.feed_stale"
	case FeedCurrent:
		return "chain.feed_current"
	case CompactionStarted:
		return "gc.compaction_started"
	case CompactionFinished:
		return "gc.compaction_finished"
	case CompactionAbandoned:
		return "gc.compaction_abandoned"
	}
	return "unknown"
}

// Severity is how much an event asks of an operator.
type Severity uint8

// The severities, mildest first.
const (
	Info Severity = iota
	Warn
	Critical
	numSeverities
)

// Severities lists every severity, mildest first.
func Severities() []Severity { return []Severity{Info, Warn, Critical} }

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warn:
		return "warn"
	case Critical:
		return "critical"
	}
	return "unknown"
}

// Reasons of a retracted payment.
const (
	BeforeCommit = "before_commit"
	AfterCommit  = "after_commit"
)

// Reasons of a stale chain feed: why held submissions would be refused
// payment_feed_stale.
const (
	// FeedNoStatus: no status from the chain-watcher yet.
	FeedNoStatus = "no_status"
	// FeedStatusOld: the chain-watcher's last status is older than its
	// staleness bound (it stopped, or cannot write).
	FeedStatusOld = "status_old"
	// FeedWatcherBehind: the chain-watcher has published payments only up
	// to a block far behind the chain's safe block.
	FeedWatcherBehind = "watcher_behind"
	// FeedIndexBehind: this validator's payment index has not read the
	// whole payment stream yet.
	FeedIndexBehind = "index_behind"
)

// Event is one kept event. Fields that do not apply to its type are zero.
type Event struct {
	ID       uint64 // this validator's sequence, from 1
	At       time.Time
	Type     Type
	Severity Severity
	// Reason is a code: the refusal or rejection reason, BeforeCommit or
	// AfterCommit, Pebble's reason for a stall, a Feed* reason.
	Reason string
	// Detail says more in words, with figures: a stale feed's age or lag,
	// why a compaction run was given up.
	Detail     string
	Wallet     common.Address
	ProposalID common.Hash
	// Term, Leader and Role: a leader change (Leader 0: none known).
	Term, Leader uint64
	Role         string
	// Peer: the other validator of a snapshot transfer.
	Peer uint64
	// InFlight and Ceiling: the sender's figures at a backpressure change.
	InFlight, Ceiling int
	// Debt and Limit: a blocked wallet's executed GC debt and its limit,
	// in micros.
	Debt, Limit uint64
	// ReMined: the chain mined a retracted payment again.
	ReMined bool
	// Run, Epoch, Steps and Reclaimed: a GC compaction run, its epoch, the
	// steps applied and the stored bytes of the segments it deleted.
	Run, Epoch, Steps, Reclaimed uint64
	// Count is how many occurrences the event stands for, at least 1.
	Count uint64
}

// Defaults of Options.
const (
	DefaultCapacity = 1000
	DefaultFold     = time.Second
)

// Bounds of what a Recorder remembers besides its ring.
const (
	// maxReasons bounds the reasons counted per type; the rest count as
	// otherReason.
	maxReasons  = 64
	otherReason = "other"
	// maxBlocked bounds the wallets remembered as blocked by GC debt.
	maxBlocked = 4096
)

// Options tune a Recorder.
type Options struct {
	// Capacity is how many events are kept; DefaultCapacity when 0.
	Capacity int
	// Fold is the least time between two kept events of one refusal or
	// rejection reason; the occurrences in between are counted and folded
	// into the next kept one. DefaultFold when 0; negative keeps every one.
	Fold time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Recorder keeps a validator's operational events. Its methods may be called
// from any goroutine.
type Recorder struct {
	now     func() time.Time
	fold    time.Duration
	started time.Time
	boot    string // this process's, in the stream ids (Boot)

	mu      sync.Mutex // the ring
	ring    []Event
	next    uint64        // the newest id; ids start at 1
	changed chan struct{} // closed at the next kept event; nil while nobody waits

	counts  [numTypes][numSeverities]atomic.Uint64
	lastAt  [numTypes]atomic.Int64 // unix ns of the latest occurrence
	folded  atomic.Uint64
	hours   [24]hour
	hoursMu sync.Mutex // rotation of hours

	// reasons and blocked are read without a lock, and replaced (never
	// changed) under their mutex: they change rarely, and are read on every
	// refusal and every write of a wallet with a GC account.
	reasonsMu sync.Mutex
	reasons   [numTypes]atomic.Pointer[map[string]*reasonState]
	blockedMu sync.Mutex
	blocked   atomic.Pointer[map[common.Address]struct{}]
}

// hour counts the occurrences of one hour.
type hour struct {
	at     atomic.Int64 // the hour counted, in hours since the Unix epoch
	counts [numTypes][numSeverities]atomic.Uint64
}

// reasonState counts one reason of one type, and folds its events.
type reasonState struct {
	count  atomic.Uint64
	kept   atomic.Int64  // unix ns of the last kept event; 0: none yet
	folded atomic.Uint64 // occurrences since then without an event
}

// New returns an empty Recorder.
func New(opts Options) *Recorder {
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultCapacity
	}
	if opts.Fold == 0 {
		opts.Fold = DefaultFold
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{now: opts.Now, fold: opts.Fold, started: opts.Now(), boot: newBoot(), ring: make([]Event, opts.Capacity)}
}

// newBoot draws a recorder's boot id: 64 random bits in hex, so that the
// ids of two processes (a restart, another validator) are never taken for
// one another.
func newBoot() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (it panics rather)
	return hex.EncodeToString(b[:])
}

// Boot is the recorder's boot id: 16 lowercase hex digits drawn when it was
// made. The stream names an event by it and the event's id (StreamID).
func (r *Recorder) Boot() string { return r.boot }

// LeaderChanged records a change of leader, role or term as this validator
// saw it; leader 0 is none known.
func (r *Recorder) LeaderChanged(term, leader uint64, role string) {
	sev := Info
	if leader == 0 {
		sev = Warn
	}
	r.keep(Event{Type: LeaderChanged, Severity: sev, Term: term, Leader: leader, Role: role})
}

// Backpressure records the sender starting (on) or ceasing to hold its
// queue at its in-flight ceiling.
func (r *Recorder) Backpressure(on bool, inFlight, ceiling int) {
	e := Event{Type: BackpressureOff, Severity: Info, InFlight: inFlight, Ceiling: ceiling}
	if on {
		e.Type, e.Severity = BackpressureOn, Warn
	}
	r.keep(e)
}

// Refused records a proposal refused at intake, before anything was
// replicated. A refusal for lack of capacity or leader is a warning; the
// others are the client's.
func (r *Recorder) Refused(reason string, wallet common.Address, id common.Hash) {
	sev := Info
	switch reason {
	case "overloaded", "leader_unknown", "timeout", "internal":
		sev = Warn
	}
	r.keepFolded(Event{Type: IntakeRefused, Severity: sev, Reason: reason, Wallet: wallet, ProposalID: id})
}

// Rejected records a proposal the leader decided REJECTED.
func (r *Recorder) Rejected(reason string, wallet common.Address, id common.Hash) {
	sev := Info
	if reason == "payment_orphaned" {
		sev = Warn
	}
	r.keepFolded(Event{Type: ProposalRejected, Severity: sev, Reason: reason, Wallet: wallet, ProposalID: id})
}

// Retracted records that a chain reorganization took back a proposal's
// payment, after its commit or before, and whether the chain mined it
// again. A committed proposal left without its payment is critical.
func (r *Recorder) Retracted(id common.Hash, wallet common.Address, committed, reMined bool) {
	e := Event{Type: PaymentRetracted, Severity: Warn, Reason: BeforeCommit, Wallet: wallet, ProposalID: id, ReMined: reMined}
	if committed {
		e.Reason, e.Severity = AfterCommit, Critical
	}
	if reMined {
		e.Severity = Info
	}
	r.keep(e)
}

// WritesBlocked records that a wallet's writes are blocked by its GC debt;
// only the first refusal after they were allowed is an event.
func (r *Recorder) WritesBlocked(wallet common.Address, debtMicros, limitMicros uint64) {
	if m := r.blocked.Load(); m != nil {
		if _, ok := (*m)[wallet]; ok {
			return
		}
	}
	r.blockedMu.Lock()
	old := r.blocked.Load()
	if old != nil {
		if _, ok := (*old)[wallet]; ok {
			r.blockedMu.Unlock()
			return
		}
	}
	var n int
	if old != nil {
		n = len(*old)
	}
	if n >= maxBlocked {
		r.blockedMu.Unlock()
		r.count(WritesBlocked, Warn, 1, r.now())
		r.folded.Add(1)
		return
	}
	next := make(map[common.Address]struct{}, n+1)
	if old != nil {
		for w := range *old {
			next[w] = struct{}{}
		}
	}
	next[wallet] = struct{}{}
	r.blocked.Store(&next)
	r.blockedMu.Unlock()
	r.keep(Event{Type: WritesBlocked, Severity: Warn, Wallet: wallet, Debt: debtMicros, Limit: limitMicros})
}

// WritesAllowed records that a wallet remembered as blocked may write
// again. It is called for every write of a wallet with a GC account, so it
// returns at once unless the wallet was blocked.
func (r *Recorder) WritesAllowed(wallet common.Address) {
	if m := r.blocked.Load(); m == nil || len(*m) == 0 {
		return
	} else if _, ok := (*m)[wallet]; !ok {
		return
	}
	r.blockedMu.Lock()
	old := r.blocked.Load()
	if _, ok := (*old)[wallet]; !ok {
		r.blockedMu.Unlock()
		return
	}
	next := make(map[common.Address]struct{}, len(*old))
	for w := range *old {
		if w != wallet {
			next[w] = struct{}{}
		}
	}
	r.blocked.Store(&next)
	r.blockedMu.Unlock()
	r.keep(Event{Type: WritesUnblocked, Severity: Info, Wallet: wallet})
}

// Snapshots records n raft snapshot transfers with peer of one type:
// SnapshotSent, SnapshotFailed or SnapshotReceived.
func (r *Recorder) Snapshots(t Type, peer, n uint64) {
	if n == 0 || (t != SnapshotSent && t != SnapshotFailed && t != SnapshotReceived) {
		return
	}
	sev := Info
	if t == SnapshotFailed {
		sev = Warn
	}
	r.keep(Event{Type: t, Severity: sev, Peer: peer, Count: n})
}

// WriteStalls records n write stalls of the database, the latest for
// reason.
func (r *Recorder) WriteStalls(reason string, n uint64) {
	if n == 0 {
		return
	}
	r.keep(Event{Type: WriteStall, Severity: Warn, Reason: reason, Count: n})
}

// FeedStale records that the chain feed became stale, for reason (a Feed*
// code) as detail says, or that the reason changed while it stayed stale:
// held submissions are refused payment_feed_stale meanwhile.
func (r *Recorder) FeedStale(reason, detail string) {
	r.keep(Event{Type: FeedStale, Severity: Warn, Reason: reason, Detail: detail})
}

// FeedCurrent records that the chain feed is current again after it was
// stale.
func (r *Recorder) FeedCurrent() {
	r.keep(Event{Type: FeedCurrent, Severity: Info})
}

// CompactionStarted records that GC compaction run (of epoch) started.
func (r *Recorder) CompactionStarted(run, epoch uint64) {
	r.keep(Event{Type: CompactionStarted, Severity: Info, Run: run, Epoch: epoch})
}

// CompactionEnded records that GC compaction run ended after steps, having
// reclaimed bytes: done, or given up for the reason abandoned (a warning).
func (r *Recorder) CompactionEnded(run, epoch, steps, reclaimed uint64, abandoned string) {
	e := Event{Type: CompactionFinished, Severity: Info, Run: run, Epoch: epoch, Steps: steps, Reclaimed: reclaimed}
	if abandoned != "" {
		e.Type, e.Severity, e.Detail = CompactionAbandoned, Warn, abandoned
	}
	r.keep(e)
}

// keep counts e and keeps it in the ring.
func (r *Recorder) keep(e Event) {
	e.At = r.now()
	e.Count = max(e.Count, 1)
	if e.Reason != "" {
		var st *reasonState
		e.Reason, st = r.reason(e.Type, e.Reason)
		st.count.Add(e.Count)
	}
	r.count(e.Type, e.Severity, e.Count, e.At)
	r.push(e)
}

// keepFolded counts e, and keeps it unless an event of its type and reason
// was kept less than Fold ago: then it is folded into the next one kept.
// This is the path of refusals under load, so that a burst of them neither
// evicts every other event from the ring nor takes the ring's lock each.
func (r *Recorder) keepFolded(e Event) {
	e.At = r.now()
	var st *reasonState
	e.Reason, st = r.reason(e.Type, e.Reason)
	st.count.Add(1)
	r.count(e.Type, e.Severity, 1, e.At)
	if r.fold > 0 {
		now, last := e.At.UnixNano(), st.kept.Load()
		if (last != 0 && now-last < int64(r.fold)) || !st.kept.CompareAndSwap(last, now) {
			st.folded.Add(1)
			r.folded.Add(1)
			return
		}
	}
	e.Count = 1 + st.folded.Swap(0)
	r.push(e)
}

// count adds n occurrences of type t.
func (r *Recorder) count(t Type, sev Severity, n uint64, at time.Time) {
	r.counts[t][sev].Add(n)
	r.lastAt[t].Store(at.UnixNano())
	r.hour(at).counts[t][sev].Add(n)
}

// hour returns the bucket of at's hour, emptied first if it held an hour
// 24 or more hours back.
func (r *Recorder) hour(at time.Time) *hour {
	h := at.Unix() / 3600
	b := &r.hours[((h%24)+24)%24]
	if b.at.Load() < h {
		r.hoursMu.Lock()
		if b.at.Load() < h {
			for t := range b.counts {
				for s := range b.counts[t] {
					b.counts[t][s].Store(0)
				}
			}
			b.at.Store(h)
		}
		r.hoursMu.Unlock()
	}
	return b
}

// reason returns the state of one reason of type t, and the reason as it
// is counted (otherReason past maxReasons).
func (r *Recorder) reason(t Type, reason string) (string, *reasonState) {
	if m := r.reasons[t].Load(); m != nil {
		if st, ok := (*m)[reason]; ok {
			return reason, st
		}
	}
	r.reasonsMu.Lock()
	defer r.reasonsMu.Unlock()
	var old map[string]*reasonState
	if m := r.reasons[t].Load(); m != nil {
		old = *m
	}
	if st, ok := old[reason]; ok {
		return reason, st
	}
	if len(old) >= maxReasons {
		reason = otherReason
		if st, ok := old[reason]; ok {
			return reason, st
		}
	}
	next := make(map[string]*reasonState, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	st := &reasonState{}
	next[reason] = st
	r.reasons[t].Store(&next)
	return reason, st
}

// push keeps e in the ring under the next id.
func (r *Recorder) push(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	e.ID = r.next
	r.ring[(r.next-1)%uint64(len(r.ring))] = e
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Changed returns a channel closed when the next event is kept.
func (r *Recorder) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

// Capacity is how many events are kept.
func (r *Recorder) Capacity() int { return len(r.ring) }

// EventsSince returns the kept events with id > after, oldest first, at
// most limit of them (all when limit <= 0). With the ids, FirstEventID,
// LastEventID and Changed it makes the ring a log the event streams follow
// (events.Source).
func (r *Recorder) EventsSince(after uint64, limit int) ([]Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := max(after+1, r.firstLocked())
	if from > r.next {
		return nil, nil
	}
	n := r.next - from + 1
	if limit > 0 {
		n = min(n, uint64(limit))
	}
	out := make([]Event, 0, n)
	for id := from; id < from+n; id++ {
		out = append(out, r.ring[(id-1)%uint64(len(r.ring))])
	}
	return out, nil
}

// FirstEventID is the oldest kept event's id, LastEventID()+1 when none is.
func (r *Recorder) FirstEventID() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstLocked()
}

func (r *Recorder) firstLocked() uint64 {
	if r.next <= uint64(len(r.ring)) {
		return 1
	}
	return r.next - uint64(len(r.ring)) + 1
}

// LastEventID is the newest event's id, 0 before the first.
func (r *Recorder) LastEventID() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// Recent returns up to limit of the newest events, newest first, and the
// newest id.
func (r *Recorder) Recent(limit int) ([]Event, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := uint64(max(0, min(limit, len(r.ring))))
	n = min(n, r.next)
	out := make([]Event, 0, n)
	for id := r.next; id > r.next-n; id-- {
		out = append(out, r.ring[(id-1)%uint64(len(r.ring))])
	}
	return out, r.next
}

// Stats are a Recorder's counts at one moment.
type Stats struct {
	Since, At time.Time
	// Total and Last24h are by type and severity; Last24h counts the
	// current hour and the 23 before it.
	Total, Last24h [numTypes][numSeverities]uint64
	// LastAt is each type's latest occurrence, zero when none.
	LastAt [numTypes]time.Time
	// ByReason are each type's occurrences by reason, since start.
	ByReason [numTypes]map[string]uint64
	Capacity int
	Retained int
	Recorded uint64
	Folded   uint64
}

// Stats returns the counts.
func (r *Recorder) Stats() Stats {
	now := r.now()
	s := Stats{Since: r.started, At: now, Capacity: len(r.ring), Folded: r.folded.Load()}
	r.mu.Lock()
	s.Recorded = r.next
	r.mu.Unlock()
	s.Retained = int(min(s.Recorded, uint64(len(r.ring))))
	current := now.Unix() / 3600
	for t := range numTypes {
		for sev := range numSeverities {
			s.Total[t][sev] = r.counts[t][sev].Load()
		}
		if ns := r.lastAt[t].Load(); ns != 0 {
			s.LastAt[t] = time.Unix(0, ns).UTC()
		}
		s.ByReason[t] = map[string]uint64{}
		if m := r.reasons[t].Load(); m != nil {
			for k, st := range *m {
				s.ByReason[t][k] = st.count.Load()
			}
		}
	}
	for i := range r.hours {
		b := &r.hours[i]
		if at := b.at.Load(); at <= current-24 || at > current {
			continue
		}
		for t := range numTypes {
			for sev := range numSeverities {
				s.Last24h[t][sev] += b.counts[t][sev].Load()
			}
		}
	}
	return s
}
