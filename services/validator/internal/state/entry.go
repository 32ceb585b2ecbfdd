package state

import "fmt"

// Entry is one committed log entry as the state machine sees it. The
// consensus layer converts its log's entries into these, so that this
// package stays free of the consensus library's types.
type Entry struct {
	Index, Term uint64
	// Data is the entry's payload: a marshalled ledgerpb.Entry, or empty
	// for the entries the leader appends without data (and those whose
	// data consensus removed because they were its own). Nil for a
	// membership change.
	Data []byte
	// Membership is set when the entry changes the cluster's membership,
	// which consensus has already installed; nil for any other entry.
	Membership *MembershipChange
}

// MembershipChange is a committed change of the cluster's membership: the
// member changes, applied together, and the context the proposer attached.
// A change without member changes leaves a joint configuration.
type MembershipChange struct {
	Changes []MemberChange
	// Context is the proposer's context. For a member added at run time it
	// is a marshalled ledgerpb.Member: where to reach it, which apply
	// records in the address book (applyMembership). Bootstrap members come
	// without one.
	Context []byte
}

// MemberChange is one member's change within a MembershipChange.
type MemberChange struct {
	Type   MemberChangeType
	NodeID uint64
}

// MemberChangeType is what a MemberChange does to its member.
type MemberChangeType uint8

// Member change types.
const (
	AddVoter MemberChangeType = iota + 1
	AddLearner
	RemoveMember
	// UpdateMember changes nothing in the membership; apply ignores it.
	UpdateMember
)

func (t MemberChangeType) String() string {
	switch t {
	case AddVoter:
		return "add-voter"
	case AddLearner:
		return "add-learner"
	case RemoveMember:
		return "remove"
	case UpdateMember:
		return "update"
	default:
		return fmt.Sprintf("MemberChangeType(%d)", uint8(t))
	}
}
