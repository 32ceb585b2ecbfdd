package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

func testConfig(t testing.TB, id uint64, peers ...uint64) Config {
	return Config{
		ID:           id,
		Peers:        peers,
		TickInterval: 20 * time.Millisecond,
		Logger:       zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	}
}

func waitLeader(t testing.TB, timeout time.Duration, nodes ...*Node) *Node {
	t.Helper()
	var leader *Node
	waitFor(t, timeout, "a leader", func() bool {
		for _, n := range nodes {
			if n != nil && n.Status().Role == RoleLeader {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"single node defaults", Config{ID: 1}, true},
		{"three voters", Config{ID: 2, Peers: []uint64{1, 2, 3}}, true},
		{"join without self in peers", Config{ID: 4, Peers: []uint64{1, 2, 3}, Join: true}, true},
		{"zero id", Config{}, false},
		{"self not in peers", Config{ID: 4, Peers: []uint64{1, 2, 3}}, false},
		{"duplicate peer", Config{ID: 1, Peers: []uint64{1, 1}}, false},
		{"election not above heartbeat", Config{ID: 1, ElectionTicks: 2, HeartbeatTicks: 2}, false},
		{"tick too short", Config{ID: 1, TickInterval: time.Microsecond}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", tc.name, err)
		}
	}
	if got := (Config{ID: 7}).withDefaults(); got.TickInterval != 100*time.Millisecond || got.ElectionTicks != 10 ||
		got.HeartbeatTicks != 1 || !slices.Equal(got.Peers, []uint64{7}) {
		t.Errorf("defaults = %+v", got)
	}
}

func TestSingleNodeElectsItselfAndCommits(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	app := newKVApplier(t, db)
	n, err := Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()

	changed := n.LeaderChanged()
	leader := waitLeader(t, 5*time.Second, n)
	select {
	case <-changed:
	default:
		t.Error("LeaderChanged was not signalled on election")
	}
	st := leader.Status()
	if st.Leader != 1 || st.Term == 0 || st.ID != 1 {
		t.Fatalf("status = %+v", st)
	}

	var want []string
	for i := range 50 {
		d := fmt.Sprintf("p%02d", i)
		want = append(want, d)
		if err := n.Propose(context.Background(), []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "50 applied proposals", func() bool { return len(app.data(t)) == 50 })
	if got := app.data(t); !slices.Equal(got, want) {
		t.Fatalf("applied %q, want %q", got, want)
	}
	st = n.Status()
	if st.AppliedIndex != app.AppliedIndex() || st.CommitIndex < st.AppliedIndex {
		t.Fatalf("status %+v, applier at %d", st, app.AppliedIndex())
	}
}

// TestIsLeaderAndLeading: both follow the status; a node waiting for a
// quorum it cannot reach neither leads nor claims a term.
func TestIsLeaderAndLeading(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	alone, err := Start(testConfig(t, 1, 1, 2), db, newKVApplier(t, db), nil) // 2 never answers
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a campaign", func() bool { return alone.Status().Role == RolePreCandidate })
	if id, _, ok := alone.Leading(); alone.IsLeader() || ok || id != 1 {
		t.Fatalf("without a quorum: IsLeader %v, Leading id %d ok %v", alone.IsLeader(), id, ok)
	}
	alone.Stop()

	db2 := openDB(t, t.TempDir())
	defer db2.Close()
	n, err := Start(testConfig(t, 1), db2, newKVApplier(t, db2), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	waitLeader(t, 5*time.Second, n)
	id, term, ok := n.Leading()
	if st := n.Status(); !n.IsLeader() || !ok || id != 1 || term != st.Term || term == 0 {
		t.Fatalf("leading: IsLeader %v, Leading %d %d %v, status %+v", n.IsLeader(), id, term, ok, st)
	}
}

func TestRestartKeepsLogAndDoesNotReapply(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	app := newKVApplier(t, db)
	n, err := Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, 5*time.Second, n)
	for i := range 10 {
		proposeUntilApplied(t, n.Propose, fmt.Sprintf("a%d", i), func() bool { return len(app.data(t)) == i+1 })
	}
	appliedBefore := app.AppliedIndex()
	lastBefore, _ := n.Storage().LastIndex()
	termBefore := n.Status().Term
	n.Stop()
	if err := n.Err(); err != nil {
		t.Fatalf("Err after a clean stop = %v", err)
	}
	if err := n.Propose(context.Background(), []byte("late")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose after Stop = %v, want ErrStopped", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, dir)
	defer db.Close()
	app = newKVApplier(t, db) // fails on any entry at or below appliedBefore
	if app.AppliedIndex() != appliedBefore {
		t.Fatalf("applier reopened at %d, want %d", app.AppliedIndex(), appliedBefore)
	}
	n, err = Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if last, _ := n.Storage().LastIndex(); last < lastBefore {
		t.Fatalf("log shrank from %d to %d across restart", lastBefore, last)
	}
	waitLeader(t, 5*time.Second, n)
	if term := n.Status().Term; term <= termBefore {
		t.Fatalf("term %d after restart, want > %d", term, termBefore)
	}
	for i := range 5 {
		proposeUntilApplied(t, n.Propose, fmt.Sprintf("b%d", i), func() bool { return len(app.data(t)) == 11+i })
	}
	if err := n.Err(); err != nil {
		t.Fatalf("node failed: %v", err)
	}
	got := app.data(t)
	if len(got) != 15 || got[0] != "a0" || got[10] != "b0" {
		t.Fatalf("data after restart = %q", got)
	}
}

func TestStalledApplierDoesNotStallRaft(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	app := newKVApplier(t, db)
	n, err := Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	waitLeader(t, 5*time.Second, n)
	waitFor(t, 5*time.Second, "the leader's empty entry", func() bool { return app.AppliedIndex() > 0 })

	release := make(chan struct{})
	app.mu.Lock()
	app.block = release
	app.mu.Unlock()
	stalledAt := app.AppliedIndex()
	for i := range 20 {
		if err := n.Propose(context.Background(), []byte(fmt.Sprintf("s%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Raft keeps committing while Apply is blocked: the Ready loop is not
	// waiting for it.
	waitFor(t, 5*time.Second, "commits while the applier is stalled", func() bool {
		return n.Status().CommitIndex >= stalledAt+20
	})
	if got := app.AppliedIndex(); got > stalledAt {
		t.Fatalf("applied %d while blocked at %d", got, stalledAt)
	}
	if n.Status().Role != RoleLeader {
		t.Fatal("lost leadership while the applier was stalled")
	}
	app.mu.Lock()
	app.block = nil
	app.mu.Unlock()
	close(release)
	waitFor(t, 5*time.Second, "the backlog to apply", func() bool { return len(app.data(t)) == 20 })
}

func TestApplyErrorStopsNode(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	app := newKVApplier(t, db)
	n, err := Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	waitLeader(t, 5*time.Second, n)
	boom := errors.New("disk on fire")
	app.mu.Lock()
	app.fail = boom
	app.mu.Unlock()
	if err := n.Propose(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("node did not stop after an apply error")
	}
	if err := n.Err(); !errors.Is(err, ErrApplyFailed) || !errors.Is(err, boom) {
		t.Fatalf("Err() = %v, want ErrApplyFailed wrapping the applier's error", err)
	}
	if err := n.Propose(context.Background(), []byte("y")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose after failure = %v, want ErrStopped", err)
	}
}

func TestStartRefusesMismatchedState(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	app := newKVApplier(t, db)
	app.applied = 7 // state from somewhere else, empty raft log
	if _, err := Start(testConfig(t, 1), db, app, nil); !errors.Is(err, ErrInconsistentState) {
		t.Fatalf("Start = %v, want ErrInconsistentState", err)
	}
}

func TestProposeWithoutLeader(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	// One of three voters alone can never elect itself.
	n, err := Start(testConfig(t, 1, 1, 2, 3), db, newKVApplier(t, db), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if err := n.Propose(context.Background(), []byte("x")); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Propose = %v, want ErrNoLeader", err)
	}
}

func TestThreeNodeCluster(t *testing.T) {
	ids := []uint64{1, 2, 3}
	nw := newNetwork(t, ids...)
	dirs := map[uint64]string{}
	dbs := map[uint64]*dbAndApp{}
	nodes := map[uint64]*Node{}
	start := func(id uint64) {
		t.Helper()
		d := &dbAndApp{db: openDB(t, dirs[id])}
		d.app = newKVApplier(t, d.db)
		dbs[id] = d
		nw.attach(id, nil, d.db)
		n, err := Start(testConfig(t, id, ids...), d.db, d.app, nw.transport(id))
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
		nw.attach(id, n, d.db)
	}
	stop := func(id uint64) {
		nw.attach(id, nil, nil)
		nodes[id].Stop()
		if err := nodes[id].Err(); err != nil {
			t.Errorf("node %d: %v", id, err)
		}
		if err := dbs[id].db.Close(); err != nil {
			t.Fatal(err)
		}
		nodes[id] = nil
	}
	for _, id := range ids {
		dirs[id] = t.TempDir()
		start(id)
	}
	defer func() {
		for _, id := range ids {
			if nodes[id] != nil {
				stop(id)
			}
		}
	}()
	all := func() []*Node { return []*Node{nodes[1], nodes[2], nodes[3]} }
	hasAll := func(want int, which ...uint64) func() bool {
		return func() bool {
			for _, id := range which {
				if len(dbs[id].app.data(t)) < want {
					return false
				}
			}
			return true
		}
	}

	leader := waitLeader(t, 10*time.Second, all()...)
	lid := leader.Status().ID
	for _, n := range all() {
		waitFor(t, 5*time.Second, "followers to learn the leader", func() bool { return n.Status().Leader == lid })
	}

	// Proposals on the leader, and on a follower (raft forwards them).
	var follower *Node
	for _, n := range all() {
		if n != leader {
			follower = n
			break
		}
	}
	for i := range 20 {
		proposeUntilApplied(t, leader.Propose, fmt.Sprintf("l%02d", i), hasAll(i+1, lid))
	}
	for i := range 5 {
		proposeUntilApplied(t, follower.Propose, fmt.Sprintf("f%d", i), hasAll(21+i, lid))
	}
	waitFor(t, 10*time.Second, "replication to all three", hasAll(25, ids...))
	ref := dbs[1].app.data(t)
	for _, id := range ids[1:] {
		if got := dbs[id].app.data(t); !slices.Equal(got, ref) {
			t.Fatalf("node %d applied %q, node 1 applied %q", id, got, ref)
		}
	}

	// The leader dies; the other two elect a new one and keep committing.
	stop(lid)
	var rest []uint64
	for _, id := range ids {
		if id != lid {
			rest = append(rest, id)
		}
	}
	newLeader := waitLeader(t, 10*time.Second, nodes[rest[0]], nodes[rest[1]])
	for i := range 5 {
		proposeUntilApplied(t, newLeader.Propose, fmt.Sprintf("n%d", i), hasAll(26+i, rest...))
	}

	// The old leader restarts on its directory and catches up.
	start(lid)
	waitFor(t, 10*time.Second, "the restarted node to catch up", hasAll(30, ids...))
	ref = dbs[rest[0]].app.data(t)
	for _, id := range ids {
		if got := dbs[id].app.data(t); !slices.Equal(got, ref) {
			t.Fatalf("after failover node %d applied %q, want %q", id, got, ref)
		}
	}
	if nw.checked.Load() == 0 {
		t.Fatal("no acknowledgement or vote went through the persistence check")
	}
	t.Logf("%d acknowledgements and votes checked against Pebble", nw.checked.Load())
}

type dbAndApp struct {
	db  *storage.DB
	app *kvApplier
}

// TestRestartBehindConfState covers a crash between persisting a conf
// change's ConfState and the applier recording that entry: on restart raft
// redelivers the conf change, which must reach the applier again but not be
// installed in raft a second time (it is already in the restored ConfState).
func TestRestartBehindConfState(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	app := newKVApplier(t, db)
	n, err := Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, 5*time.Second, n)
	proposeUntilApplied(t, n.Propose, "x", func() bool { return len(app.data(t)) == 1 })
	n.Stop()
	if cs, idx := n.Storage().ConfState(); idx != 1 || !slices.Equal(cs.GetVoters(), []uint64{1}) {
		t.Fatalf("conf state %v at %d", cs, idx)
	}
	// Roll the applier back to before the conf change at index 1.
	if err := db.Pebble().Set(kvAppliedKey, storage.PutUint64(0), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Pebble().DeleteRange(kvDataKey(0), kvDataKey(1<<62), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, dir)
	defer db.Close()
	app = newKVApplier(t, db)
	n, err = Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	waitLeader(t, 5*time.Second, n)
	waitFor(t, 5*time.Second, "the log to be applied again", func() bool { return len(app.data(t)) == 1 })
	proposeUntilApplied(t, n.Propose, "y", func() bool { return len(app.data(t)) == 2 })
	if err := n.Err(); err != nil {
		t.Fatal(err)
	}
	if cs := n.ConfState(); !slices.Equal(cs.GetVoters(), []uint64{1}) {
		t.Fatalf("voters after restart = %v", cs.GetVoters())
	}
	// The conf change not installed again still reached the applier.
	if got := app.membershipChanges(); len(got) != 1 || got[0].Index != 1 ||
		!slices.Equal(got[0].Membership.Changes, []state.MemberChange{{Type: state.AddVoter, NodeID: 1}}) {
		t.Fatalf("membership changes after the restart: %v", got)
	}
}
