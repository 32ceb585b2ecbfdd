package app

import (
	"context"
	"sync"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
)

// leadershipLog remembers this node's view of leader changes, newest last,
// for /v1/msgbus/leadership-history and the election counters of the raft
// metrics. It is local knowledge, not replicated state.
type leadershipLog struct {
	mu      sync.Mutex
	entries []api.LeadershipChange
	max     int
	changes uint64
	events  leaderEvents // nil: none
}

// leaderEvents is told of every change the log records (the operational
// events, opsevents.Recorder).
type leaderEvents interface {
	LeaderChanged(term, leader uint64, role string)
}

func newLeadershipLog(max int, events leaderEvents) *leadershipLog {
	return &leadershipLog{max: max, events: events}
}

// follow records a change each time the node's leader, role or term moves,
// until ctx ends.
func (l *leadershipLog) follow(ctx context.Context, node *consensus.Node, now func() time.Time) {
	var last consensus.Status
	for {
		changed := node.LeaderChanged()
		st := node.Status()
		if st.Leader != last.Leader || st.Role != last.Role || st.Term != last.Term {
			l.record(api.LeadershipChange{Term: st.Term, Leader: st.Leader, Role: string(st.Role), At: now().UTC()})
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

func (l *leadershipLog) record(c api.LeadershipChange) {
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
func (l *leadershipLog) History() ([]api.LeadershipChange, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]api.LeadershipChange(nil), l.entries...), l.changes
}
