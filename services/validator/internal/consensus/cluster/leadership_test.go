package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
)

// recordedEvents collects what a LeadershipLog tells its events.
type recordedEvents struct {
	mu  sync.Mutex
	got []string
}

func (r *recordedEvents) LeaderChanged(term, leader uint64, role string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%d %d %s", term, leader, role))
}

func (r *recordedEvents) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestLeadershipLog: Run records every change of leader, role or term (and
// nothing for other status changes), keeps the newest Max, counts them all,
// and tells its events of each.
func TestLeadershipLog(t *testing.T) {
	node := newFakeNode(1)
	events := &recordedEvents{}
	clock := time.Unix(1_700_000_000, 0)
	l := NewLeadershipLog(LeadershipConfig{Node: node, Max: 3, Events: events, Now: func() time.Time { return clock }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	count := func() uint64 { _, n := l.History(); return n }

	// The status at start is the first change: a follower without a leader.
	waitFor(t, "the first change", func() bool { return count() == 1 })
	steps := []consensus.Status{
		{Role: consensus.RolePreCandidate, Term: 0},
		{Role: consensus.RoleCandidate, Term: 1},
		{Role: consensus.RoleLeader, Term: 1, Leader: 1},
		{Role: consensus.RoleLeader, Term: 1, Leader: 1, CommitIndex: 9}, // not a leadership change
		{Role: consensus.RoleFollower, Term: 2, Leader: 2},
	}
	for i, st := range steps {
		reads := node.statusReads()
		node.setStatus(st)
		want := uint64(i + 2)
		if i >= 3 {
			want = uint64(i + 1)
		}
		// Run read this status (only Run reads it) and decided on it.
		waitFor(t, fmt.Sprintf("step %d", i), func() bool { return node.statusReads() > reads && count() == want })
	}
	cancel()
	<-done

	history, changes := l.History()
	if changes != 5 {
		t.Fatalf("%d changes counted, want 5", changes)
	}
	var got []string
	for _, h := range history {
		if !h.At.Equal(clock) || h.At.Location() != time.UTC {
			t.Errorf("change dated %v", h.At)
		}
		got = append(got, fmt.Sprintf("%d %d %s", h.Term, h.Leader, h.Role))
	}
	// Bounded to the newest three.
	if want := []string{"1 0 CANDIDATE", "1 1 LEADER", "2 2 FOLLOWER"}; !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	if want := []string{"0 0 FOLLOWER", "0 0 PRE_CANDIDATE", "1 0 CANDIDATE", "1 1 LEADER", "2 2 FOLLOWER"}; !slices.Equal(events.all(), want) {
		t.Fatalf("events %q, want %q", events.all(), want)
	}
}

// TestLeadershipLogBound: the log keeps the newest entries and counts all
// of them; History returns a copy.
func TestLeadershipLogBound(t *testing.T) {
	l := NewLeadershipLog(LeadershipConfig{Node: newFakeNode(1)})
	if l.max != DefaultLeadershipEntries {
		t.Fatalf("default bound %d", l.max)
	}
	for term := range uint64(DefaultLeadershipEntries + 10) {
		l.record(api.LeadershipChange{Term: term})
	}
	history, changes := l.History()
	if changes != DefaultLeadershipEntries+10 || len(history) != DefaultLeadershipEntries ||
		history[0].Term != 10 || history[len(history)-1].Term != DefaultLeadershipEntries+9 {
		t.Fatalf("%d changes, %d kept, from term %d to %d", changes, len(history), history[0].Term, history[len(history)-1].Term)
	}
	history[0].Term = 999
	if again, _ := l.History(); again[0].Term != 10 {
		t.Fatal("History shares its entries with the log")
	}
}
