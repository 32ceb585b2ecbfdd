package consensus

// The peer guard: what Node.Step checks before raft sees a message from a
// peer.
//
// etcd raft trusts its peers. Several messages that no correct peer sends
// make it panic on its own goroutine, which kills the process — and, as the
// message is sent again after a restart, kills it again:
//
//   - MsgHeartbeat whose Commit is past the log's last index
//     (raftLog.commitTo: "tocommit(%d) is out of range");
//   - MsgApp whose entries are not numbered Index+1, Index+2, ...: an entry
//     numbered at or below the commit index with another term panics in
//     maybeAppend ("conflict with committed entry"), one numbered past the
//     message's end in its slicing ("index out of range"), and the commit
//     that follows goes past the log's end (commitTo again);
//   - MsgSnap whose ConfState raft cannot restore (confchange.Restore fails,
//     or the result is not equivalent: duplicates, a LearnersNext outside
//     VotersOutgoing) panics in raft.restore;
//   - MsgProp without entries ("stepped empty MsgProp"), or with a conf
//     change entry whose data does not unmarshal, panics on the leader;
//   - a message type raft does not know: raft.IsLocalMsg indexes a table
//     with it, and a negative one is out of range;
//   - a term near 2^64 wraps when this node next campaigns (Term+1 = 0,
//     and raft panics sending a vote without a term); Term 0 on anything
//     but MsgProp/MsgReadIndex is taken for a local message and can reset
//     this node's term to 0; indexes near 2^64 wrap in Index+len(Entries)
//     and in the leader's Progress (Match+1).
//
// Others break raft's invariants without an immediate panic and are refused
// as well: entries whose terms decrease or exceed the message's term (a
// later campaign of this node would then append below its own last term),
// LogTerm above Term, a snapshot whose term exceeds the message's or whose
// index is 0, and entries (or a snapshot) at or below this node's persisted
// commit index whose term differs from the stored one: a committed entry is
// never rewritten, so such a message can only overwrite this node's state
// with another history. Conf change entries that do not decode would stop
// the node when applied (ErrCorruptLog), so they are refused on arrival.
//
// Why a correct peer is never refused:
//
//   - A leader's heartbeat carries min(Match, committed) for the follower,
//     and Match only moves on the follower's MsgAppResp, which the Ready loop
//     sends after the acknowledged entries are in Pebble — Storage.LastIndex
//     is at least Match by then. Entries at or below a committed index are
//     never removed from a log (every later leader holds them with the same
//     terms), so LastIndex stays there, whatever leader or term the heartbeat
//     comes from.
//   - raft's own last index can briefly fall below Storage.LastIndex: a
//     MsgApp that conflicts with stored (uncommitted) entries, or a snapshot
//     behind them, cuts raft's log at once, and Pebble follows only when the
//     Ready that carries the cut is saved. For that window the guard keeps a
//     lower bound (guard.low), set before such a message is handed to raft
//     and cleared once a Ready computed after it has been saved; heartbeats
//     are checked against the lower of the two. A correct heartbeat fits
//     under it too: the cut only removes uncommitted entries.
//   - A correct leader of term T numbers its entries contiguously from
//     Index+1, with terms non-decreasing from LogTerm and at most T (its
//     log is a correct log), and holds every entry committed in a term up
//     to T with its term (Leader Completeness). The committed-prefix check
//     runs only when the message's term is at least this node's persisted
//     term: an older message is ignored by raft anyway. (raft's term may be
//     ahead of the persisted one for a moment; a message from that gap that
//     contradicts the log is refused instead of ignored — same effect, minus
//     raft's reply that tells the stale leader the new term, which its next
//     message gets.)
//   - Snapshots carry the ConfState raft produced, which restores; their
//     term is the term of an entry of the leader's log, at most its term.
//   - Forwarded proposals come from Node.Propose/ProposeConfChange on a
//     follower: raft forwards them with term 0, non-empty, conf changes
//     marshaled by raft, data never starting with the reserved byte.
//   - Terms and indexes below 2^48 and 2^62: at one election per
//     millisecond, and a million entries per second, a cluster reaches
//     neither in thousands of years.
//
// Two kinds of refusal: ErrMalformedMessage for what no correct peer sends
// whatever the state (the transport closes that peer's connection), and
// ErrInconsistentMessage for what contradicts this node's own log (a peer
// whose data was lost or replaced, or a stale message in the gap above):
// dropped, the connection kept.

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"go.uber.org/zap"
)

// peerMessageError is the type of the guard's two sentinels. Malformed lets
// a transport tell them apart without importing this package.
type peerMessageError struct {
	text      string
	malformed bool
}

func (e *peerMessageError) Error() string { return e.text }

// Malformed reports whether no correct peer could have sent the message (the
// connection it came on is not worth keeping).
func (e *peerMessageError) Malformed() bool { return e.malformed }

// Errors returned by Node.Step for messages raft never sees (peerguard.go).
var (
	// ErrMalformedMessage: a message no correct peer sends, whatever the
	// state of this node (numbering, terms, an empty proposal, a ConfState
	// that does not restore). Its error value has Malformed() == true.
	ErrMalformedMessage error = &peerMessageError{text: "consensus: malformed message from a peer", malformed: true}
	// ErrInconsistentMessage: a message that contradicts this node's log (a
	// commit index past its last entry, another term for a committed
	// entry). The sender lost or replaced its data, or the message is
	// stale; Malformed() == false.
	ErrInconsistentMessage error = &peerMessageError{text: "consensus: message from a peer contradicts this node's log"}
)

// Bounds on the numbers a message may carry (see the comment above).
const (
	maxPeerTerm  = 1 << 48
	maxPeerIndex = 1 << 62
	// noLow: the message cannot shorten raft's log.
	noLow = math.MaxUint64
)

// peerView is what the guard knows of this node's log: thread-safe reads
// of Storage, taken when the message is checked.
type peerView struct {
	last   uint64 // the lower of Storage.LastIndex and the guard's pending cut
	stored uint64 // Storage.LastIndex
	commit uint64 // persisted HardState
	term   uint64 // persisted HardState
	// termAt is Storage.Term: the stored term of entry i, or an error for
	// an entry this node does not hold (compacted, or past the end).
	termAt func(i uint64) (uint64, error)
}

// checkPeerMessage decides whether raft may step m, a message from a peer.
// It returns the index raft's log may be cut to by m (noLow if it cannot
// be), or an error wrapping ErrMalformedMessage or ErrInconsistentMessage.
// It is deterministic in m and v.
func checkPeerMessage(m *raftpb.Message, v peerView) (low uint64, err error) {
	typ := m.GetType()
	switch {
	case !knownMessageType(typ):
		// raft indexes tables by type: a negative one panics.
		return noLow, malformed("unknown message type %d", int32(typ))
	case raft.IsLocalMsg(typ):
		return noLow, malformed("local message %s", typ)
	case len(m.GetResponses()) > 0:
		return noLow, malformed("%s carries local responses", typ)
	case m.GetTerm() >= maxPeerTerm || m.GetLogTerm() >= maxPeerTerm:
		return noLow, malformed("%s: term %d, log term %d", typ, m.GetTerm(), m.GetLogTerm())
	case m.GetIndex() >= maxPeerIndex || m.GetCommit() >= maxPeerIndex || m.GetRejectHint() >= maxPeerIndex:
		return noLow, malformed("%s: index %d, commit %d, hint %d", typ, m.GetIndex(), m.GetCommit(), m.GetRejectHint())
	}
	if typ == raftpb.MsgProp || typ == raftpb.MsgReadIndex {
		// raft forwards these with term 0; any other term would move ours.
		if m.GetTerm() != 0 {
			return noLow, malformed("%s with term %d", typ, m.GetTerm())
		}
	} else if m.GetTerm() == 0 {
		// raft would take it for a local message.
		return noLow, malformed("%s without a term", typ)
	}
	switch typ {
	case raftpb.MsgProp:
		return noLow, checkProposal(m)
	case raftpb.MsgHeartbeat:
		if m.GetCommit() > v.last {
			return noLow, inconsistent("heartbeat commits %d, past this node's last index %d", m.GetCommit(), v.last)
		}
	case raftpb.MsgApp:
		return checkAppend(m, v)
	case raftpb.MsgSnap:
		return checkSnapshot(m, v)
	}
	return noLow, nil
}

func knownMessageType(t raftpb.MessageType) bool {
	_, ok := raftpb.MessageType_name[int32(t)]
	return ok
}

func checkProposal(m *raftpb.Message) error {
	if len(m.GetEntries()) == 0 {
		return malformed("proposal without entries")
	}
	for _, e := range m.GetEntries() {
		switch e.GetType() {
		case raftpb.EntryNormal:
			if d := e.GetData(); len(d) > 0 && d[0] == truncationTag {
				return malformed("proposal: %v", ErrReservedData)
			}
		default:
			if _, _, err := decodeConfChange(e); err != nil {
				return malformed("proposal: %v", err)
			}
		}
	}
	return nil
}

func checkAppend(m *raftpb.Message, v peerView) (uint64, error) {
	term, prev, prevTerm := m.GetTerm(), m.GetIndex(), m.GetLogTerm()
	if prevTerm > term {
		return noLow, malformed("append at term %d after an entry of term %d", term, prevTerm)
	}
	ents := m.GetEntries()
	if uint64(len(ents)) >= maxPeerIndex-prev {
		return noLow, malformed("append of %d entries after %d", len(ents), prev)
	}
	last := prevTerm
	for i, e := range ents {
		switch {
		case e.GetIndex() != prev+1+uint64(i):
			return noLow, malformed("append after %d: entry %d is numbered %d", prev, i, e.GetIndex())
		case e.GetTerm() < last || e.GetTerm() > term:
			return noLow, malformed("append at term %d: entry %d has term %d after term %d", term, e.GetIndex(), e.GetTerm(), last)
		}
		last = e.GetTerm()
		if e.GetType() != raftpb.EntryNormal {
			if _, _, err := decodeConfChange(e); err != nil {
				return noLow, malformed("append: %v", err)
			}
		}
	}
	if term >= v.term {
		// The committed prefix must match (prev, then the entries).
		if prev <= v.commit && differs(v, prev, prevTerm) {
			return noLow, inconsistent("append after %d (term %d) contradicts committed entry %d", prev, prevTerm, prev)
		}
		for _, e := range ents {
			if e.GetIndex() > v.commit {
				break
			}
			if differs(v, e.GetIndex(), e.GetTerm()) {
				return noLow, inconsistent("append rewrites committed entry %d with term %d", e.GetIndex(), e.GetTerm())
			}
		}
	}
	// raft cuts its log at the first entry that conflicts with it; the
	// new end is then the message's end, possibly below the stored end.
	end := prev + uint64(len(ents))
	if end >= v.stored {
		return noLow, nil
	}
	for _, e := range ents {
		i := e.GetIndex()
		if i <= v.commit {
			continue // committed entries are never cut
		}
		if t, err := v.termAt(i); err != nil || t != e.GetTerm() {
			return end, nil
		}
	}
	return noLow, nil
}

func checkSnapshot(m *raftpb.Message, v peerView) (uint64, error) {
	md := m.GetSnapshot().GetMetadata()
	index, term := md.GetIndex(), md.GetTerm()
	switch {
	case index == 0 || index >= maxPeerIndex:
		return noLow, malformed("snapshot at index %d", index)
	case term == 0 || term > m.GetTerm():
		return noLow, malformed("snapshot of term %d sent at term %d", term, m.GetTerm())
	}
	if err := checkConfState(md.GetConfState()); err != nil {
		return noLow, malformed("snapshot at %d: %v", index, err)
	}
	if m.GetTerm() >= v.term && index <= v.commit && differs(v, index, term) {
		return noLow, inconsistent("snapshot at %d (term %d) contradicts the committed entry", index, term)
	}
	if index < v.stored {
		return index, nil
	}
	return noLow, nil
}

// checkConfState restores cs the way raft does on receiving a snapshot, on
// a tracker of its own, and fails where raft would panic.
func checkConfState(cs *raftpb.ConfState) error {
	if len(cs.GetVoters()) == 0 {
		return errors.New("no voters")
	}
	trk := tracker.MakeProgressTracker(1, 0)
	cfg, prs, err := confchange.Restore(confchange.Changer{Tracker: trk, LastIndex: 1}, cs)
	if err != nil {
		return err
	}
	got := tracker.ProgressTracker{Config: cfg, Progress: prs}
	return raftpb.EnsureConfState(cs).Equivalent(got.ConfState())
}

// differs reports whether this node stores entry i with another term than
// term. An entry it does not hold (compacted, past its end) does not
// differ: there is nothing to contradict.
func differs(v peerView, i, term uint64) bool {
	t, err := v.termAt(i)
	return err == nil && t != term
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedMessage, fmt.Sprintf(format, args...))
}

func inconsistent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInconsistentMessage, fmt.Sprintf(format, args...))
}

// peerGuard is the node's state for the checks: the pending cut of raft's
// log and the counters. Messages that can cut the log or depend on its end
// (MsgApp, MsgHeartbeat, MsgSnap) are checked and handed to raft under mu,
// so the bound a heartbeat is checked against includes every cut raft may
// have made before it.
type peerGuard struct {
	mu     sync.Mutex
	low    uint64 // noLow, or the lowest end raft's log may have been cut to
	lowGen uint64 // stepped count of the message that set low

	// stepped counts the guarded messages handed to raft. The Ready loop
	// reads it before waiting for a Ready: a Ready received afterwards
	// was computed after those messages were stepped.
	stepped atomic.Uint64

	refused atomic.Uint64
	lastLog atomic.Int64 // unix nanos of the last Warn, to keep a flood out of the log
}

// settled is called by the Ready loop once a Ready, received after stepped
// was gen, is saved: Storage's last index now includes every cut made by
// those messages.
func (g *peerGuard) settled(gen uint64) {
	g.mu.Lock()
	if g.low != noLow && g.lowGen <= gen {
		g.low = noLow
	}
	g.mu.Unlock()
}

// view reads the node's storage for a check (under g.mu).
func (n *Node) peerView() peerView {
	stored, _ := n.storage.LastIndex()
	hs := n.storage.HardState()
	return peerView{
		last:   min(stored, n.guard.low),
		stored: stored,
		commit: hs.GetCommit(),
		term:   hs.GetTerm(),
		termAt: n.storage.Term,
	}
}

// refusePeerMessage counts and logs a refused message: at Warn at most once
// a second, so that a hostile peer cannot flood the log, at Debug otherwise.
func (n *Node) refusePeerMessage(m *raftpb.Message, err error) error {
	n.guard.refused.Add(1)
	now := time.Now().UnixNano()
	last := n.guard.lastLog.Load()
	fields := []zap.Field{zap.Uint64("from", m.GetFrom()), zap.Stringer("type", m.GetType()),
		zap.Uint64("term", m.GetTerm()), zap.Error(err)}
	if now-last >= int64(time.Second) && n.guard.lastLog.CompareAndSwap(last, now) {
		n.log.Warn("refusing a message from a peer", fields...)
	} else {
		n.log.Debug("refusing a message from a peer", fields...)
	}
	return err
}

// PeerMessagesRefused returns how many messages from peers Step refused
// before raft saw them (ErrMalformedMessage, ErrInconsistentMessage).
func (n *Node) PeerMessagesRefused() uint64 { return n.guard.refused.Load() }
