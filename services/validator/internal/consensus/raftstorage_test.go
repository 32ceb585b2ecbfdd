package consensus

import (
	"errors"
	"io"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func ents(term uint64, from, to uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &raftpb.Entry{Index: new(i), Term: new(term), Type: raftpb.EntryNormal.Enum(), Data: []byte{byte(i)}})
	}
	return out
}

func checkBounds(t *testing.T, s *Storage, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("bounds [%d, %d], want [%d, %d]", f, l, first, last)
	}
}

func TestStorageAppendOverwriteCompactReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	s, err := OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	hs, cs, _ := s.InitialState()
	if !raft.IsEmptyHardState(hs) || cs == nil || len(cs.GetVoters()) != 0 {
		t.Fatalf("fresh InitialState = %v, %v", hs, cs)
	}
	checkBounds(t, s, 1, 0)
	if term, err := s.Term(0); err != nil || term != 0 {
		t.Fatalf("Term(0) = %d, %v", term, err)
	}

	hs = &raftpb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(3))}
	if err := s.save(hs, ents(1, 1, 5), nil, true); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 1, 5)
	got, err := s.Entries(2, 5, 1<<20)
	if err != nil || len(got) != 3 || got[0].GetIndex() != 2 || got[2].GetIndex() != 4 {
		t.Fatalf("Entries(2,5) = %v, %v", got, err)
	}
	// maxSize: the first entry always, then as many as fit.
	if got, _ := s.Entries(1, 6, 0); len(got) != 1 {
		t.Fatalf("Entries with maxSize 0 returned %d entries, want 1", len(got))
	}
	two := uint64(proto.Size(got[0]) + proto.Size(got[1]))
	if got, _ := s.Entries(1, 6, two); len(got) != 2 {
		t.Fatalf("Entries with room for two returned %d entries", len(got))
	}
	if _, err := s.Entries(1, 7, 1<<20); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Entries beyond last = %v, want ErrUnavailable", err)
	}

	// A new leader overwrites the suffix from 4 with a shorter log.
	if err := s.save(nil, ents(2, 4, 4), nil, true); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 1, 4)
	if term, _ := s.Term(4); term != 2 {
		t.Fatalf("Term(4) = %d, want 2", term)
	}
	if term, _ := s.Term(3); term != 1 {
		t.Fatalf("Term(3) = %d, want 1", term)
	}
	if _, err := s.Term(5); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Term(5) = %v, want ErrUnavailable", err)
	}
	if err := s.save(nil, ents(2, 6, 7), nil, true); err == nil {
		t.Fatal("appending with a gap succeeded")
	}

	if err := s.saveConfState(&raftpb.ConfState{Voters: []uint64{1, 2, 3}}, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(2); !errors.Is(err, ErrCompactBeyondSnapshot) {
		t.Fatalf("Compact without a snapshot = %v, want ErrCompactBeyondSnapshot", err)
	}
	md := &raftpb.SnapshotMetadata{Index: new(uint64(2)), Term: new(uint64(1)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	if ok, err := s.createSnapshot(md, func(w io.Writer) error { _, err := w.Write([]byte("state@2")); return err }); !ok || err != nil {
		t.Fatalf("createSnapshot = %v, %v", ok, err)
	}
	if err := s.Compact(3); !errors.Is(err, ErrCompactBeyondSnapshot) {
		t.Fatalf("Compact past the snapshot = %v, want ErrCompactBeyondSnapshot", err)
	}
	if err := s.Compact(2); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 3, 4)
	if term, err := s.Term(2); err != nil || term != 1 {
		t.Fatalf("Term(2) after compaction = %d, %v", term, err)
	}
	if _, err := s.Entries(2, 4, 1<<20); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries(2) after compaction = %v, want ErrCompacted", err)
	}
	if err := s.Compact(2); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Compact(2) twice = %v, want ErrCompacted", err)
	}
	// The membership changed at 3, after the snapshot: it is not served
	// (a member added at 3 would ignore it) and a new one is wanted.
	if _, err := s.Snapshot(); !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) || !s.wantSnapshot.Load() {
		t.Fatalf("Snapshot() older than the conf state = %v", err)
	}
	md = &raftpb.SnapshotMetadata{Index: new(uint64(3)), Term: new(uint64(1)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	if ok, err := s.createSnapshot(md, func(w io.Writer) error { _, err := w.Write([]byte("state@3")); return err }); !ok || err != nil {
		t.Fatalf("createSnapshot = %v, %v", ok, err)
	}
	if snap, err := s.Snapshot(); err != nil || snap.GetMetadata().GetIndex() != 3 || currentData(t, s) != "state@3" {
		t.Fatalf("Snapshot() = %v, %v", snap, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, dir)
	defer db.Close()
	s, err = OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 3, 4)
	hs, cs, _ = s.InitialState()
	if hs.GetTerm() != 1 || hs.GetVote() != 1 || hs.GetCommit() != 3 {
		t.Fatalf("hard state after reopen = %v", hs)
	}
	if len(cs.GetVoters()) != 3 {
		t.Fatalf("conf state after reopen = %v", cs)
	}
	if _, idx := s.ConfState(); idx != 3 {
		t.Fatalf("conf index after reopen = %d", idx)
	}
	if term, _ := s.Term(4); term != 2 {
		t.Fatalf("Term(4) after reopen = %d", term)
	}
	if snap, err := s.Snapshot(); err != nil || snap.GetMetadata().GetIndex() != 3 || snap.GetMetadata().GetTerm() != 1 ||
		currentData(t, s) != "state@3" || len(snap.GetMetadata().GetConfState().GetVoters()) != 3 {
		t.Fatalf("Snapshot() after reopen = %v, %v", snap, err)
	}
}

func TestStorageSnapshotReplacesLog(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	s, err := OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.save(nil, ents(1, 1, 3), nil, true); err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: new(uint64(10)), Term: new(uint64(3)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}},
	}}
	stageData(t, s, snap.GetMetadata(), []byte("state@10"))
	if err := s.save(&raftpb.HardState{Term: new(uint64(3)), Commit: new(uint64(10))}, nil, snap, true); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 11, 10)
	if term, _ := s.Term(10); term != 3 {
		t.Fatalf("Term(10) = %d", term)
	}
	got, err := s.Snapshot()
	if err != nil || got.GetMetadata().GetIndex() != 10 {
		t.Fatalf("Snapshot() = %v, %v", got, err)
	}
	if cs, idx := s.ConfState(); idx != 10 || len(cs.GetVoters()) != 2 {
		t.Fatalf("conf state = %v at %d", cs, idx)
	}
	if err := s.save(nil, ents(3, 11, 12), nil, true); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 11, 12)
}
