package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
)

// RaftStatus is the raft node's status and its change signal
// (consensus.Node).
type RaftStatus interface {
	Status() consensus.Status
	// LeaderChanged is closed at the next change of leader or role.
	LeaderChanged() <-chan struct{}
}

// LeaderEvents is told of every change the log records (the operational
// events, opsevents.Recorder).
type LeaderEvents interface {
	LeaderChanged(term, leader uint64, role string)
}

// DefaultLeadershipEntries is how many changes a LeadershipLog keeps.
const DefaultLeadershipEntries = 256

// LeadershipConfig configures a LeadershipLog. Node is required.
type LeadershipConfig struct {
	// Node is the raft node followed.
	Node RaftStatus
	// Max is how many changes are kept, the newest. Default
	// DefaultLeadershipEntries.
	Max int
	// Events, when set, is told of every change.
	Events LeaderEvents
	// Now dates the changes. Default time.Now.
	Now func() time.Time
}

// LeadershipLog remembers this node's view of leader changes, newest last,
// for /v1/msgbus/leadership-history and the election counters of the raft
// metrics. It is local knowledge, not replicated state.
type LeadershipLog struct {
	node   RaftStatus
	max    int
	events LeaderEvents // nil: none
	now    func() time.Time

	mu      sync.Mutex
	entries []api.LeadershipChange
	changes uint64
}

// NewLeadershipLog returns an empty log; Run fills it.
func NewLeadershipLog(cfg LeadershipConfig) *LeadershipLog {
	l := &LeadershipLog{node: cfg.Node, max: cfg.Max, events: cfg.Events, now: cfg.Now}
	if l.max <= 0 {
		l.max = DefaultLeadershipEntries
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Run records a change each time the node's leader, role or term moves,
// until ctx ends. It is the log's goroutine: run it once.
func (l *LeadershipLog) Run(ctx context.Context) {
	var last consensus.Status
	for {
		changed := l.node.LeaderChanged()
		st := l.node.Status()
		if st.Leader != last.Leader || st.Role != last.Role || st.Term != last.Term {
			l.record(api.LeadershipChange{Term: st.Term, Leader: st.Leader, Role: string(st.Role), At: l.now().UTC()})
			if l.events != nil {
				l.events.LeaderChanged(st.Term, st.Leader, string(st.Role))
			}
			last = st
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

func (l *LeadershipLog) record(c api.LeadershipChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes++
	l.entries = append(l.entries, c)
	if len(l.entries) > l.max {
		l.entries = append(l.entries[:0], l.entries[len(l.entries)-l.max:]...)
	}
}

// History returns the recorded changes, oldest first, and how many there
// were in all.
func (l *LeadershipLog) History() ([]api.LeadershipChange, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]api.LeadershipChange(nil), l.entries...), l.changes
}
