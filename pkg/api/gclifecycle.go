package api

import "github.com/contentledger/contentledger/pkg/ledgerpb"

// The GC proposal lifecycle routes (docs/adr/0033, "Lifecycle routes"): an
// operator's forced compaction (POST /v1/propose-gc, POST /v1/gc/execute),
// the leader's one-shot trigger (POST /v1/gc/trigger), and each validator's
// own results, for the edge to compare (GET /v1/gc/vote).

// Contract version markers of the GC lifecycle routes.
const (
	GcProposalVersion = "gc.proposal.v1"
	GcTriggerVersion  = "gc.trigger.v1"
	GcVotesVersion    = "gc.vote.v1"
)

// The states of a GC proposal as /v1/propose-gc answers it: handed to raft
// by the leader, or applied (a GcRun records it).
const (
	GcProposalProposed = "proposed"
	GcProposalApplied  = "applied"
)

// Bounds of ?runs= on /v1/gc/vote and /gc.log: the newest runs shown.
const (
	DefaultGcRuns = 100
	MaxGcRuns     = 10_000
)

// The states of a GC run (GcRun.State, GcProposal.RunState): its steps are
// being applied, every live node is in its generation, or the leader gave
// it up (GcRun.Abandoned says why).
const (
	GcRunRunning   = "running"
	GcRunDone      = "done"
	GcRunAbandoned = "abandoned"
)

// GcRunStateOf names the state of a run's record.
func GcRunStateOf(run *ledgerpb.GcRun) string {
	switch {
	case run.GetDone():
		return GcRunDone
	case run.GetAbandoned() != "":
		return GcRunAbandoned
	}
	return GcRunRunning
}

// GcProposal answers POST /v1/propose-gc (and /v1/gc/execute): the
// compaction the leader proposed. Its identity is its epoch (at most one
// run per epoch); Run and CommitIndex are set once its GcCompact is
// applied (state "applied"), RunState and Steps follow the run, and
// StateHash is set once the run ended, within the request's wait or later
// in /v1/gc/status and /v1/compaction/proposals.
type GcProposal struct {
	ContractVersion string `json:"contractVersion"`
	// NodeID is the leader that proposed it.
	NodeID      uint64 `json:"nodeId"`
	Epoch       uint64 `json:"epoch"`
	State       string `json:"state"`
	Run         uint64 `json:"run,omitempty"`
	CommitIndex uint64 `json:"commitIndex,omitempty"`
	RunState    string `json:"runState,omitempty"`
	Steps       uint64 `json:"steps,omitempty"`
	StateHash   string `json:"stateHash,omitempty"`
}

// GcTrigger answers POST /v1/gc/trigger: the leader that armed its trigger,
// in which term, and the finalized epoch after which it proposes a
// compaction, whatever the garbage (once).
type GcTrigger struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	Term            uint64 `json:"term"`
	Armed           bool   `json:"armed"`
	AfterEpoch      uint64 `json:"afterEpoch"`
}

// GcVotes is the body of GET /v1/gc/vote: this validator's result of each
// GC run it applied to its end (the newest ?runs=, oldest first; a run in
// progress has no result yet), from its GcRun records. Validators that
// applied a run alike report the same state hash for it, the state after
// the entry that ended it (EndIndex).
type GcVotes struct {
	ContractVersion string   `json:"contractVersion"`
	NodeID          uint64   `json:"nodeId"`
	AppliedIndex    uint64   `json:"appliedIndex"`
	Votes           []GcVote `json:"votes"`
}

// GcVote is one run's result on one validator.
type GcVote struct {
	Run         uint64 `json:"run"`
	Epoch       uint64 `json:"epoch"`
	CommitIndex uint64 `json:"commitIndex"`
	EndIndex    uint64 `json:"endIndex"`
	State       string `json:"state"` // done or abandoned
	StateHash   string `json:"stateHash"`
}
