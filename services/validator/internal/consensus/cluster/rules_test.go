package cluster

import (
	"testing"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
)

// outcome names a decision: "ok", a refusal's reason, or another code.
func outcome(err error) string {
	e := apierror.As(err)
	switch {
	case err == nil:
		return "ok"
	case e == nil:
		return "error " + err.Error()
	case e.Code == apierror.MembershipRefused:
		return e.Details["reason"].(string)
	default:
		return string(e.Code)
	}
}

func inactive(id, match uint64) consensus.FollowerProgress {
	return consensus.FollowerProgress{ID: id, Match: match, State: "replicate"}
}

// threeVoters is leader 1's view of voters 1, 2, 3, all reachable, and
// learner 4 at match.
func threeVoters(learnerMatch uint64) Facts {
	return Facts{Leader: 1, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, Removed: []uint64{7},
		Progress: []consensus.FollowerProgress{active(1, 1000), active(2, 1000), active(3, 990), active(4, learnerMatch)}}
}

func TestCheckAdd(t *testing.T) {
	limits := Limits{PromoteMargin: 100, MaxLearners: 1}
	noLearner := threeVoters(0)
	noLearner.Learners = nil
	pending := noLearner
	pending.Pending = true
	for _, tc := range []struct {
		name   string
		facts  Facts
		limits Limits
		id     uint64
		want   string
	}{
		{"a new id", noLearner, limits, 5, "ok"},
		{"a voter's id", noLearner, limits, 2, ReasonAlreadyMember},
		{"a learner's id", threeVoters(0), limits, 4, ReasonAlreadyMember},
		{"a removed id", noLearner, limits, 7, ReasonRemovedID},
		{"while a change is pending", pending, limits, 5, ReasonChangePending},
		// The second phantom of an attack stops here: the first is still
		// a learner, and as a learner it never counted in the quorum.
		{"while a learner catches up", threeVoters(0), limits, 5, ReasonTooManyLearners},
		{"a second learner where two are allowed", threeVoters(0), Limits{PromoteMargin: 100, MaxLearners: 2}, 5, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcome(CheckAdd(tc.facts, tc.limits, tc.id)); got != tc.want {
				t.Fatalf("CheckAdd(%d) = %s, want %s", tc.id, got, tc.want)
			}
		})
	}
}

func TestCheckPromote(t *testing.T) {
	limits := Limits{PromoteMargin: 100, MaxLearners: 1}
	with := func(f Facts, edit func(*Facts)) Facts {
		f.Progress = append([]consensus.FollowerProgress(nil), f.Progress...)
		edit(&f)
		return f
	}
	for _, tc := range []struct {
		name  string
		facts Facts
		id    uint64
		want  string
	}{
		{"caught up", threeVoters(950), 4, "ok"},
		{"exactly at the margin", threeVoters(900), 4, "ok"},
		{"one past the margin", threeVoters(899), 4, ReasonLearnerBehind},
		{"a voter", threeVoters(950), 2, ReasonNotLearner},
		{"not a member", threeVoters(950), 9, string(apierror.NotFound)},
		{"while a change is pending", with(threeVoters(950), func(f *Facts) { f.Pending = true }), 4, ReasonChangePending},
		{"silent", with(threeVoters(950), func(f *Facts) { f.Progress[3] = inactive(4, 950) }), 4, ReasonLearnerBehind},
		{"being sent a snapshot", with(threeVoters(950), func(f *Facts) { f.Progress[3].State = "snapshot" }), 4, ReasonLearnerBehind},
		{"no progress of it yet", with(threeVoters(950), func(f *Facts) { f.Progress = f.Progress[:3] }), 4, ReasonLearnerBehind},
		// Four voters need three: the leader and the learner are two.
		{"two voters unreachable", with(threeVoters(950), func(f *Facts) {
			f.Progress[1], f.Progress[2] = inactive(2, 1000), inactive(3, 990)
		}), 4, ReasonNoQuorum},
		{"one voter unreachable", with(threeVoters(950), func(f *Facts) { f.Progress[1] = inactive(2, 1000) }), 4, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcome(CheckPromote(tc.facts, limits, tc.id)); got != tc.want {
				t.Fatalf("CheckPromote(%d) = %s, want %s", tc.id, got, tc.want)
			}
		})
	}
}

func TestCheckRemove(t *testing.T) {
	with := func(f Facts, edit func(*Facts)) Facts {
		f.Progress = append([]consensus.FollowerProgress(nil), f.Progress...)
		edit(&f)
		return f
	}
	five := Facts{Leader: 1, Voters: []uint64{1, 2, 3, 4, 5},
		Progress: []consensus.FollowerProgress{active(1, 9), active(2, 9), active(3, 9), inactive(4, 3), inactive(5, 3)}}
	for _, tc := range []struct {
		name  string
		facts Facts
		id    uint64
		want  string
	}{
		{"a reachable voter of three", threeVoters(0), 2, "ok"},
		{"the leader itself", threeVoters(0), 1, "ok"},
		{"a learner", threeVoters(0), 4, "ok"},
		{"a learner while voters are unreachable", with(threeVoters(0), func(f *Facts) {
			f.Progress[1], f.Progress[2] = inactive(2, 1), inactive(3, 1)
		}), 4, "ok"},
		{"not a member", threeVoters(0), 9, string(apierror.NotFound)},
		{"while a change is pending", with(threeVoters(0), func(f *Facts) { f.Pending = true }), 2, ReasonChangePending},
		{"the last voter", Facts{Leader: 1, Voters: []uint64{1}, Progress: []consensus.FollowerProgress{active(1, 5)}}, 1, ReasonLastVoter},
		// Two voters left need two: the leader reaches only itself.
		{"a voter while the other is unreachable", with(threeVoters(0), func(f *Facts) { f.Progress[2] = inactive(3, 1) }), 2, ReasonNoQuorum},
		{"the unreachable voter itself", with(threeVoters(0), func(f *Facts) { f.Progress[2] = inactive(3, 1) }), 3, "ok"},
		// Of five with two down, removing a live one leaves four that need
		// three while two answer; removing a dead one leaves 3 of 4.
		{"a live voter of five with two down", five, 2, ReasonNoQuorum},
		{"a dead voter of five with two down", five, 4, "ok"},
		{"the leader while the others are unreachable", with(threeVoters(0), func(f *Facts) {
			f.Progress[1], f.Progress[2] = inactive(2, 1), inactive(3, 1)
		}), 1, ReasonNoQuorum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcome(CheckRemove(tc.facts, tc.id)); got != tc.want {
				t.Fatalf("CheckRemove(%d) = %s, want %s", tc.id, got, tc.want)
			}
		})
	}
}
