package pipeline

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// termLedger is a ledger whose leadership and term the test moves, as raft
// would: each change closes the LeaderChanged channel. It can lose the
// first LeaderElected proposals, as a leader change may.
type termLedger struct {
	*ledger

	mu      sync.Mutex
	term    uint64
	leading bool
	changed chan struct{}
	looks   int // Leading calls
	drop    int // LeaderElected proposals still to lose
	tries   int // LeaderElected proposals, lost ones included
}

const announcingNode = 7

func (l *termLedger) Leading() (nodeID, term uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.looks++
	return announcingNode, l.term, l.leading
}

func (l *termLedger) LeaderChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// IsLeader keeps the pipeline's other loops to the same leadership.
func (l *termLedger) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

func (l *termLedger) set(term uint64, leading bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.term, l.leading = term, leading
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *termLedger) Propose(ctx context.Context, data []byte) error {
	var e ledgerpb.Entry
	if err := proto.Unmarshal(data, &e); err != nil {
		return err
	}
	if e.GetLeaderElected() != nil {
		l.mu.Lock()
		l.tries++
		lose := l.drop > 0
		if lose {
			l.drop--
		}
		l.mu.Unlock()
		if lose {
			return nil // "maybe": raft may lose an entry it accepted
		}
	}
	return l.ledger.Propose(ctx, data)
}

// looksNow is how often the pipeline has asked about leadership.
func (l *termLedger) looksNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.looks
}

// elected returns the LeaderElected entries applied so far.
func (l *termLedger) elected() []*ledgerpb.LeaderElected {
	l.ledger.mu.Lock()
	defer l.ledger.mu.Unlock()
	return append([]*ledgerpb.LeaderElected(nil), l.ledger.elected...)
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// awhile waits until the pipeline looked at leadership n more times: every
// look that could propose has run.
func (l *termLedger) awhile(t *testing.T, n int) {
	t.Helper()
	from := l.looksNow()
	waitFor(t, "the pipeline looked again", func() bool { return l.looksNow() >= from+n })
}

func startTerms(t *testing.T, drop int, now func() time.Time, edit func(*Config)) *termLedger {
	t.Helper()
	cfg := DefaultConfig()
	cfg.VerifyPayments = false
	cfg.FinalizeInterval = 2 * time.Millisecond
	cfg.Now = now
	edit(&cfg)
	l := &termLedger{ledger: newLedger(), term: 1, changed: make(chan struct{}), drop: drop}
	p, err := New(cfg, zap.NewNop(), l, l, nil, fixedEpoch(7))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// TestAnnounceOncePerTerm: a follower announces nothing; a node that
// becomes leader announces itself once in its term, with its id, the term
// and its clock, and again only in the next term it leads.
func TestAnnounceOncePerTerm(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	l := startTerms(t, 0, func() time.Time { return at }, func(*Config) {})
	l.awhile(t, 10)
	if got := l.elected(); len(got) != 0 {
		t.Fatalf("a follower announced %v", got)
	}

	l.set(3, true)
	waitFor(t, "the new leader announces itself", func() bool { return len(l.elected()) == 1 })
	l.awhile(t, 10)
	got := l.elected()
	if len(got) != 1 || !proto.Equal(got[0], &ledgerpb.LeaderElected{NodeId: announcingNode, Term: 3, AtMs: at.UnixMilli()}) {
		t.Fatalf("after leading term 3 for a while: %v", got)
	}

	l.set(4, false) // another node leads term 4
	l.awhile(t, 10)
	if got := l.elected(); len(got) != 1 {
		t.Fatalf("a follower announced: %v", got)
	}
	l.set(5, true)
	waitFor(t, "the next term is announced", func() bool { return len(l.elected()) == 2 })
	l.awhile(t, 10)
	if got := l.elected(); len(got) != 2 || got[1].GetTerm() != 5 || got[1].GetNodeId() != announcingNode {
		t.Fatalf("after leading term 5: %v", got)
	}
}

// TestAnnounceAgainWhenLost: an announcement raft lost is proposed again
// after CommitTimeout, not at every look.
func TestAnnounceAgainWhenLost(t *testing.T) {
	start := time.Now()
	l := startTerms(t, 1, time.Now, func(c *Config) { c.CommitTimeout = 100 * time.Millisecond })
	l.set(2, true)
	waitFor(t, "the lost announcement is proposed again and applied", func() bool { return len(l.elected()) == 1 })
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("proposed again after %s, before CommitTimeout", waited)
	}
	l.awhile(t, 10)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tries != 2 {
		t.Errorf("%d announcements proposed, want the lost one and one more", l.tries)
	}
}
