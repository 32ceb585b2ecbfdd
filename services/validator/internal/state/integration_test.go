package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

var _ consensus.Applier = (*state.Machine)(nil)

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
	node, err := consensus.Start(consensus.Config{ID: 1, TickInterval: 20 * time.Millisecond, Logger: logger}, db, m, nil)
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
	if n, err := m.Node(p.GetPath()); err != nil || n.GetRevision() != 1 {
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
	if n, _ := m.Node(p.GetPath()); n.GetRevision() != 1 {
		t.Fatalf("a re-proposed id wrote revision %d", n.GetRevision())
	}
	if again, _ := m.Proposal(id); again.GetCommitIndex() != rec.GetCommitIndex() {
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
	node, err = consensus.Start(consensus.Config{ID: 1, TickInterval: 20 * time.Millisecond, Logger: logger}, db, m, nil)
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
func proposeAndWait(t *testing.T, node *consensus.Node, m *state.Machine, id [32]byte, data []byte) *ledgerpb.ProposalRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		changed := m.Changed()
		if rec, err := m.Proposal(id); err == nil {
			return rec
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := node.Propose(ctx, data)
		cancel()
		if err != nil && !errors.Is(err, consensus.ErrNoLeader) && !errors.Is(err, consensus.ErrProposalDropped) &&
			!errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		timeout := time.After(time.Second)
	wait:
		for {
			select {
			case <-changed:
				changed = m.Changed()
				if rec, err := m.Proposal(id); err == nil {
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
