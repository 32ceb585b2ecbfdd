package consensus

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// noSnapshots makes snapshots so rare that any log truncation a test sees
// comes from truncate.go.
func noSnapshots(cfg *Config) { cfg.SnapshotEntries = 1 << 20 }

func TestTruncationPoint(t *testing.T) {
	status := func(state raft.StateType, commit uint64, matches ...uint64) raft.Status {
		st := raft.Status{Progress: map[uint64]tracker.Progress{}}
		st.RaftState = state
		st.HardState = &raftpb.HardState{Commit: new(commit)}
		for i, m := range matches {
			st.Progress[uint64(i+1)] = tracker.Progress{Match: m}
		}
		return st
	}
	for _, tc := range []struct {
		name   string
		st     raft.Status
		first  uint64
		upTo   uint64
		wantOK bool
	}{
		{"follower", status(raft.StateFollower, 500, 500, 500, 500), 1, 0, false},
		{"slowest member", status(raft.StateLeader, 500, 500, 120, 480), 1, 120, true},
		{"learner counts", status(raft.StateLeader, 500, 500, 500, 500, 30), 1, 30, true},
		{"not past commit", status(raft.StateLeader, 90, 500, 500, 500), 1, 90, true},
		{"too few", status(raft.StateLeader, 500, 500, 500, 500), 500 - minTruncation + 2, 500, false},
		{"just enough", status(raft.StateLeader, 500, 500, 500, 500), 500 - minTruncation + 1, 500, true},
		// On an idle cluster, the entry that truncated the log is the only
		// one past the truncation point: no further truncation follows.
		{"idle after a truncation", status(raft.StateLeader, 401, 401, 401, 401), 401, 401, false},
		{"new member", status(raft.StateLeader, 500, 500, 500, 0), 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upTo, ok := truncationPoint(tc.st, tc.first)
			if ok != tc.wantOK || (ok && upTo != tc.upTo) {
				t.Fatalf("truncationPoint = %d, %v; want %d, %v", upTo, ok, tc.upTo, tc.wantOK)
			}
		})
	}
}

func TestProposeRefusesReservedData(t *testing.T) {
	c := newCluster(t, []uint64{1}, 1)
	l := c.leader()
	if err := l.Propose(context.Background(), encodeTruncationEntry(1)); !errors.Is(err, ErrReservedData) {
		t.Fatalf("Propose(truncation entry) = %v, want ErrReservedData", err)
	}
}

// TestTruncation: with every member up, the log is truncated well past any
// snapshot on every member; the applier never sees a truncation entry; a
// member restarts on the truncated log; a new member, which needs entries
// that are gone, gets a snapshot made for it and converges.
func TestTruncation(t *testing.T) {
	c := emptyCluster(t, []uint64{1, 2, 3, 4}, 1, 2, 3)
	c.tune = noSnapshots
	for _, id := range []uint64{1, 2, 3} {
		c.dirs[id] = t.TempDir()
		c.start(id, false)
	}
	c.propose("a", 100)
	c.converged(1, 2, 3)
	for _, id := range []uint64{1, 2, 3} {
		n := c.nodes[id]
		waitFor(t, 10*time.Second, "the log truncated", func() bool { return firstIndex(n) > 80 })
		if idx := n.Storage().SnapshotMetadata().GetIndex(); idx != 0 {
			t.Fatalf("node %d made a snapshot at %d", id, idx)
		}
		if _, err := n.Storage().Entries(1, 2, 1<<20); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("node %d: Entries(1) = %v, want ErrCompacted", id, err)
		}
		for _, d := range c.apps[id].data(t) {
			if !strings.HasPrefix(d, "a") {
				t.Fatalf("node %d applied %q", id, d)
			}
		}
	}

	follower := uint64(1)
	if c.leader().Status().ID == follower {
		follower = 2
	}
	applied := c.apps[follower].AppliedIndex()
	c.stop(follower)
	c.start(follower, false)
	if got := c.apps[follower].AppliedIndex(); got != applied {
		t.Fatalf("restarted on the truncated log: applied %d, want %d", got, applied)
	}

	c.dirs[4] = t.TempDir()
	c.start(4, true)
	changeConf(t, c, &raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(4))}, func(cs *raftpb.ConfState) bool {
		return slices.Contains(cs.GetLearners(), 4)
	})
	c.propose("b", 5)
	data := c.converged(1, 2, 3, 4)
	if len(data) != 105 {
		t.Fatalf("%d entries applied, want 105", len(data))
	}
	if c.apps[4].restored() == 0 {
		t.Fatal("the new member caught up without a snapshot")
	}
	for _, n := range c.running() {
		if err := n.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncationWaitsForSlowestMember: a partitioned follower holds the
// truncation point back, so that it catches up from the log, not through
// a snapshot; once it is back the log is truncated past it.
func TestTruncationWaitsForSlowestMember(t *testing.T) {
	ids := []uint64{1, 2, 3}
	c := emptyCluster(t, ids, ids...)
	c.tune = noSnapshots
	for _, id := range ids {
		c.dirs[id] = t.TempDir()
		c.start(id, false)
	}
	c.propose("a", 5)
	c.converged(ids...)
	lag := uint64(1)
	if c.leader().Status().ID == lag {
		lag = 2
	}
	lagLast := lastIndex(c.nodes[lag])
	c.nw.partition(lag, true)
	c.propose("b", 60)
	leader := c.leader()
	if f := firstIndex(leader); f > lagLast+1 {
		t.Fatalf("leader's log starts at %d, past the partitioned follower's last index %d", f, lagLast)
	}
	c.nw.partition(lag, false)
	data := c.converged(ids...)
	if len(data) != 65 {
		t.Fatalf("%d entries applied, want 65", len(data))
	}
	if c.apps[lag].restored() != 0 {
		t.Fatal("the follower needed a snapshot")
	}
	c.propose("c", 20)
	c.converged(ids...)
	waitFor(t, 10*time.Second, "truncation past the follower's old last index", func() bool {
		return firstIndex(c.leader()) > lagLast+1 && firstIndex(c.nodes[lag]) > lagLast+1
	})
}
