package routes

import (
	"github.com/contentledger/contentledger/pkg/api"
)

// readGcVotes asks every validator for its result of each GC run it
// applied (/v1/gc/vote) and counts the runs that two validators report
// with different state hashes; nil when fewer than two answered.
//
// A run only some validators report is not counted: a validator that has
// not applied it yet is behind, which the replication and apply lag
// signals already judge, and a lag allowance here would only repeat them
// with a clock of its own. Compaction is deterministic (docs/adr/0033), so
// two hashes of one run differ only when the validators' states do.
func readGcVotes(r *reader) *float64 {
	votes := make([]*api.GcVotes, len(r.s.up.URLs()))
	r.s.eachValidator(func(i int, base string) {
		var v api.GcVotes
		if _, err := r.readFrom(base, at(srcGcVote), &v); err == nil {
			votes[i] = &v
		}
	})
	answered := 0
	for _, v := range votes {
		if v != nil {
			answered++
		}
	}
	if answered < 2 {
		return nil
	}
	return num(float64(gcHashSplits(votes)))
}

// gcHashSplits counts the runs reported with more than one state hash.
func gcHashSplits(votes []*api.GcVotes) int {
	first := map[uint64]string{}
	split := map[uint64]bool{}
	for _, v := range votes {
		if v == nil {
			continue
		}
		for _, vote := range v.Votes {
			switch hash, seen := first[vote.Run]; {
			case !seen:
				first[vote.Run] = vote.StateHash
			case hash != vote.StateHash:
				split[vote.Run] = true
			}
		}
	}
	return len(split)
}
