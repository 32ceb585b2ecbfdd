package consensus

// The validator's state machine (internal/state) under raft: the
// integration of the two packages, kept here because state does not know
// raft's types and consensus imports state. The nodes talk through the
// package's test network (helpers_test.go).

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

var (
	_ Applier          = (*state.Machine)(nil)
	_ Snapshotter      = (*state.Machine)(nil)
	_ SnapshotVerifier = (*state.Machine)(nil)
)

// TestProposeAndWaitThroughRaft wires the state machine under a single-node
// raft the way the pipeline will: propose an entry, then wait on Changed
// for the proposal's record, with a deadline, re-proposing the same id when
// it does not appear (a no-op if the first attempt did commit).
func TestProposeAndWaitThroughRaft(t *testing.T) {
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	dir := t.TempDir()
	db, err := storage.Open(storage.Options{Dir: dir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.Open(db, state.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	node, err := Start(Config{ID: 1, TickInterval: 20 * time.Millisecond, Logger: logger}, db, m, nil)
	if err != nil {
		t.Fatal(err)
	}

	wallet := common.HexToAddress("0x1234567890abcdef1234567890abcdef12345678")
	var id [32]byte
	id[0] = 7
	p := &ledgerpb.Proposal{
		Id: id[:], Action: ledgerpb.Action_ACTION_WRITE, Wallet: wallet.Bytes(), Organization: "default",
		Path:    proposal.ContentPath("ledger", wallet, "default", "notes/n1"),
		Message: []byte(`{"title":"via raft"}`),
	}
	data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{
		SealedAtMs: 1, Items: []*ledgerpb.BatchItem{{Proposal: p}},
	}}})
	if err != nil {
		t.Fatal(err)
	}

	rec := proposeAndWait(t, node, m, id, data)
	if rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED {
		t.Fatalf("record = %v", rec)
	}
	if n, _, err := m.Node(p.GetPath()); err != nil || n.GetRevision() != 1 {
		t.Fatalf("node = %v, %v", n, err)
	}
	// The same id again is a no-op: propose it, then a marker behind it in
	// the log, and once the marker is applied the duplicate was too.
	if err := node.Propose(context.Background(), data); err != nil {
		t.Fatal(err)
	}
	marker := proto.Clone(p).(*ledgerpb.Proposal)
	var markerID [32]byte
	markerID[0] = 8
	marker.Id, marker.Path = markerID[:], p.GetPath()+"-marker"
	markerData, _ := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{
		SealedAtMs: 2, Items: []*ledgerpb.BatchItem{{Proposal: marker}},
	}}})
	proposeAndWait(t, node, m, markerID, markerData)
	if n, _, _ := m.Node(p.GetPath()); n.GetRevision() != 1 {
		t.Fatalf("a re-proposed id wrote revision %d", n.GetRevision())
	}
	if again, _, _ := m.Record(id); again.GetCommitIndex() != rec.GetCommitIndex() {
		t.Fatalf("a re-proposed id moved its record from %d to %d", rec.GetCommitIndex(), again.GetCommitIndex())
	}
	hash, applied := m.StateHash(), m.AppliedIndex()
	node.Stop()
	if err := node.Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: raft starts after the applied index; nothing is applied twice.
	db, err = storage.Open(storage.Options{Dir: dir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, err = state.Open(db, state.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if m.StateHash() != hash || m.AppliedIndex() != applied {
		t.Fatal("state changed across the restart")
	}
	node, err = Start(Config{ID: 1, TickInterval: 20 * time.Millisecond, Logger: logger}, db, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for node.Status().AppliedIndex <= applied { // the new leader's empty entry
		if time.Now().After(deadline) {
			t.Fatal("no progress after restart")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if evs, _ := m.EventsSince(0, 0); len(evs) != 2 {
		t.Fatalf("%d events after restart, want 2", len(evs))
	}
}

// proposeAndWait is the caller's side of "Propose returning nil means
// maybe": propose, wait on Changed for the record with a deadline, and
// propose the same bytes again if it does not appear.
func proposeAndWait(t *testing.T, node *Node, m *state.Machine, id [32]byte, data []byte) *ledgerpb.ProposalRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		changed := m.Changed()
		if rec, ok, _ := m.Record(id); ok {
			return rec
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := node.Propose(ctx, data)
		cancel()
		if err != nil && !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrProposalDropped) &&
			!errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		timeout := time.After(time.Second)
	wait:
		for {
			select {
			case <-changed:
				changed = m.Changed()
				if rec, ok, _ := m.Record(id); ok {
					return rec
				}
			case <-timeout:
				break wait
			}
		}
	}
	t.Fatal("proposal not applied in time")
	return nil
}

// TestFollowerCatchesUpThroughSnapshot runs three validators with the real
// state machine and frequent snapshots. A follower cut off while the others
// commit well past their compaction point comes back through a snapshot
// and ends at the same applied index with the same state hash, content and
// events; then all three keep agreeing.
func TestFollowerCatchesUpThroughSnapshot(t *testing.T) {
	ids := []uint64{1, 2, 3}
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	nw := newNetwork(t, ids...)
	machines := map[uint64]*state.Machine{}
	nodes := map[uint64]*Node{}
	for _, id := range ids {
		db, err := storage.Open(storage.Options{Dir: t.TempDir(), Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		m, err := state.Open(db, state.Options{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		n, err := Start(Config{
			ID: id, Peers: ids, TickInterval: 20 * time.Millisecond, Logger: logger,
			SnapshotEntries: 40, CompactionMargin: 10,
		}, db, m, nw.transport(id))
		if err != nil {
			t.Fatal(err)
		}
		nw.attach(id, n, db)
		machines[id], nodes[id] = m, n
		t.Cleanup(func() {
			n.Stop()
			if err := n.Err(); err != nil {
				t.Errorf("node %d: %v", id, err)
			}
			db.Close()
		})
	}
	leader := func() uint64 {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, id := range ids {
				if st := nodes[id].Status(); st.Role == RoleLeader {
					return id
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("no leader")
		return 0
	}
	wallet := common.HexToAddress("0x1234567890abcdef1234567890abcdef12345678")
	propose := func(n int) {
		var id [32]byte
		id[0], id[1], id[2] = 9, byte(n>>8), byte(n)
		p := &ledgerpb.Proposal{
			Id: id[:], Action: ledgerpb.Action_ACTION_WRITE, Wallet: wallet.Bytes(), Organization: "default",
			Path:    proposal.ContentPath("ledger", wallet, "default", fmt.Sprintf("notes/n%d", n)),
			Message: []byte(fmt.Sprintf(`{"n":%d,"nested":{"v":%d}}`, n, n)),
		}
		data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{
			SealedAtMs: int64(n), Items: []*ledgerpb.BatchItem{{Proposal: p}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		l := leader()
		proposeAndWait(t, nodes[l], machines[l], id, data)
	}
	agree := func(which ...uint64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ok := true
			for _, id := range which[1:] {
				a, b := machines[which[0]], machines[id]
				if a.AppliedIndex() != b.AppliedIndex() || a.StateHash() != b.StateHash() {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				for _, id := range which {
					t.Logf("node %d: applied %d hash %x", id, machines[id].AppliedIndex(), machines[id].StateHash())
				}
				t.Fatal("the validators do not agree")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	for i := range 5 {
		propose(i)
	}
	agree(ids...)
	lag := uint64(1)
	if leader() == lag {
		lag = 2
	}
	lagLast, _ := nodes[lag].Storage().LastIndex()
	nw.partition(lag, true)
	for i := 5; i < 125; i++ {
		propose(i)
	}
	for _, id := range ids {
		if id == lag {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for first, _ := nodes[id].Storage().FirstIndex(); first <= lagLast+1; first, _ = nodes[id].Storage().FirstIndex() {
			if time.Now().After(deadline) {
				t.Fatalf("node %d did not compact past %d", id, lagLast)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	nw.partition(lag, false)
	agree(ids...)
	if snap := nodes[lag].Storage().SnapshotMetadata(); snap.GetIndex() <= lagLast {
		t.Fatalf("the follower's snapshot is at %d, not past %d: it did not catch up through one", snap.GetIndex(), lagLast)
	}
	ref := machines[leader()]
	for _, n := range []int{0, 60, 124} {
		p := proposal.ContentPath("ledger", wallet, "default", fmt.Sprintf("notes/n%d/nested", n))
		a, okA, errA := ref.Node(p)
		b, okB, errB := machines[lag].Node(p)
		if errA != nil || errB != nil || !okA || !okB || !proto.Equal(a, b) {
			t.Fatalf("node %s: %v / %v", p, errA, errB)
		}
	}
	evA, _ := ref.EventsSince(0, 0)
	evB, _ := machines[lag].EventsSince(0, 0)
	if len(evA) != 125 || len(evB) != 125 || !proto.Equal(evA[124], evB[124]) {
		t.Fatalf("events: %d on the leader, %d on the follower", len(evA), len(evB))
	}
	for i := 125; i < 130; i++ {
		propose(i)
	}
	agree(ids...)
}
