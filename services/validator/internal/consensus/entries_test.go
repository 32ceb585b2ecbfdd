package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// describe renders membership changes for comparison: index, then each
// change, then the context.
func describe(entries []state.Entry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "%d:", e.Index)
		for _, c := range e.Membership.Changes {
			fmt.Fprintf(&b, " %v %d", c.Type, c.NodeID)
		}
		fmt.Fprintf(&b, " context %q\n", e.Membership.Context)
	}
	return b.String()
}

// proposeConfChangeUntilApplied proposes cc until the applier has seen more
// than before membership changes: raft turns a conf change proposed while
// another is pending into an empty entry, without an error.
func proposeConfChangeUntilApplied(t *testing.T, n *Node, app *kvApplier, cc raftpb.ConfChangeI, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := n.ProposeConfChange(ctx, cc)
		cancel()
		if err != nil && !errors.Is(err, ErrProposalDropped) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("propose %v: %v", cc, err)
		}
		until := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(until) {
			if len(app.membershipChanges()) > before {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Fatalf("conf change %v was not applied in time", cc)
}

// TestMembershipChangesReachApplier: conf changes of both versions reach
// the applier as state.MembershipChange values with their changes in order
// and their context; the bootstrap conf change and raft's own change that
// leaves a joint configuration too.
func TestMembershipChangesReachApplier(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	app := newKVApplier(t, db)
	n, err := Start(testConfig(t, 1), db, app, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	waitLeader(t, 5*time.Second, n)
	waitFor(t, 5*time.Second, "the bootstrap conf change applied", func() bool { return len(app.membershipChanges()) == 1 })

	// Learners only, so that the single voter keeps its quorum.
	v1 := &raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(2), Context: []byte("member 2")}
	proposeConfChangeUntilApplied(t, n, app, v1, 1)
	v2 := &raftpb.ConfChangeV2{
		Changes: []*raftpb.ConfChangeSingle{
			{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(3)},
			{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(2)},
		},
		Context: []byte("member 3"),
	}
	proposeConfChangeUntilApplied(t, n, app, v2, 2)
	// Two changes enter a joint configuration, which raft leaves on its
	// own with an empty ConfChangeV2.
	waitFor(t, 5*time.Second, "the joint configuration left", func() bool { return len(app.membershipChanges()) == 4 })

	got := app.membershipChanges()
	var want []string
	for i, w := range []string{
		` add-voter 1 context ""`,
		` add-learner 2 context "member 2"`,
		` add-learner 3 remove 2 context "member 3"`,
		` context ""`,
	} {
		want = append(want, fmt.Sprintf("%d:%s\n", got[i].Index, w))
	}
	if describe(got) != strings.Join(want, "") {
		t.Fatalf("the applier got\n%swant\n%s", describe(got), strings.Join(want, ""))
	}
	for i, e := range got {
		if (i == 0 && e.Index != 1) || (i > 0 && e.Index <= got[i-1].Index) || e.Term == 0 || e.Data != nil {
			t.Fatalf("membership change %d at index %d term %d with data %q", i, e.Index, e.Term, e.Data)
		}
	}
	cs := n.ConfState()
	if !slices.Equal(cs.GetVoters(), []uint64{1}) || !slices.Equal(cs.GetLearners(), []uint64{3}) || len(cs.GetVotersOutgoing()) > 0 {
		t.Fatalf("conf state %v", cs)
	}
	if err := n.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestAppendNormalEntries(t *testing.T) {
	entry := func(i uint64, data []byte) *raftpb.Entry {
		return &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(2), Type: raftpb.EntryNormal.Enum(), Data: data}
	}
	raftEnts := []*raftpb.Entry{entry(5, []byte("a")), entry(6, encodeTruncationEntry(3)), entry(7, nil), entry(8, encodeTruncationEntry(4))}
	out, upTo := appendNormalEntries(make([]state.Entry, 0, 1), raftEnts)
	if upTo != 4 || len(out) != 4 {
		t.Fatalf("upTo %d, %d entries", upTo, len(out))
	}
	for i, want := range []string{"a", "", "", ""} {
		if e := out[i]; e.Index != uint64(5+i) || e.Term != 2 || string(e.Data) != want || e.Membership != nil {
			t.Errorf("entry %d = %+v, want data %q", i, e, want)
		}
	}
	if _, ok := truncationOf(raftEnts[1]); !ok {
		t.Fatal("the raft entry's data was modified")
	}
}

func TestDecodeConfChangeRefusesGarbage(t *testing.T) {
	for _, e := range []*raftpb.Entry{
		{Index: proto.Uint64(9), Type: raftpb.EntryConfChange.Enum(), Data: []byte{0xff, 0xff}},
		{Index: proto.Uint64(9), Type: raftpb.EntryConfChangeV2.Enum(), Data: []byte{0xff, 0xff}},
	} {
		if _, _, err := decodeConfChange(e); !errors.Is(err, ErrCorruptLog) {
			t.Errorf("%v: %v, want ErrCorruptLog", e.GetType(), err)
		}
	}
}

// removedKVApplier is a kvApplier that remembers a fixed set of removed
// members.
type removedKVApplier struct {
	*kvApplier
	removed map[uint64]bool
}

func (a removedKVApplier) WasRemoved(id uint64) (bool, error) { return a.removed[id], nil }

// TestAddingRemovedMemberIsNotInstalled: a committed conf change that adds
// an id the applier remembers as removed is installed as a change of
// nothing, and the applier gets it without member changes; another
// addition is installed, and nothing is left pending.
func TestAddingRemovedMemberIsNotInstalled(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	kv := newKVApplier(t, db)
	n, err := Start(testConfig(t, 1), db, removedKVApplier{kvApplier: kv, removed: map[uint64]bool{2: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	waitLeader(t, 5*time.Second, n)
	waitFor(t, 5*time.Second, "the bootstrap conf change applied", func() bool { return len(kv.membershipChanges()) == 1 })

	proposeConfChangeUntilApplied(t, n, kv, &raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(2), Context: []byte("member 2")}, 1)
	if cs := n.ConfState(); !slices.Equal(cs.GetVoters(), []uint64{1}) || len(cs.GetLearners()) > 0 {
		t.Fatalf("a removed id was installed: conf state %v", cs)
	}
	proposeConfChangeUntilApplied(t, n, kv, &raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(3), Context: []byte("member 3")}, 2)
	if cs := n.ConfState(); !slices.Equal(cs.GetVoters(), []uint64{1}) || !slices.Equal(cs.GetLearners(), []uint64{3}) {
		t.Fatalf("conf state %v, want voters [1] learners [3]", cs)
	}
	got := kv.membershipChanges()
	want := fmt.Sprintf("%d: add-voter 1 context \"\"\n%d: context \"\"\n%d: add-learner 3 context \"member 3\"\n", got[0].Index, got[1].Index, got[2].Index)
	if describe(got) != want {
		t.Fatalf("the applier got\n%swant\n%s", describe(got), want)
	}
	if pending, err := n.PendingConfChange(); err != nil || pending {
		t.Fatalf("PendingConfChange = %v, %v after every change applied", pending, err)
	}
	if err := n.Err(); err != nil {
		t.Fatal(err)
	}
}
