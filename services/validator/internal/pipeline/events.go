package pipeline

import "github.com/ethereum/go-ethereum/common"

// Events learns what the pipeline does that an operator wants to see (the
// validator's operational events, opsevents.Recorder). Calls come from
// intake, the verifiers and the sender's loop: each must return at once.
type Events interface {
	// Refused: Submit refused a proposal before anything was replicated;
	// reason is the error's code.
	Refused(reason string, wallet common.Address, id common.Hash)
	// Rejected: the leader decided a proposal REJECTED for reason.
	Rejected(reason string, wallet common.Address, id common.Hash)
	// Backpressure: decided proposals started (on) or stopped waiting at
	// the in-flight ceiling.
	Backpressure(on bool, inFlight, ceiling int)
	// WritesBlocked: intake refused a write of a wallet whose executed GC
	// debt is at or above its limit. WritesAllowed: intake let a write of
	// a wallet with a GC account through.
	WritesBlocked(wallet common.Address, debtMicros, limitMicros uint64)
	WritesAllowed(wallet common.Address)
	// Retracted: the leader is recording on a proposal that a chain
	// reorganization took its payment back, committed or not yet, and
	// whether the chain mined the payment again.
	Retracted(id common.Hash, wallet common.Address, committed, reMined bool)
}

// noEvents is Events when the configuration gives none.
type noEvents struct{}

func (noEvents) Refused(string, common.Address, common.Hash)       {}
func (noEvents) Rejected(string, common.Address, common.Hash)      {}
func (noEvents) Backpressure(bool, int, int)                       {}
func (noEvents) WritesBlocked(common.Address, uint64, uint64)      {}
func (noEvents) WritesAllowed(common.Address)                      {}
func (noEvents) Retracted(common.Hash, common.Address, bool, bool) {}
