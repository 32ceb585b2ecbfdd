package consensus

import (
	"sort"

	"go.etcd.io/raft/v3/tracker"
)

// FollowerProgress is the leader's view of one member's replication.
type FollowerProgress struct {
	ID uint64
	// Match is the highest index known to be in the member's log.
	Match uint64
	// Next is the next index the leader will send.
	Next uint64
	// State is how the leader replicates to it: "probe" (finding where the
	// logs diverge), "replicate" (streaming), or "snapshot" (sending one).
	State string
	// RecentActive is false when the member has not answered within an
	// election timeout.
	RecentActive bool
	// PendingSnapshot is the index of a snapshot in flight, 0 when none.
	PendingSnapshot uint64
	// IsLearner is true for non-voting members.
	IsLearner bool
}

// Progress returns the leader's view of every member, itself included,
// sorted by id; nil when this node is not the leader. It asks raft, so it
// costs a round trip into the raft goroutine: for views, not hot paths.
func (n *Node) Progress() []FollowerProgress {
	st := n.raft.Status()
	if st.Progress == nil {
		return nil
	}
	out := make([]FollowerProgress, 0, len(st.Progress))
	for id, pr := range st.Progress {
		out = append(out, FollowerProgress{
			ID: id, Match: pr.Match, Next: pr.Next, State: stateName(pr.State),
			RecentActive: pr.RecentActive, PendingSnapshot: pr.PendingSnapshot, IsLearner: pr.IsLearner,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func stateName(s tracker.StateType) string {
	switch s {
	case tracker.StateReplicate:
		return "replicate"
	case tracker.StateSnapshot:
		return "snapshot"
	default:
		return "probe"
	}
}

// LogBounds returns the first and last index of the stored raft log and the
// index of the newest snapshot.
func (n *Node) LogBounds() (first, last, snapshot uint64) {
	first, _ = n.storage.FirstIndex()
	last, _ = n.storage.LastIndex()
	if md := n.storage.SnapshotMetadata(); md != nil {
		snapshot = md.GetIndex()
	}
	return first, last, snapshot
}

// SnapshotTerm is the term of the newest snapshot's index; 0 before the
// first snapshot.
func (n *Node) SnapshotTerm() uint64 { return n.storage.SnapshotMetadata().GetTerm() }
