package consensus

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// testView is a log of entries 1..10: terms 1 (1–4), 2 (5–7), 3 (8–10);
// committed and persisted up to 6 at term 3; entries below 3 compacted.
func testView() peerView {
	terms := map[uint64]uint64{2: 1, 3: 1, 4: 1, 5: 2, 6: 2, 7: 2, 8: 3, 9: 3, 10: 3}
	return peerView{
		last: 10, stored: 10, commit: 6, term: 3,
		termAt: func(i uint64) (uint64, error) {
			switch {
			case i < 2:
				return 0, raft.ErrCompacted
			case i > 10:
				return 0, raft.ErrUnavailable
			}
			return terms[i], nil
		},
	}
}

func ent(index, term uint64) *raftpb.Entry {
	return &raftpb.Entry{Index: new(index), Term: new(term), Type: raftpb.EntryNormal.Enum(), Data: []byte("x")}
}

func msgApp(term, prev, prevTerm, commit uint64, ents ...*raftpb.Entry) *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term),
		Index: new(prev), LogTerm: new(prevTerm), Commit: new(commit), Entries: ents}
}

func msgHeartbeat(term, commit uint64) *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term), Commit: new(commit)}
}

func msgSnap(term, index, snapTerm uint64, cs *raftpb.ConfState) *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term),
		Snapshot: &raftpb.Snapshot{Data: []byte("d"), Metadata: &raftpb.SnapshotMetadata{Index: new(index), Term: new(snapTerm), ConfState: cs}}}
}

func msgProp(ents ...*raftpb.Entry) *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Entries: ents}
}

func confChangeEntry(t *testing.T, cc *raftpb.ConfChange) *raftpb.Entry {
	data, err := proto.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	return &raftpb.Entry{Type: raftpb.EntryConfChange.Enum(), Data: data}
}

func TestCheckPeerMessage(t *testing.T) {
	voters := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	addNode := confChangeEntry(t, &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(4))})
	badCC := &raftpb.Entry{Type: raftpb.EntryConfChange.Enum(), Data: []byte{0xff, 0xff}}
	withIndex := func(e *raftpb.Entry, index, term uint64) *raftpb.Entry {
		e = proto.Clone(e).(*raftpb.Entry)
		e.Index, e.Term = new(index), new(term)
		return e
	}

	for _, tc := range []struct {
		name string
		m    *raftpb.Message
		want error  // nil, ErrMalformedMessage or ErrInconsistentMessage
		low  uint64 // when accepted; noLow unless raft may cut its log
	}{
		// What a correct leader sends.
		{name: "heartbeat at the last index", m: msgHeartbeat(3, 10), low: noLow},
		{name: "heartbeat of an older term", m: msgHeartbeat(2, 4), low: noLow},
		{name: "append after the end", m: msgApp(3, 10, 3, 10, ent(11, 3), ent(12, 3)), low: noLow},
		{name: "append of a new term", m: msgApp(4, 10, 3, 6, ent(11, 4)), low: noLow},
		{name: "empty append (probe)", m: msgApp(3, 8, 3, 6), low: noLow},
		{name: "append that repeats stored entries", m: msgApp(3, 6, 2, 6, ent(7, 2), ent(8, 3)), low: noLow},
		{name: "append that replaces an uncommitted tail", m: msgApp(4, 7, 2, 6, ent(8, 4)), low: 8},
		{name: "append reaching back into the compacted log", m: msgApp(3, 0, 0, 6, ent(1, 1), ent(2, 1)), low: noLow},
		{name: "append with a conf change", m: msgApp(3, 10, 3, 6, withIndex(addNode, 11, 3)), low: noLow},
		{name: "snapshot past the end", m: msgSnap(3, 20, 3, voters), low: noLow},
		{name: "snapshot behind the stored end", m: msgSnap(4, 8, 4, voters), low: 8},
		{name: "snapshot of a committed index", m: msgSnap(3, 6, 2, voters), low: 6},
		{name: "joint snapshot", m: msgSnap(3, 20, 3, &raftpb.ConfState{Voters: []uint64{1, 2}, VotersOutgoing: []uint64{1, 2, 3}, LearnersNext: []uint64{3}}), low: noLow},
		{name: "forwarded proposal", m: msgProp(&raftpb.Entry{Data: []byte("p")}), low: noLow},
		{name: "forwarded conf change", m: msgProp(addNode), low: noLow},
		{name: "vote", m: &raftpb.Message{Type: raftpb.MsgVote.Enum(), Term: new(uint64(4)), Index: new(uint64(10)), LogTerm: new(uint64(3))}, low: noLow},
		{name: "append response", m: &raftpb.Message{Type: raftpb.MsgAppResp.Enum(), Term: new(uint64(3)), Index: new(uint64(12))}, low: noLow},

		// raft panics on these.
		{name: "heartbeat past the last index", m: msgHeartbeat(3, 11), want: ErrInconsistentMessage},
		{name: "append numbered below its index", m: msgApp(3, 8, 3, 8, ent(1, 3)), want: ErrMalformedMessage},
		{name: "append numbered past its end", m: msgApp(3, 8, 3, 8, ent(9, 3), ent(11, 3)), want: ErrMalformedMessage},
		{name: "append wrapping past 2^62", m: msgApp(3, maxPeerIndex-1, 3, 0, ent(maxPeerIndex, 3)), want: ErrMalformedMessage},
		{name: "snapshot with a duplicate voter", m: msgSnap(3, 20, 3, &raftpb.ConfState{Voters: []uint64{1, 1}}), want: ErrMalformedMessage},
		{name: "snapshot with a learner that votes", m: msgSnap(3, 20, 3, &raftpb.ConfState{Voters: []uint64{1}, Learners: []uint64{1}}), want: ErrMalformedMessage},
		{name: "snapshot with LearnersNext outside VotersOutgoing", m: msgSnap(3, 20, 3, &raftpb.ConfState{Voters: []uint64{1}, LearnersNext: []uint64{2}}), want: ErrMalformedMessage},
		{name: "empty proposal", m: msgProp(), want: ErrMalformedMessage},
		{name: "proposal with an undecodable conf change", m: msgProp(badCC), want: ErrMalformedMessage},
		{name: "term that wraps", m: msgHeartbeat(math64, 0), want: ErrMalformedMessage},
		{name: "heartbeat without a term", m: msgHeartbeat(0, 0), want: ErrMalformedMessage},
		{name: "append response past 2^62", m: &raftpb.Message{Type: raftpb.MsgAppResp.Enum(), Term: new(uint64(3)), Index: new(uint64(math64))}, want: ErrMalformedMessage},

		// Invariants of each kind.
		{name: "append with decreasing terms", m: msgApp(4, 10, 3, 6, ent(11, 4), ent(12, 3)), want: ErrMalformedMessage},
		{name: "append with an entry above its term", m: msgApp(3, 10, 3, 6, ent(11, 4)), want: ErrMalformedMessage},
		{name: "append with an entry below its log term", m: msgApp(3, 10, 3, 6, ent(11, 2)), want: ErrMalformedMessage},
		{name: "append with log term above its term", m: msgApp(3, 10, 4, 6), want: ErrMalformedMessage},
		{name: "append with an undecodable conf change", m: msgApp(3, 10, 3, 6, withIndex(badCC, 11, 3)), want: ErrMalformedMessage},
		{name: "append rewriting a committed entry", m: msgApp(4, 4, 1, 6, ent(5, 4)), want: ErrInconsistentMessage},
		{name: "append after a committed entry of another term", m: msgApp(4, 5, 3, 6, ent(6, 4)), want: ErrInconsistentMessage},
		{name: "snapshot at index 0", m: msgSnap(3, 0, 3, voters), want: ErrMalformedMessage},
		{name: "snapshot above its message's term", m: msgSnap(3, 20, 4, voters), want: ErrMalformedMessage},
		{name: "snapshot without voters", m: msgSnap(3, 20, 3, &raftpb.ConfState{Learners: []uint64{1}}), want: ErrMalformedMessage},
		{name: "snapshot without metadata", m: &raftpb.Message{Type: raftpb.MsgSnap.Enum(), Term: new(uint64(3))}, want: ErrMalformedMessage},
		{name: "snapshot contradicting a committed entry", m: msgSnap(3, 5, 3, voters), want: ErrInconsistentMessage},
		{name: "proposal with a term", m: func() *raftpb.Message { m := msgProp(ent(0, 0)); m.Term = new(uint64(9)); return m }(), want: ErrMalformedMessage},
		{name: "proposal of reserved data", m: msgProp(&raftpb.Entry{Data: encodeTruncationEntry(5)}), want: ErrMalformedMessage},
		{name: "negative message type", m: &raftpb.Message{Type: raftpb.MessageType(-128).Enum(), Term: new(uint64(3))}, want: ErrMalformedMessage},
		{name: "unknown message type", m: &raftpb.Message{Type: raftpb.MessageType(99).Enum(), Term: new(uint64(3))}, want: ErrMalformedMessage},
		{name: "local message", m: &raftpb.Message{Type: raftpb.MsgHup.Enum(), Term: new(uint64(3))}, want: ErrMalformedMessage},
		{name: "local responses", m: &raftpb.Message{Type: raftpb.MsgAppResp.Enum(), Term: new(uint64(3)), Responses: []*raftpb.Message{{}}}, want: ErrMalformedMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			low, err := checkPeerMessage(tc.m, testView())
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if low != tc.low {
					t.Fatalf("low %d, want %d", low, tc.low)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var mf interface{ Malformed() bool }
			if !errors.As(err, &mf) || mf.Malformed() != (tc.want == ErrMalformedMessage) {
				t.Fatalf("%v: Malformed() does not match its sentinel", err)
			}
		})
	}
}

// The committed-prefix checks apply only to messages of this node's term
// or later: raft ignores older ones.
func TestCheckPeerMessageOlderTerm(t *testing.T) {
	v := testView()
	if _, err := checkPeerMessage(msgApp(2, 4, 1, 6, ent(5, 2), ent(6, 1+1)), v); err != nil {
		t.Fatalf("matching append of an older term refused: %v", err)
	}
	if _, err := checkPeerMessage(msgApp(2, 4, 1, 4, ent(5, 1)), v); err != nil {
		t.Fatalf("stale append of an older term refused (raft ignores it): %v", err)
	}
	v.last = 8 // a cut raft may have made
	if _, err := checkPeerMessage(msgHeartbeat(3, 9), v); !errors.Is(err, ErrInconsistentMessage) {
		t.Fatalf("heartbeat past a pending cut: %v", err)
	}
}

const math64 = ^uint64(0)
