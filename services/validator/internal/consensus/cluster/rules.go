package cluster

import (
	"slices"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
)

// The rules of membership changes (ADR 0027). They decide on the leader,
// from what it knows at the moment of the request, whether a change may be
// proposed; they are pure, so each is a table test. Only the refusal of a
// removed id is also enforced where changes are installed (consensus asks
// the state machine), because only it depends on replicated state alone.

// DefaultPromoteMargin is how many entries a learner's match index may
// trail the leader's and still count as caught up.
const DefaultPromoteMargin uint64 = 256

// DefaultMaxLearners is how many learners the cluster holds at once: a
// new member joins only when the previous one caught up and was promoted,
// or was removed (etcd's default is the same).
const DefaultMaxLearners = 1

// Reasons of a membership_refused error (details.reason).
const (
	ReasonAlreadyMember   = "already_member"
	ReasonRemovedID       = "removed_id"
	ReasonChangePending   = "change_pending"
	ReasonTooManyLearners = "too_many_learners"
	ReasonNotLearner      = "not_learner"
	ReasonLearnerBehind   = "learner_behind"
	ReasonNoQuorum        = "no_reachable_quorum"
	ReasonLastVoter       = "last_voter"
)

// Facts are what the leader knows when it decides on a membership change.
type Facts struct {
	// Leader is this node's id; it leads.
	Leader uint64
	// Voters and Learners are the installed membership.
	Voters, Learners []uint64
	// Removed are the ids a committed change removed (replicated state).
	Removed []uint64
	// Pending is set while a conf change is in the log but not applied.
	Pending bool
	// Progress is the leader's view of every member (raft's progress):
	// how far its log is known to reach and whether it answered within
	// the last election timeout.
	Progress []consensus.FollowerProgress
}

// Limits are the tunable bounds of the rules.
type Limits struct {
	// PromoteMargin: see DefaultPromoteMargin.
	PromoteMargin uint64
	// MaxLearners: see DefaultMaxLearners.
	MaxLearners int
}

func refused(reason string, retryable bool, format string, args ...any) *apierror.Error {
	e := apierror.New(apierror.MembershipRefused, format, args...).WithDetail("reason", reason)
	e.Retryable = retryable
	return e
}

// quorum is the number of voters a configuration of n voters needs.
func quorum(n int) int { return n/2 + 1 }

func (f Facts) isMember(id uint64) bool {
	return slices.Contains(f.Voters, id) || slices.Contains(f.Learners, id)
}

func (f Facts) progress(id uint64) (consensus.FollowerProgress, bool) {
	i := slices.IndexFunc(f.Progress, func(p consensus.FollowerProgress) bool { return p.ID == id })
	if i < 0 {
		return consensus.FollowerProgress{}, false
	}
	return f.Progress[i], true
}

// reachable counts the ids the leader sees as recently active; the leader
// is always reachable to itself.
func (f Facts) reachable(ids []uint64) int {
	n := 0
	for _, id := range ids {
		if p, ok := f.progress(id); id == f.Leader || (ok && p.RecentActive) {
			n++
		}
	}
	return n
}

// CheckAdd decides whether id may join as a learner: not a member, never
// removed, no change pending, and fewer than MaxLearners learners. A
// learner does not vote, so adding one leaves the quorum as it is.
func CheckAdd(f Facts, l Limits, id uint64) error {
	switch {
	case f.isMember(id):
		return refused(ReasonAlreadyMember, false, "validator %d is already a member", id)
	case slices.Contains(f.Removed, id):
		return refused(ReasonRemovedID, false, "validator %d was removed from this cluster; an id is never reused, pick a new one", id)
	case f.Pending:
		return refused(ReasonChangePending, true, "another membership change is pending; retry once it is applied")
	case len(f.Learners) >= l.MaxLearners:
		return refused(ReasonTooManyLearners, false,
			"the cluster already has %d learner(s) %v catching up (at most %d); promote or remove it first", len(f.Learners), f.Learners, l.MaxLearners)
	}
	return nil
}

// LearnerCaughtUp reports whether the learner id is caught up: active,
// streaming entries, and its match index within PromoteMargin of the
// leader's. The error says why not.
func LearnerCaughtUp(f Facts, l Limits, id uint64) error {
	lead, _ := f.progress(f.Leader)
	p, ok := f.progress(id)
	switch {
	case !ok:
		return refused(ReasonLearnerBehind, true, "the leader has no progress of validator %d yet", id)
	case !p.RecentActive:
		return refused(ReasonLearnerBehind, true, "validator %d has not answered the leader within an election timeout", id)
	case p.State != "replicate":
		return refused(ReasonLearnerBehind, true, "validator %d is not streaming entries yet (state %s)", id, p.State)
	case p.Match+l.PromoteMargin < lead.Match:
		return refused(ReasonLearnerBehind, true, "validator %d is at index %d, %d behind the leader's %d (at most %d)",
			id, p.Match, lead.Match-p.Match, lead.Match, l.PromoteMargin)
	}
	return nil
}

// CheckPromote decides whether the learner id may become a voter: no
// change pending, caught up, and the configuration with it as a voter has
// a quorum of reachable voters (it counts itself: it is active).
func CheckPromote(f Facts, l Limits, id uint64) error {
	switch {
	case slices.Contains(f.Voters, id):
		return refused(ReasonNotLearner, false, "validator %d is already a voter", id)
	case !slices.Contains(f.Learners, id):
		return apierror.New(apierror.NotFound, "validator %d is not a member", id)
	case f.Pending:
		return refused(ReasonChangePending, true, "another membership change is pending; retry once it is applied")
	}
	if err := LearnerCaughtUp(f, l, id); err != nil {
		return err
	}
	next := append(slices.Clone(f.Voters), id)
	if got, need := f.reachable(next), quorum(len(next)); got < need {
		return refused(ReasonNoQuorum, true, "promoting validator %d makes %d voters, of which the leader reaches %d; a quorum needs %d",
			id, len(next), got, need)
	}
	return nil
}

// CheckRemove decides whether id may be removed: a member, no change
// pending, not the last voter, and, for a voter, the configuration without
// it keeps a quorum of voters the leader reaches (etcd's strict
// reconfiguration check). Removing a learner changes no quorum.
func CheckRemove(f Facts, id uint64) error {
	switch {
	case !f.isMember(id):
		return apierror.New(apierror.NotFound, "validator %d is not a member", id)
	case f.Pending:
		return refused(ReasonChangePending, true, "another membership change is pending; retry once it is applied")
	case slices.Contains(f.Learners, id):
		return nil
	case len(f.Voters) == 1:
		return refused(ReasonLastVoter, false, "validator %d is the last voter; a cluster cannot remove it", id)
	}
	next := slices.DeleteFunc(slices.Clone(f.Voters), func(v uint64) bool { return v == id })
	if got, need := f.reachable(next), quorum(len(next)); got < need {
		return refused(ReasonNoQuorum, true,
			"removing validator %d leaves %d voters, of which the leader reaches %d; a quorum needs %d: bring the others back first",
			id, len(next), got, need)
	}
	return nil
}
