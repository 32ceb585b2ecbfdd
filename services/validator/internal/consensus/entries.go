package consensus

// The applier's entries
//
// The applier (internal/state) knows nothing of raft: the apply goroutine
// converts raft's committed entries into state.Entry values as it hands them
// over. A normal entry keeps its index, term and data (a truncation entry
// loses its data, truncate.go); a conf change, of either version, becomes a
// state.MembershipChange: the member changes in order and the context, with
// ConfChange's single change and context taken as ConfChangeV2 would hold
// them (raft's AsV2). Nothing else of raft's entry reaches the applier.

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// appendNormalEntries appends the applier's form of ents, which are all
// normal entries, to dst. Truncation entries go with their data removed, like
// raft's empty entries; upTo is the highest index they name (0 when none).
// The data of the others is shared with ents, which belong to raft.
func appendNormalEntries(dst []state.Entry, ents []*raftpb.Entry) (out []state.Entry, upTo uint64) {
	for _, e := range ents {
		se := state.Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: e.GetData()}
		if index, ok := truncationOf(e); ok {
			se.Data = nil
			upTo = max(upTo, index)
		}
		dst = append(dst, se)
	}
	return dst, upTo
}

// truncationOf returns the index a truncation entry names, and false for
// any other entry.
func truncationOf(e *raftpb.Entry) (uint64, bool) {
	data := e.GetData()
	if e.GetType() != raftpb.EntryNormal || len(data) != 9 || data[0] != truncationTag {
		return 0, false
	}
	return binary.BigEndian.Uint64(data[1:]), true
}

// decodeConfChange decodes the conf change that a committed entry carries,
// and its form for the applier.
func decodeConfChange(e *raftpb.Entry) (raftpb.ConfChangeI, *state.MembershipChange, error) {
	var cc raftpb.ConfChangeI
	switch e.GetType() {
	case raftpb.EntryConfChange:
		c := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), c); err != nil {
			return nil, nil, fmt.Errorf("%w: conf change at %d: %v", ErrCorruptLog, e.GetIndex(), err)
		}
		cc = c
	case raftpb.EntryConfChangeV2:
		c := &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), c); err != nil {
			return nil, nil, fmt.Errorf("%w: conf change at %d: %v", ErrCorruptLog, e.GetIndex(), err)
		}
		cc = c
	default:
		return nil, nil, fmt.Errorf("%w: entry %d has unknown type %v", ErrCorruptLog, e.GetIndex(), e.GetType())
	}
	v2 := cc.AsV2()
	mc := &state.MembershipChange{Changes: make([]state.MemberChange, 0, len(v2.GetChanges())), Context: v2.GetContext()}
	for _, c := range v2.GetChanges() {
		var typ state.MemberChangeType
		switch c.GetType() {
		case raftpb.ConfChangeAddNode:
			typ = state.AddVoter
		case raftpb.ConfChangeAddLearnerNode:
			typ = state.AddLearner
		case raftpb.ConfChangeRemoveNode:
			typ = state.RemoveMember
		case raftpb.ConfChangeUpdateNode:
			typ = state.UpdateMember
		default:
			return nil, nil, fmt.Errorf("%w: conf change at %d has unknown type %v", ErrCorruptLog, e.GetIndex(), c.GetType())
		}
		mc.Changes = append(mc.Changes, state.MemberChange{Type: typ, NodeID: c.GetNodeId()})
	}
	return cc, mc, nil
}
