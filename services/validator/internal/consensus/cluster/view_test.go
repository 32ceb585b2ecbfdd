package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

type fixedState struct {
	applied uint64
	hashes  map[uint64][32]byte
}

func (s fixedState) AppliedIndex() uint64 { return s.applied }
func (s fixedState) StateHash() [32]byte  { return s.hashes[s.applied] }
func (s fixedState) StateHashAt(i uint64) ([32]byte, bool) {
	h, ok := s.hashes[i]
	return h, ok
}

type fixedEpoch uint64

func (e fixedEpoch) Current() uint64 { return uint64(e) }

type fixedRate float64

func (r fixedRate) PerSecond() float64 { return float64(r) }

// newTestView is node 1's view of a cluster of 1, 2 and 3, with a given
// leadership history.
func newTestView(t *testing.T, node *fakeNode, tr *fakeTransport, history ...api.LeadershipChange) *View {
	t.Helper()
	members := NewMembership(MembershipConfig{Self: 1, Raft: node, AddressBook: newFakeBook(), Peers: tr, Initial: []api.Member{
		{ID: 1, PeerAddr: "h1:1", APIURL: "http://h1"}, {ID: 2, PeerAddr: "h2:1", APIURL: "http://h2"}, {ID: 3, PeerAddr: "h3:1", APIURL: "http://h3"},
	}})
	leadership := NewLeadershipLog(LeadershipConfig{Node: node})
	for _, h := range history {
		leadership.record(h)
	}
	return NewView(ViewConfig{NodeID: 1, ClusterID: "test", Node: node, State: fixedState{applied: 90, hashes: map[uint64][32]byte{90: {0xab}}},
		Epochs: fixedEpoch(12), Peers: tr, Membership: members, Leadership: leadership, AppliedRate: fixedRate(20),
		Reproposed: func() uint64 { return 4 }, Removed: fixedRemoved{5}, ActivityWindow: 60 * time.Millisecond, PromoteEvery: 10 * time.Millisecond})
}

type fixedRemoved []uint64

func (r fixedRemoved) RemovedMembers() ([]uint64, error) { return r, nil }

// leading makes node 1 the leader.
func leading(node *fakeNode) {
	node.setStatus(consensus.Status{ID: 1, Role: consensus.RoleLeader, Term: 2, Leader: 1})
}

// active is the leader's progress of a member streaming entries, at match.
func active(id, match uint64) consensus.FollowerProgress {
	return consensus.FollowerProgress{ID: id, Match: match, State: "replicate", RecentActive: true}
}

// TestAddPromoteAndRemoveMember: an added member joins as a learner with
// its addresses as the context, is promoted without a context, and the
// leader can then remove itself.
func TestAddPromoteAndRemoveMember(t *testing.T) {
	node := newFakeNode(1)
	node.install = true
	leading(node)
	node.setProgress(active(1, 100))
	v := newTestView(t, node, newFakeTransport(nil))
	if err := v.AddMember(context.Background(), api.Member{ID: 4, Name: "x", PeerAddr: "h4:1", APIURL: "http://h4"}); err != nil {
		t.Fatal(err)
	}
	if voters, learners := v.Membership(); !slices.Equal(voters, []uint64{1}) || !slices.Equal(learners, []uint64{4}) {
		t.Fatalf("after the addition: voters %v learners %v", voters, learners)
	}
	node.setProgress(active(1, 100), active(4, 100))
	if err := v.PromoteMember(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if err := v.RemoveMember(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if voters, learners := v.Membership(); !slices.Equal(voters, []uint64{4}) || len(learners) > 0 {
		t.Fatalf("voters %v learners %v", voters, learners)
	}
	if len(node.proposed) != 3 {
		t.Fatalf("%d conf changes proposed", len(node.proposed))
	}
	add, _ := node.proposed[0].AsV1()
	var ctx ledgerpb.Member
	if add.GetType() != raftpb.ConfChangeAddLearnerNode || add.GetNodeId() != 4 || proto.Unmarshal(add.GetContext(), &ctx) != nil ||
		!proto.Equal(&ctx, &ledgerpb.Member{Id: 4, PeerAddr: "h4:1", ApiUrl: "http://h4"}) {
		t.Fatalf("add proposed as %v", add)
	}
	if pr, _ := node.proposed[1].AsV1(); pr.GetType() != raftpb.ConfChangeAddNode || pr.GetNodeId() != 4 || len(pr.GetContext()) != 0 {
		t.Fatalf("promotion proposed as %v", pr)
	}
	if rm, _ := node.proposed[2].AsV1(); rm.GetType() != raftpb.ConfChangeRemoveNode || rm.GetNodeId() != 1 || len(rm.GetContext()) != 0 {
		t.Fatalf("remove proposed as %v", rm)
	}
}

// TestRunPromotions: the leader promotes a learner once it is caught up,
// not before.
func TestRunPromotions(t *testing.T) {
	node := newFakeNode(1)
	node.install = true
	leading(node)
	node.setConfState([]uint64{1}, []uint64{4})
	node.setProgress(active(1, 1000), active(4, 1000-DefaultPromoteMargin-1))
	v := newTestView(t, node, newFakeTransport(nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); v.RunPromotions(ctx) }()
	defer func() { cancel(); <-done }()
	behindUntil := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(behindUntil) {
		if voters, _ := v.Membership(); slices.Contains(voters, 4) {
			t.Fatal("a learner behind by more than the margin was promoted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	node.setProgress(active(1, 1000), active(4, 1000-DefaultPromoteMargin))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if voters, learners := v.Membership(); slices.Equal(voters, []uint64{1, 4}) && len(learners) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a caught-up learner was not promoted")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMembershipRefusals: the view refuses before proposing, with the rule's
// reason; a voter that answers within the activity window counts even
// though its first sample said otherwise.
func TestMembershipRefusals(t *testing.T) {
	node := newFakeNode(1, 2, 3)
	node.install = true
	v := newTestView(t, node, newFakeTransport(nil))
	var apiErr *apierror.Error
	if err := v.AddMember(context.Background(), api.Member{ID: 4}); !errors.As(err, &apiErr) || apiErr.Code != apierror.LeaderUnknown {
		t.Fatalf("a change on a follower: %v", err)
	}
	leading(node)
	node.setProgress(active(1, 10), active(2, 10), consensus.FollowerProgress{ID: 3, Match: 10})
	if err := v.AddMember(context.Background(), api.Member{ID: 5}); !errors.As(err, &apiErr) || apiErr.Details["reason"] != ReasonRemovedID {
		t.Fatalf("re-adding a removed id: %v", err)
	}
	if err := v.RemoveMember(context.Background(), 2); !errors.As(err, &apiErr) || apiErr.Details["reason"] != ReasonNoQuorum || !apiErr.Retryable {
		t.Fatalf("removing a voter with another unreachable: %v", err)
	}
	// A window long enough for the answer below however loaded the machine.
	v.activityWindow = 5 * time.Second
	go func() {
		time.Sleep(20 * time.Millisecond)
		node.setProgress(active(1, 10), active(2, 10), active(3, 10))
	}()
	if err := v.RemoveMember(context.Background(), 2); err != nil {
		t.Fatalf("removing a voter when the other answers within the window: %v", err)
	}
	if len(node.proposed) != 1 {
		t.Fatalf("%d conf changes proposed, want only the allowed removal", len(node.proposed))
	}
}

func TestMembershipChangeFailures(t *testing.T) {
	node := newFakeNode(1)
	leading(node)
	node.setProgress(active(1, 100))
	v := newTestView(t, node, newFakeTransport(nil))
	// Raft accepts the proposal but never installs it: a retryable timeout
	// at the caller's deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var apiErr *apierror.Error
	if err := v.AddMember(ctx, api.Member{ID: 4, PeerAddr: "h4:1"}); !errors.As(err, &apiErr) || apiErr.Code != apierror.Timeout || !apiErr.Retryable {
		t.Fatalf("a change never installed: %v", err)
	}
	node.proposeErr = consensus.ErrStopped
	if err := v.AddMember(context.Background(), api.Member{ID: 6}); !errors.As(err, &apiErr) || apiErr.Code != apierror.LeaderUnknown {
		t.Fatalf("a refused proposal: %v", err)
	}
}

// TestRaftMetricsElections: an election is a change to a known leader;
// role changes of this node and the leaderless moments between are not.
func TestRaftMetricsElections(t *testing.T) {
	node := newFakeNode(1)
	node.status = consensus.Status{ID: 1, Role: consensus.RoleFollower, Term: 5, Leader: 3, CommitIndex: 95}
	node.first, node.last, node.snapshot = 10, 100, 50
	now := time.Now().UTC()
	old := now.Add(-48 * time.Hour)
	v := newTestView(t, node, newFakeTransport(map[uint64]string{2: "h2:1", 3: "h3:1"}),
		api.LeadershipChange{Term: 1, Leader: 0, Role: "FOLLOWER", At: old},
		api.LeadershipChange{Term: 1, Leader: 2, Role: "FOLLOWER", At: old},  // election, a day ago
		api.LeadershipChange{Term: 2, Leader: 0, Role: "CANDIDATE", At: now}, // no leader: not one
		api.LeadershipChange{Term: 2, Leader: 2, Role: "FOLLOWER", At: now},  // the same leader again: not one
		api.LeadershipChange{Term: 5, Leader: 3, Role: "FOLLOWER", At: now},  // election
	)
	m := v.RaftMetrics()
	if m.Elections.Count != 5 || m.Elections.Count24h != 1 || m.Elections.LastAt == nil || !m.Elections.LastAt.Equal(now) {
		t.Fatalf("elections %+v", m.Elections)
	}
	if m.NodeID != 1 || m.Role != "FOLLOWER" || m.Term != 5 || m.Leader != 3 || m.CommitIndex != 95 || m.AppliedIndex != 90 ||
		m.FirstLogIndex != 10 || m.LastLogIndex != 100 || m.LastSnapshotIndex != 50 || m.AppendRatePerSec != 20 ||
		m.ProposalsDropped != 4 || m.Transport == nil || m.Transport.Peers != 2 || m.Transport.MsgsSent != 7 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestReplication(t *testing.T) {
	node := newFakeNode(1, 2, 3)
	node.status = consensus.Status{ID: 1, Role: consensus.RoleLeader, Term: 3, Leader: 1}
	node.last = 100
	node.progress = []consensus.FollowerProgress{
		{ID: 1, Match: 100, Next: 101, State: "replicate", RecentActive: true},
		{ID: 2, Match: 60, Next: 61, State: "replicate", RecentActive: true},
		{ID: 3, Match: 0, Next: 1, State: "probe", IsLearner: true},
	}
	r := newTestView(t, node, newFakeTransport(nil)).Replication()
	if !r.IsLeader || r.Leader != 1 || r.LastIndex != 100 || r.MaxLagEntries != 100 || len(r.Nodes) != 3 {
		t.Fatalf("replication %+v", r)
	}
	// 40 entries behind at 20 entries a second: 2 s.
	if n := r.Nodes[1]; n.NodeID != 2 || n.Name != "validator-2" || n.LagEntries != 40 || n.LagMs != 2000 || n.State != "replicate" {
		t.Fatalf("node 2 %+v", n)
	}
	if n := r.Nodes[0]; n.LagEntries != 0 || n.LagMs != 0 {
		t.Fatalf("the leader lags: %+v", n)
	}
	if n := r.Nodes[2]; !n.Learner || n.LagEntries != 100 {
		t.Fatalf("node 3 %+v", n)
	}
}

func TestStatusAndPeers(t *testing.T) {
	node := newFakeNode(1, 2, 3)
	node.status = consensus.Status{ID: 1, Role: consensus.RoleLeader, Term: 3, Leader: 1, CommitIndex: 92}
	tr := newFakeTransport(nil)
	errAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	tr.stats = map[uint64]transport.PeerStats{2: {Connected: true, MsgsSent: 3, LastError: "reset", LastErrorAt: errAt, Timeouts: 1}}
	v := newTestView(t, node, tr)
	st := v.Status()
	if st.ClusterID != "test" || st.NodeID != 1 || st.Name != "validator-1" || st.Role != "LEADER" || st.Term != 3 || st.Leader != 1 ||
		!slices.Equal(st.Peers, []string{"validator-2", "validator-3"}) || st.Epoch != 12 || st.CommitIndex != 92 ||
		st.AppliedIndex != 90 || st.StateHash != "0xab00000000000000000000000000000000000000000000000000000000000000" {
		t.Fatalf("status %+v", st)
	}
	if h, ok := v.StateHashAt(90); !ok || h != st.StateHash {
		t.Fatalf("StateHashAt(90) = %s, %v", h, ok)
	}
	if _, ok := v.StateHashAt(89); ok {
		t.Fatal("a hash for an index the state does not hold")
	}
	if v.PeerTransport(1) != nil || v.PeerTransport(3) != nil {
		t.Fatal("a transport view of this node or of a node not dialled")
	}
	p := v.PeerTransport(2)
	if p == nil || !p.Connected || p.MsgsSent != 3 || p.LastError != "reset" || p.LastErrorAt == nil ||
		p.LastErrorAt.Location() != time.UTC || !p.LastErrorAt.Equal(errAt) || p.Timeouts == nil || *p.Timeouts != 1 {
		t.Fatalf("peer 2 %+v", p)
	}
}
