// Package pipeline is the proposal state machine before consensus: intake
// guards, verification (signature, payment), batching, and the sender that
// proposes batches to raft and waits for them to be applied. The sender is
// the validator's one write path into raft: every other replicated change
// (finality, GC debt, leader announcements, payment reorgs, the GC account
// routes) goes through it too, under the same ceiling and retry policy.
//
// The leader decides everything that is not a pure function of the log
// (signature recovery, payment lookup, clock, epoch) and writes the outcome
// into the entry; apply on every validator only reads the entry. A rejection
// after acceptance is also replicated, so every validator reports the same
// terminal status for a proposal id.
//
// Intake is replicated: the leader commits an acceptance (the proposal as
// PENDING) through raft before it answers 202, so every validator holds the
// proposal and a new leader takes it over (adopt) if this one dies before
// deciding it (ADR 0005).
//
// Raft's Propose returning nil means "maybe": the sender waits for the
// batch's records to appear in applied state and proposes the same batch
// again after a deadline. Apply ignores a proposal id it already holds, so a
// repeated batch changes nothing.
package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/sysinfo"
)

// Proposer submits raft entries. Propose returning nil does not mean the
// entry will commit.
type Proposer interface {
	Propose(ctx context.Context, data []byte) error
	IsLeader() bool
	// Leading returns this node's raft id and its current term, and
	// whether it leads that term.
	Leading() (nodeID, term uint64, ok bool)
	// LeaderChanged is closed at the next change of leader or role.
	LeaderChanged() <-chan struct{}
}

// Records reads the replicated proposal records.
type Records interface {
	// Record returns the record of a proposal id, or nil and ok false.
	Record(id common.Hash) (rec *ledgerpb.ProposalRecord, ok bool, err error)
	// Undecided lists up to limit accepted proposals without a decision.
	Undecided(limit int) ([]*ledgerpb.ProposalRecord, error)
	// FinalizedEpoch is the newest epoch the applied state holds final.
	FinalizedEpoch() uint64
	// GcEpoch is the epoch of the last per-epoch GC debt job applied.
	GcEpoch() uint64
	// LastGcRun is the newest compaction run (GcCompact) applied, nil
	// before the first; it must not be modified.
	LastGcRun() *ledgerpb.GcRun
	// LastCompactStep is this validator's apply time of the newest
	// compaction step it applied (a local figure).
	LastCompactStep() state.CompactStepApply
	// GarbageBytes is the stored bytes of the segments written since the
	// last compaction.
	GarbageBytes() uint64
	// LeaderTerm is the newest term a leader announced itself in
	// (LeaderElected) in the applied state.
	LeaderTerm() uint64
	// Changed is closed after the next apply: the sender looks again
	// whether a change it proposed is applied.
	Changed() <-chan struct{}
	// Account is a wallet's GC debt account, nil when it has none.
	Account(wallet [20]byte) (*ledgerpb.GcAccount, error)
	// DebtTxSpent reports whether the DebtPaid log logIndex of transaction
	// tx has paid a debt (its GcPay was applied).
	DebtTxSpent(tx [32]byte, logIndex uint32) (bool, error)
	// DebtTxPaid reports whether any DebtPaid log of transaction tx has
	// paid a debt.
	DebtTxPaid(tx [32]byte) (bool, error)
	// Intent is the upload intent with token, nil when there is none
	// (docs/adr/0037).
	Intent(token [32]byte) (*ledgerpb.BlobIntent, error)
	// Counts returns the cumulative counts of the decisions applied, and
	// the applied index they are at: the same on every validator at one
	// index, kept across restarts. The counts must not be modified.
	Counts() (*ledgerpb.ProposalCounts, uint64)
}

// Payments finds the payment observed for a proposal id, and the debt
// payments observed.
type Payments interface {
	// Lookup returns the payment observed for id, if any.
	Lookup(id common.Hash) (payment.ProposalPaid, bool)
	// Changed is closed at the index's next change.
	Changed() <-chan struct{}
	// Watch returns a channel closed at the next change of id's payment;
	// stop ends the watch and must be called.
	Watch(id common.Hash) (changed <-chan struct{}, stop func())
	// Debts lists the DebtPaid logs observed (confirmed and not
	// retracted), in chain order.
	Debts() []payment.DebtPaid
}

// Limiter admits or refuses one request of an identifier.
type Limiter interface {
	Allow(identifier string) (bool, error)
}

// Epochs tells the current epoch.
type Epochs interface {
	Current() uint64
	// Finalized is the newest epoch that is final on chain.
	Finalized() uint64
}

// Config tunes the pipeline. Start from DefaultConfig.
type Config struct {
	// VerifyPayments is false in MOCK mode: payments are not checked there,
	// signatures still are.
	VerifyPayments bool
	// Domain is the EIP-712 signing domain of proposals.
	Domain signing.Domain
	// Contract and ChainID are where valid payments come from.
	Contract common.Address
	ChainID  uint64
	// PaymentWait is how long a submission whose payment is not observed
	// yet is held before it is refused, retryable, with nothing kept
	// (hold.go); and how long a proposal an earlier version accepted
	// unpaid waits before it is REJECTED payment_not_found.
	PaymentWait time.Duration
	// Feed is how far the chain feed has come on this node; required
	// when VerifyPayments is set. Confirmations are the blocks a
	// payment's block must be below the head the chain-watcher reports
	// before the payment counts (ADR 0029: one bad publisher cannot mint).
	Feed          Feed
	Confirmations uint64
	// HoldPerWallet, HoldPerClient and HoldBytes bound the submissions
	// held for their payment (hold.go): per signing wallet, per client
	// (WithClient), and the bytes of their messages on this node.
	HoldPerWallet int
	HoldPerClient int
	HoldBytes     int
	// MaxPending bounds proposals accepted but not yet applied; beyond it
	// intake answers 429 overloaded.
	MaxPending int
	// MaxBatch bounds the proposals in one raft entry.
	MaxBatch int
	// EventWindow and EventMax are the event history apply keeps (ADR
	// 0023), written into every batch this leader seals so that all
	// validators prune alike (internal/state, retention.go). Zero: the
	// state's defaults.
	EventWindow time.Duration
	EventMax    uint64
	// MaxBatchBytes bounds the encoded proposals in one raft entry
	// (messages, paths, signatures, payments); a single larger proposal
	// still goes alone.
	MaxBatchBytes int
	// MicroBatch and MicroBatchBytes bound a micro-batch of the packing
	// buffer: proposals of one wallet and organization released together
	// (packer.go).
	MicroBatch      int
	MicroBatchBytes int
	// Verifiers is the number of workers matching payments (see verifier.go).
	Verifiers int
	// WalletLimiter, when set, limits the proposals one wallet may submit
	// (SVC_VALIDATOR_RATE_PER_WALLET); identifiers are lowercase 0x
	// addresses. It counts only proposals whose signature checked out, so
	// no one can spend another wallet's allowance.
	WalletLimiter Limiter
	// ClassAging is how long a proposal waits, when capacity is short, to
	// rank one class higher (ADR 0022: higher classes drain first, and
	// aging keeps any class from starving). 0 turns aging off.
	ClassAging time.Duration
	// MaxPendingMessages is the sender's in-flight ceiling: proposals
	// proposed to raft and not yet applied. At it the sender holds its
	// queue and reports backpressure (Stats.BackpressureActive).
	MaxPendingMessages int
	// CommitTimeout is how long the sender waits for a proposed batch to be
	// applied before proposing it again, and how long intake waits for an
	// acceptance to be replicated before answering 503.
	CommitTimeout time.Duration
	// AdoptInterval is how often a leader looks for accepted proposals that
	// nobody is deciding (after a failover, or an intake that timed out).
	AdoptInterval time.Duration
	// FinalizeInterval is how often a leader compares its epoch source's
	// finalized epoch with the state's, and proposes finality when it moved.
	FinalizeInterval time.Duration
	// GcSizeDelta is the contract's gcSizeDeltaEstimation: the segment
	// bytes written since the last compaction at which a leader proposes
	// the next (GcCompact) on an epoch finalization. 0 proposes none
	// (storage then only grows). Default DefaultGcSizeDelta.
	GcSizeDelta uint64
	// A leader drives a compaction run in steps of GcStepBytes of node
	// bytes each (compactrun.go). A cycle (one attempt at a step) fails
	// when free memory is below GcMemoryThreshold (a fraction of the bound
	// FreeMemory reads), when the step is not applied within twice
	// CommitTimeout, or when its apply held writes longer than
	// GcForceTimeout; it is tried again after GcRetryWait times the
	// failures in a row, and after GcRetryCount in a row the run is given
	// up. The contract's retryCount, forceTimeout and memoryThreshold.
	GcStepBytes       uint64
	GcRetryCount      int
	GcRetryWait       time.Duration
	GcForceTimeout    time.Duration
	GcMemoryThreshold float64
	FreeMemory        func() (sysinfo.Memory, bool)
	// Now is the leader's clock.
	Now func() time.Time
	// Events, when set, is told of refusals, rejections, backpressure,
	// wallets blocked by GC debt and retracted payments.
	Events Events
}

// The contract's GC defaults (gcSizeDeltaEstimation 1 GB, retryCount 5,
// forceTimeout 60 s, memoryThreshold 5 %), and the compaction's step.
const (
	DefaultGcSizeDelta       = 1_000_000_000
	DefaultGcRetryCount      = 5
	DefaultGcForceTimeout    = 60 * time.Second
	DefaultGcMemoryThreshold = 0.05
	DefaultGcStepBytes       = 4 << 20
)

// recentOutcomes is how many applied records the pipeline keeps in memory
// for status reads and waiters.
const recentOutcomes = 1 << 16

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		VerifyPayments:     true,
		PaymentWait:        15 * time.Second,
		HoldPerWallet:      16,
		HoldPerClient:      256,
		HoldBytes:          64 << 20,
		MaxPending:         10_000,
		MaxBatch:           512,
		MaxBatchBytes:      4 << 20,
		MicroBatch:         64,
		MicroBatchBytes:    256 << 10,
		MaxPendingMessages: 2048,
		Verifiers:          runtime.GOMAXPROCS(0),
		ClassAging:         2 * time.Second,
		CommitTimeout:      5 * time.Second,
		AdoptInterval:      2 * time.Second,
		FinalizeInterval:   time.Second,
		GcSizeDelta:        DefaultGcSizeDelta,
		GcStepBytes:        DefaultGcStepBytes,
		GcRetryCount:       DefaultGcRetryCount,
		GcRetryWait:        time.Second,
		GcForceTimeout:     DefaultGcForceTimeout,
		GcMemoryThreshold:  DefaultGcMemoryThreshold,
		FreeMemory:         sysinfo.FreeMemory,
		Now:                time.Now,
	}
}

func (c Config) validate() error {
	switch {
	case c.PaymentWait <= 0:
		return errors.New("pipeline: PaymentWait must be positive")
	case c.Verifiers <= 0:
		return errors.New("pipeline: Verifiers must be positive")
	case c.FinalizeInterval <= 0:
		return errors.New("pipeline: FinalizeInterval must be positive")
	case c.MaxPending <= 0, c.MaxBatch <= 0, c.MaxBatchBytes <= 0, c.MaxPendingMessages <= 0:
		return errors.New("pipeline: MaxPending, MaxBatch, MaxBatchBytes and MaxPendingMessages must be positive")
	case c.MicroBatch <= 0, c.MicroBatchBytes <= 0:
		return errors.New("pipeline: MicroBatch and MicroBatchBytes must be positive")
	case c.CommitTimeout <= 0, c.AdoptInterval <= 0:
		return errors.New("pipeline: CommitTimeout and AdoptInterval must be positive")
	case c.HoldPerWallet <= 0, c.HoldPerClient <= 0, c.HoldBytes <= 0:
		return errors.New("pipeline: HoldPerWallet, HoldPerClient and HoldBytes must be positive")
	case c.VerifyPayments && c.Feed == nil:
		return errors.New("pipeline: payments are verified but no chain feed is given")
	case c.GcStepBytes == 0, c.GcRetryCount <= 0, c.GcRetryWait < 0, c.GcForceTimeout <= 0:
		return errors.New("pipeline: GcStepBytes, GcRetryCount and GcForceTimeout must be positive, GcRetryWait not negative")
	case c.GcMemoryThreshold < 0, c.GcMemoryThreshold >= 1:
		return errors.New("pipeline: GcMemoryThreshold must be a fraction from 0 to below 1")
	case c.Now == nil, c.FreeMemory == nil:
		return errors.New("pipeline: Now or FreeMemory is nil")
	}
	return nil
}

// Pipeline moves proposals from intake to applied state.
type Pipeline struct {
	cfg      Config
	signer   *signing.Signer
	log      *zap.Logger
	raft     Proposer
	records  Records
	payments Payments
	epochs   Epochs

	mu       sync.Mutex
	pending  map[common.Hash]*pendingProposal
	outcomes *outcomes

	decided chan *ledgerpb.BatchItem
	// changes hands replicated changes other than batches to the sender
	// (changes.go); keys are the background changes queued or in flight.
	changes chan *change
	keysMu  sync.Mutex
	keys    map[any]struct{}
	// trigger is the operator's arming of the COMPACT trigger
	// (compaction.go), a leader's state.
	trigger compactTrigger

	stats    counters
	held     holds
	sender   senderState
	verifier verifyState
	// ingress and commits are the rates of proposals accepted and applied,
	// sampled every second by Run, for the queue statistics.
	ingress, commits *rate.Meter
	// commitLatency is the time from a proposal's acceptance at intake
	// (admit) to its commit being applied, as its intake learns it
	// (awaitAccepted); measured on the request's goroutine, never in apply.
	commitLatency *latencyHistogram
}

// rateWindow is how many one-second samples the intake and commit rates
// span.
const rateWindow = 10

type pendingProposal struct {
	record *ledgerpb.ProposalRecord
}

type counters struct {
	accepted, adopted, verified, rejected, applied, finalized, batches, changes, reproposed atomic.Uint64
	compactSteps, compactFailures                                                           atomic.Uint64
}

// senderState is what the sender (Run) publishes of its own state.
type senderState struct {
	queued       atomic.Int64 // decided proposals waiting to be sealed
	microBatches atomic.Int64 // micro-batches holding them
	buckets      atomic.Int64 // (epoch, class) buckets holding them
	inflight     atomic.Int64 // proposals proposed and not yet applied
	// queuedChanges wait for room below the ceiling; changesInFlight are
	// proposed and not yet applied (or given up).
	queuedChanges   atomic.Int64
	changesInFlight atomic.Int64
	batches         atomic.Int64                        // batches proposed and not yet applied
	released        [len(payment.Classes)]atomic.Uint64 // proposals sealed, by class
	backpressure    atomic.Bool
	// backpressureEvents counts the times backpressure came on.
	backpressureEvents atomic.Uint64
	// refused is raft's last refusal of a batch (no leader, apply backlog).
	refused atomic.Pointer[refusal]
	// oldestQueued is when the oldest queued proposal was queued (unix ms),
	// 0 with an empty queue.
	oldestQueued atomic.Int64
}

// refusal is raft refusing a proposed batch.
type refusal struct {
	at     time.Time
	reason string
}

// refusalMemory is how long a refusal holds the governor at "holding".
const refusalMemory = 2 * time.Second

func (s *senderState) record(queued packerFigures, inflight int, backpressure bool) {
	s.queued.Store(int64(queued.Items))
	s.microBatches.Store(int64(queued.MicroBatches))
	s.buckets.Store(int64(queued.Buckets))
	s.inflight.Store(int64(inflight))
	if s.backpressure.Swap(backpressure) != backpressure && backpressure {
		s.backpressureEvents.Add(1)
	}
}

// New returns a pipeline; Run must be running for proposals to progress.
// payments may be nil when cfg.VerifyPayments is false.
func New(cfg Config, log *zap.Logger, raft Proposer, records Records, payments Payments, epochs Epochs) (*Pipeline, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.VerifyPayments && payments == nil {
		return nil, errors.New("pipeline: payments are verified but no payment source is given")
	}
	signer, err := signing.NewSigner(cfg.Domain)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if cfg.Events == nil {
		cfg.Events = noEvents{}
	}
	return &Pipeline{
		cfg: cfg, signer: signer, log: log, raft: raft, records: records, payments: payments, epochs: epochs,
		pending:  map[common.Hash]*pendingProposal{},
		outcomes: newOutcomes(recentOutcomes),
		decided:  make(chan *ledgerpb.BatchItem, cfg.MaxPending),
		changes:  make(chan *change),
		keys:     map[any]struct{}{},
		verifier: verifyState{queue: make(chan *ledgerpb.ProposalRecord, cfg.MaxPending), park: make(chan parked)},
		ingress:  rate.NewMeter(rateWindow),
		commits:  rate.NewMeter(rateWindow),
		// Fixed buckets: nothing grows with the proposals.
		commitLatency: newLatencyHistogram(commitLatencyBounds()),
	}, nil
}

// Submit runs the intake guards and accepts the proposal. created is false
// when the same proposal was submitted before; the status is then its
// current one (ADR 0003).
func (p *Pipeline) Submit(ctx context.Context, sub *proposal.Submission) (status api.ProposalStatus, created bool, err error) {
	defer func() {
		if err != nil {
			p.cfg.Events.Refused(string(apierror.CodeOf(err)), sub.Wallet, sub.ProposalID)
		}
	}()
	if sub.Action == proposal.Write {
		if err := p.checkDebt(sub.Wallet); err != nil {
			return status, false, err
		}
		if err := p.checkIntents(sub); err != nil {
			return status, false, err
		}
	}
	if err := p.signer.Verify(sub.Typed(), sub.Signature, sub.Wallet); err != nil {
		return status, false, apierror.New(apierror.InvalidSignature, "%v", err)
	}
	if l := p.cfg.WalletLimiter; l != nil {
		if ok, err := l.Allow(strings.ToLower(sub.Wallet.Hex())); err != nil || !ok {
			return status, false, apierror.New(apierror.RateLimited, "too many proposals from wallet %s; retry shortly", sub.Wallet.Hex())
		}
	}
	digest := sub.Digest()
	// Nothing unpaid is replicated: wait for the payment here, unless the
	// id's answer is known already (the same proposal, or a conflict). The
	// records are read only when the payment is not observed: admit reads
	// them anyway.
	if p.cfg.VerifyPayments {
		if _, paid := p.observed(sub.ProposalID); !paid && !p.answered(sub.ProposalID, digest) {
			if err := p.awaitPayment(ctx, sub.ProposalID, sub.Wallet, len(sub.Message)); err != nil {
				return status, false, err
			}
		}
	}

	rec, status, done, err := p.admit(sub, digest)
	if done || err != nil {
		return status, false, err
	}
	accepted := time.Now()
	// Replicate the decision before promising anything: one entry, and a
	// 202 then means the proposal is in the log.
	item, refused := p.decideNow(rec.GetProposal())
	if refused != nil {
		p.forget(sub.ProposalID, digest)
		return status, false, refused
	}
	select {
	case p.decided <- item:
	case <-ctx.Done():
		p.forget(sub.ProposalID, digest)
		return status, false, apierror.New(apierror.Timeout, "the request ended before the proposal was accepted; resubmit it")
	}
	applied, ok := p.awaitAccepted(ctx, sub.ProposalID, digest)
	if !ok {
		// If it commits after all, a leader adopts it (or it is decided).
		p.forget(sub.ProposalID, digest)
		return status, false, apierror.New(apierror.LeaderUnknown,
			"the proposal was not replicated in time and may still be accepted; resubmit the same proposal to learn its status")
	}
	p.stats.accepted.Add(1)
	if st := applied.GetStatus(); st == ledgerpb.Status_STATUS_COMMITTED || st == ledgerpb.Status_STATUS_FINALIZED {
		p.commitLatency.observe(time.Since(accepted))
	}
	return api.StatusFromRecord(applied), true, nil
}

// checkIntents refuses a write naming an upload (ledger:intent) that is
// not a completed upload of its wallet (docs/adr/0037), before anything is
// paid for or replicated; apply checks the same (state.resolveIntents).
// Most messages name none, which one scan of the bytes tells.
func (p *Pipeline) checkIntents(sub *proposal.Submission) error {
	if !bytes.Contains(sub.Message, []byte(proposal.IntentProperty)) {
		return nil
	}
	specs, err := proposal.Nodes(sub.Path, sub.Message)
	if err != nil {
		return nil // the form's own check answers it
	}
	for _, spec := range specs {
		for _, prop := range spec.Properties {
			if prop.Name != proposal.IntentProperty {
				continue
			}
			token, _ := proposal.IntentToken(prop.ValueJSON)
			rec, err := p.records.Intent(token)
			if err != nil {
				return fmt.Errorf("reading upload intent %x: %w", token, err)
			}
			if rec == nil || rec.GetStatus() != ledgerpb.IntentStatus_INTENT_COMPLETED || common.BytesToAddress(rec.GetWallet()) != sub.Wallet {
				return apierror.Field(proposal.FieldMessage, "%s 0x%x at %s is not a completed upload of wallet %s: declare, upload and complete it first (/v1/binary/*)",
					proposal.IntentProperty, token, spec.Path, sub.Wallet.Hex())
			}
		}
	}
	return nil
}

// checkDebt refuses a write of a wallet whose writes are blocked by GC
// debt (ADR 0011) with 402 and the figures to act on. Apply checks the
// same rule again, so a write that raced a debt job is rejected alike
// everywhere.
func (p *Pipeline) checkDebt(wallet common.Address) error {
	acc, err := p.records.Account(wallet)
	if err != nil {
		return fmt.Errorf("reading the GC account: %w", err)
	}
	if !state.WritesBlocked(acc) {
		if acc != nil {
			p.cfg.Events.WritesAllowed(wallet)
		}
		return nil
	}
	p.cfg.Events.WritesBlocked(wallet, acc.GetExecutedDebtMicros(), state.LimitMicros(acc))
	e := apierror.New(apierror.WriteBlockedGCDebt, "writes of %s are blocked: executed GC debt %s is at or above its limit %s; pay the debt to unblock them",
		wallet.Hex(), api.DebtString(acc.GetExecutedDebtMicros()), api.DebtString(state.LimitMicros(acc)))
	e.Details = map[string]any{
		"pendingDebt":  api.DebtString(acc.GetPendingDebtMicros()),
		"executedDebt": api.DebtString(acc.GetExecutedDebtMicros()),
		"limit":        api.DebtString(state.LimitMicros(acc)),
		"payRoute":     "/v1/gc/account/" + strings.ToLower(wallet.Hex()) + "/pay",
	}
	return e
}

// decideNow decides a proposal at intake: its payment was observed (the
// hold) or is not verified (MOCK mode). A payment observed that does not
// pay for the proposal (another payer, transaction, class, too little) is
// refused with its 402 code and nothing is replicated (ADR 0028): the id
// and its payment stay free for the proposal the payer meant. A payment a
// reorg took back since the hold saw it is refused retryable, like one not
// observed yet.
func (p *Pipeline) decideNow(prop *ledgerpb.Proposal) (item *ledgerpb.BatchItem, refused error) {
	var paid payment.ProposalPaid
	if p.cfg.VerifyPayments {
		var ok bool
		id := common.BytesToHash(prop.GetId())
		if paid, ok = p.observed(id); !ok {
			e := apierror.New(apierror.PaymentNotFound, "the payment for proposal %s was taken back by a chain reorganization; nothing was kept, retry shortly", id.Hex())
			e.RetryAfter = holdRetryAfter
			return nil, e
		}
		if bad := payment.Check(paid, p.expectation(prop)); bad != nil {
			return nil, bad
		}
	}
	return p.decide(prop, paid, true), nil
}

// answered reports whether a submission of digest under id has its answer
// in the records already (the same proposal's status, or a conflict) and
// needs no payment looked for.
func (p *Pipeline) answered(id, digest common.Hash) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	known, err := p.known(id)
	return err != nil || (known != nil && !reusable(known, digest))
}

// known is the record that answers for id now (current), nil when there
// is none. p.mu must be held.
func (p *Pipeline) known(id common.Hash) (*ledgerpb.ProposalRecord, error) {
	applied, _, err := p.record(id) // nil when absent
	if err != nil {
		return nil, fmt.Errorf("reading proposal record: %w", err)
	}
	var pending *ledgerpb.ProposalRecord
	if pp, ok := p.pending[id]; ok {
		pending = pp.record
	}
	return current(applied, pending), nil
}

// admit runs the guards that need the pending set. done is true when the
// answer is the status of an earlier identical proposal; otherwise rec is
// the new PENDING record, now in the pending set.
func (p *Pipeline) admit(sub *proposal.Submission, digest common.Hash) (rec *ledgerpb.ProposalRecord, status api.ProposalStatus, done bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	known, err := p.known(sub.ProposalID)
	if err != nil {
		return nil, status, true, err
	}
	// A REJECTED proposal did not spend its id (ADR 0028): another
	// proposal may take it, and its decision replaces the record.
	if known != nil && !reusable(known, digest) {
		status, _, err = p.existing(known, common.BytesToHash(known.GetProposal().GetDigest()), digest)
		return nil, status, true, err
	}
	if !p.raft.IsLeader() {
		return nil, status, true, apierror.New(apierror.LeaderUnknown, "this validator is not the leader and knows none to forward to")
	}
	if len(p.pending) >= p.cfg.MaxPending {
		return nil, status, true, apierror.New(apierror.Overloaded, "%d proposals are in flight; retry later", len(p.pending))
	}
	rec = &ledgerpb.ProposalRecord{Proposal: wireProposal(sub, digest, p.cfg.Now(), p.epochs.Current()), Status: ledgerpb.Status_STATUS_PENDING}
	p.pending[sub.ProposalID] = &pendingProposal{record: rec}
	return rec, status, false, nil
}

// awaitAccepted waits up to CommitTimeout for id to have an applied record
// of the proposal of digest (its acceptance, or its decision) and returns
// it. The id may hold the record of a different, REJECTED proposal, which
// this one's entry replaces (ADR 0028).
//
// The proposal was sent a moment ago, so its record is not in state yet:
// the first look is at the records recent applies wrote (where its apply
// puts it), not a Pebble read of a key that is almost always absent. Later
// looks, after a wake-up (its apply, or state replaced by a snapshot), and
// the last one at the deadline read state too.
func (p *Pipeline) awaitAccepted(ctx context.Context, id, digest common.Hash) (*ledgerpb.ProposalRecord, bool) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CommitTimeout)
	defer cancel()
	ours := func(rec *ledgerpb.ProposalRecord, ok bool) (*ledgerpb.ProposalRecord, bool) {
		return rec, ok && common.BytesToHash(rec.GetProposal().GetDigest()) == digest
	}
	lookup := func() (*ledgerpb.ProposalRecord, bool) {
		rec, ok, err := p.record(id)
		return ours(rec, err == nil && ok)
	}
	for first := true; ; first = false {
		changed, release := p.outcomes.watch(id)
		var rec *ledgerpb.ProposalRecord
		var ok bool
		if first {
			rec, ok = ours(p.outcomes.record(id))
		} else {
			rec, ok = lookup()
		}
		if ok {
			release()
			return rec, true
		}
		select {
		case <-changed:
			release()
		case <-ctx.Done():
			release()
			return lookup()
		}
	}
}

// forget drops id from the pending set if the proposal pending under it
// is the one of digest: a REJECTED proposal does not spend its id (ADR
// 0028), so another proposal may be pending under the same id by now.
func (p *Pipeline) forget(id, digest common.Hash) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropPending(id, digest)
}

// dropPending is forget with p.mu held.
func (p *Pipeline) dropPending(id, digest common.Hash) {
	if pp, ok := p.pending[id]; ok && common.BytesToHash(pp.record.GetProposal().GetDigest()) == digest {
		delete(p.pending, id)
	}
}

// adopt runs on every validator; while it leads, it takes over accepted
// proposals that no one in this process is deciding: those a previous
// leader accepted, and those whose intake timed out here.
func (p *Pipeline) adopt(ctx context.Context) {
	tick := time.NewTicker(p.cfg.AdoptInterval)
	defer tick.Stop()
	for {
		changed := p.raft.LeaderChanged()
		if p.raft.IsLeader() {
			p.adoptUndecided()
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

func (p *Pipeline) adoptUndecided() {
	recs, err := p.records.Undecided(p.cfg.MaxPending)
	if err != nil {
		p.log.Error("listing undecided proposals", zap.Error(err))
		return
	}
	for _, rec := range recs {
		id := common.BytesToHash(rec.GetProposal().GetId())
		p.mu.Lock()
		_, busy := p.pending[id]
		full := len(p.pending) >= p.cfg.MaxPending
		p.mu.Unlock()
		if busy || full || p.decidedSince(id) {
			continue
		}
		p.mu.Lock()
		_, busy = p.pending[id]
		full = len(p.pending) >= p.cfg.MaxPending
		if !busy && !full {
			p.pending[id] = &pendingProposal{record: rec}
		}
		p.mu.Unlock()
		if !busy && !full {
			p.stats.adopted.Add(1)
			p.enqueueVerify(rec)
		}
	}
}

// decidedSince reports whether a proposal the undecided list named has been
// decided since: the list is read before the pending set, and a proposal
// leaves the pending set only once its decision is applied, so one that is
// not pending may have been decided in between. Deciding it again would
// only be ignored by apply, after counting it twice here.
func (p *Pipeline) decidedSince(id common.Hash) bool {
	rec, ok, err := p.record(id)
	if err != nil {
		p.log.Error("reading a proposal record", zap.String("proposal_id", id.Hex()), zap.Error(err))
		return true // the next pass looks again
	}
	return ok && rec.GetStatus() != ledgerpb.Status_STATUS_PENDING
}

// reusable reports whether a different proposal (of digest) may be
// submitted under the id of rec: only a committed proposal spends an id
// (ADR 0028), so a REJECTED one leaves it free.
func reusable(rec *ledgerpb.ProposalRecord, digest common.Hash) bool {
	return rec.GetStatus() == ledgerpb.Status_STATUS_REJECTED && common.BytesToHash(rec.GetProposal().GetDigest()) != digest
}

func (p *Pipeline) existing(rec *ledgerpb.ProposalRecord, have, got common.Hash) (api.ProposalStatus, bool, error) {
	if have != got {
		id := common.BytesToHash(rec.GetProposal().GetId()).Hex()
		if rec.GetStatus() == ledgerpb.Status_STATUS_PENDING {
			return api.ProposalStatus{}, false, apierror.New(apierror.ProposalIDConflict,
				"proposal id %s is held by a different proposal awaiting its decision; should that one be rejected, the id is free again", id)
		}
		return api.ProposalStatus{}, false, apierror.New(apierror.ProposalIDConflict, "proposal id %s was already used for a different proposal", id)
	}
	return api.StatusFromRecord(rec), false, nil
}

func wireProposal(s *proposal.Submission, digest common.Hash, now time.Time, epoch uint64) *ledgerpb.Proposal {
	action := ledgerpb.Action_ACTION_WRITE
	if s.Action == proposal.Delete {
		action = ledgerpb.Action_ACTION_DELETE
	}
	var tx []byte
	if s.EthereumTxHash != (common.Hash{}) {
		tx = s.EthereumTxHash.Bytes()
	}
	return &ledgerpb.Proposal{
		Id:             s.ProposalID.Bytes(),
		Action:         action,
		Wallet:         s.Wallet.Bytes(),
		Organization:   s.Organization,
		Path:           s.Path,
		ContentType:    s.ContentType,
		Tier:           s.Class.Proto(),
		Message:        s.Message,
		Signature:      s.Signature,
		EthereumTxHash: tx,
		AcceptedAtMs:   now.UnixMilli(),
		Digest:         digest.Bytes(),
		Epoch:          epoch,
	}
}

// decide applies the payment rules (ADR 0007) to what was observed.
func (p *Pipeline) decide(prop *ledgerpb.Proposal, paid payment.ProposalPaid, found bool) *ledgerpb.BatchItem {
	item := &ledgerpb.BatchItem{Proposal: prop}
	switch {
	case !p.cfg.VerifyPayments:
	case !found:
		item.Rejection = string(apierror.PaymentNotFound)
	default:
		if bad := payment.Check(paid, p.expectation(prop)); bad != nil {
			item.Rejection = string(bad.Code)
		} else {
			item.Payment = paid.Proto()
		}
	}
	if item.Rejection != "" {
		p.stats.rejected.Add(1)
		p.verifier.countReject(item.Rejection)
		p.cfg.Events.Rejected(item.Rejection, common.BytesToAddress(prop.GetWallet()), common.BytesToHash(prop.GetId()))
	} else {
		p.stats.verified.Add(1)
	}
	return item
}

// minAdoptedWait is the least a proposal adopted from an earlier leader
// waits for its payment, however long ago it was accepted: the new
// leader's payment index may still be catching up.
const minAdoptedWait = 5 * time.Second

// paymentWait is what remains of PaymentWait since the proposal's
// acceptance, at least minAdoptedWait (or PaymentWait, if shorter).
func (p *Pipeline) paymentWait(prop *ledgerpb.Proposal) time.Duration {
	left := p.cfg.PaymentWait - p.cfg.Now().Sub(time.UnixMilli(prop.GetAcceptedAtMs()))
	return max(left, min(minAdoptedWait, p.cfg.PaymentWait))
}

func (p *Pipeline) setPending(id []byte, change func(*ledgerpb.ProposalRecord)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp, ok := p.pending[common.BytesToHash(id)]
	if !ok {
		return
	}
	// Records handed out by Status are read without the lock: replace, never mutate.
	next := proto.Clone(pp.record).(*ledgerpb.ProposalRecord)
	change(next)
	pp.record = next
	p.outcomes.changed(common.BytesToHash(id), nil)
}

// Status returns the current status of a proposal: pending ones from the
// pipeline, decided ones from applied state.
func (p *Pipeline) Status(id common.Hash) (api.ProposalStatus, error) {
	s, _, release, err := p.status(id)
	release()
	return s, err
}

// status also returns a channel closed at the proposal's next change, and
// the release of that watch. Applied
// state wins over the pending set, except that a leader deciding a PENDING
// proposal may know it is VERIFIED. Pending is read first, so a proposal
// leaving the pending set (which happens only after its decision is
// applied) is always found in one or the other.
func (p *Pipeline) status(id common.Hash) (api.ProposalStatus, <-chan struct{}, func(), error) {
	changed, release := p.outcomes.watch(id)
	p.mu.Lock()
	var pending *ledgerpb.ProposalRecord // replaced, never mutated, under mu
	if pp, ok := p.pending[id]; ok {
		pending = pp.record
	}
	p.mu.Unlock()
	applied, _, err := p.record(id) // nil when absent
	if err != nil {
		return api.ProposalStatus{}, changed, release, err
	}
	if rec := current(applied, pending); rec != nil {
		return api.StatusFromRecord(rec), changed, release, nil
	}
	return api.ProposalStatus{}, changed, release, apierror.New(apierror.NotFound, "no proposal %s", id.Hex())
}

// current is the record that answers for a proposal from its applied
// record and its pending one (either nil when absent). Applied state wins:
// a proposal stays in the pending set for a moment after its decision is
// applied. Only while both are PENDING does the pending record know more
// (a leader deciding the proposal may know it is VERIFIED).
func current(applied, pending *ledgerpb.ProposalRecord) *ledgerpb.ProposalRecord {
	if applied != nil && pending != nil && !bytes.Equal(applied.GetProposal().GetDigest(), pending.GetProposal().GetDigest()) {
		// The applied record is a REJECTED proposal's, which left the id
		// free (ADR 0028); the pending one took it and knows more.
		return pending
	}
	if applied != nil && (applied.GetStatus() != ledgerpb.Status_STATUS_PENDING || pending == nil) {
		return applied
	}
	return pending
}

// WaitStatus returns the status once it differs from the one seen at the
// call, or the status as it is when wait has passed.
func (p *Pipeline) WaitStatus(ctx context.Context, id common.Hash, wait time.Duration) (api.ProposalStatus, error) {
	first, changed, release, err := p.status(id)
	if err != nil || wait <= 0 || api.Terminal(first.Status) {
		release()
		return first, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-changed:
		case <-timer.C:
			release()
			return p.Status(id)
		case <-ctx.Done():
			release()
			return p.Status(id)
		}
		release()
		var cur api.ProposalStatus
		cur, changed, release, err = p.status(id)
		if err != nil || cur.Status != first.Status {
			release()
			return cur, err
		}
	}
}

// Stats are the pipeline's counters and the sender's state.
type Stats struct {
	Pending   int    `json:"pending"`
	Accepted  uint64 `json:"accepted"`
	Adopted   uint64 `json:"adopted"` // taken over from an earlier leader or a timed-out intake
	Verified  uint64 `json:"verified"`
	Rejected  uint64 `json:"rejected"`
	Applied   uint64 `json:"applied"`   // decided proposals applied, commits and rejections
	Finalized uint64 `json:"finalized"` // records seen turning FINALIZED
	Batches   uint64 `json:"batches"`
	// Changes are the replicated changes other than batches this node
	// proposed (changes.go); Reproposed counts batches and changes
	// proposed again (refused, or not applied within CommitTimeout).
	Changes    uint64 `json:"changes"`
	Reproposed uint64 `json:"reproposed"`
	// CompactSteps are the compaction steps this node proposed as leader
	// and saw applied; CompactFailures its failed cycles (compactrun.go).
	CompactSteps    uint64 `json:"compactSteps"`
	CompactFailures uint64 `json:"compactFailures"`
	// Verifiers are the payment matchers' counters; Holds the submissions
	// waiting for their payment at intake (hold.go).
	Verifiers VerifierStats `json:"verifiers"`
	Holds     HoldStats     `json:"holds"`
	// Queued are decided proposals waiting for the sender (in the decided
	// channel or in its packing buffer, where MicroBatches in Buckets hold
	// them); InFlight are proposed and not yet applied.
	Queued       int `json:"queued"`
	MicroBatches int `json:"microBatches"`
	Buckets      int `json:"buckets"`
	InFlight     int `json:"inFlight"`
	// QueuedChanges wait for room below MaxPendingMessages;
	// ChangesInFlight are proposed and not yet applied. MaxPendingMessages
	// bounds InFlight and ChangesInFlight together.
	QueuedChanges   int `json:"queuedChanges"`
	ChangesInFlight int `json:"changesInFlight"`
	// BackpressureActive: proposals (and changes) wait because InFlight
	// and ChangesInFlight are at MaxPendingMessages.
	BackpressureActive bool   `json:"backpressureActive"`
	BackpressureEvents uint64 `json:"backpressureEvents"`
	MaxPendingMessages int    `json:"maxPendingMessages"`
	MaxBatch           int    `json:"maxBatch"`
}

// Stats returns the counters.
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	n := len(p.pending)
	p.mu.Unlock()
	return Stats{
		Pending: n, Accepted: p.stats.accepted.Load(), Adopted: p.stats.adopted.Load(), Verified: p.stats.verified.Load(),
		Rejected: p.stats.rejected.Load(), Applied: p.stats.applied.Load(), Finalized: p.stats.finalized.Load(),
		Batches: p.stats.batches.Load(), Changes: p.stats.changes.Load(), Reproposed: p.stats.reproposed.Load(), Verifiers: p.verifierStats(),
		CompactSteps: p.stats.compactSteps.Load(), CompactFailures: p.stats.compactFailures.Load(),
		Holds:              p.held.stats(),
		Queued:             int(p.sender.queued.Load()) + len(p.decided),
		MicroBatches:       int(p.sender.microBatches.Load()),
		Buckets:            int(p.sender.buckets.Load()),
		InFlight:           int(p.sender.inflight.Load()),
		QueuedChanges:      int(p.sender.queuedChanges.Load()),
		ChangesInFlight:    int(p.sender.changesInFlight.Load()),
		BackpressureActive: p.sender.backpressure.Load(),
		BackpressureEvents: p.sender.backpressureEvents.Load(),
		MaxPendingMessages: p.cfg.MaxPendingMessages,
		MaxBatch:           p.cfg.MaxBatch,
	}
}

// CommitLatency is the time from acceptance at this node's intake to the
// commit being applied, of the proposals this node's intake accepted and
// saw committed: not the wait of those held for their payment before
// acceptance, nor rejected or adopted proposals. /metrics reports it.
func (p *Pipeline) CommitLatency() LatencyStats {
	return p.commitLatency.stats()
}

// QueueStats returns the contract's queue statistics (see api.QueueStats).
func (p *Pipeline) QueueStats() api.QueueStats {
	st := p.Stats()
	current, finalized := p.epochs.Current(), p.epochs.Finalized()
	q := api.QueueStats{
		ContractVersion:             api.QueueStatsVersion,
		BackpressureActive:          st.BackpressureActive,
		BackpressurePendingRawCount: st.InFlight,
		MaxPendingMessages:          st.MaxPendingMessages,
		QueuedProposals:             st.Queued,
		BatchQueueSize:              (st.Queued + st.MaxBatch - 1) / st.MaxBatch,
		PackingBuckets:              st.Buckets,
		MicroBatches:                st.MicroBatches,
		ProposalsByEpoch:            map[string]int{},
		ProposalsByEpochAndTier:     map[string]map[string]int{},
		PendingEpochStats:           []api.PendingEpoch{},
		CurrentEpoch:                current,
		FinalizedEpoch:              finalized,
		EpochsUntilFinality:         current - min(finalized, current),
		AwaitingPayment:             st.Verifiers.Parked + st.Verifiers.Queued + st.Holds.Waiting,
		Verifiers:                   st.Verifiers.Workers,
		BackpressureEvents:          st.BackpressureEvents,
		IngressPerSec:               p.ingress.PerSecond(),
		CommitPerSec:                p.commits.PerSecond(),
	}
	// The cumulative counters come from the applied state, not from this
	// process's counters: every validator reports the same figures, and
	// they neither restart at zero nor fall back at a leader change.
	counts, _ := p.records.Counts()
	q.VerifiedCount, q.TotalFinalizedCount = counts.GetCommitted(), counts.GetFinalized()
	q.ProcessedCount = counts.GetCommitted() + counts.GetRejected()
	q.RejectedCount, q.RejectedByReason = counts.GetRejected(), maps.Clone(counts.GetRejectedByReason())
	if q.RejectedByReason == nil {
		q.RejectedByReason = map[string]uint64{}
	}
	oldest := map[uint64]int64{} // epoch -> earliest acceptance, ms
	p.mu.Lock()
	for _, pp := range p.pending {
		prop := pp.record.GetProposal()
		epoch, key := prop.GetEpoch(), strconv.FormatUint(prop.GetEpoch(), 10)
		tier := payment.ClassFromProto(prop.GetTier()).Name()
		q.ProposalsByEpoch[key]++
		if q.ProposalsByEpochAndTier[key] == nil {
			q.ProposalsByEpochAndTier[key] = map[string]int{}
		}
		q.ProposalsByEpochAndTier[key][tier]++
		if at, ok := oldest[epoch]; !ok || prop.GetAcceptedAtMs() < at {
			oldest[epoch] = prop.GetAcceptedAtMs()
		}
	}
	p.mu.Unlock()
	now := p.cfg.Now().UnixMilli()
	for epoch, at := range oldest {
		q.PendingEpochStats = append(q.PendingEpochStats, api.PendingEpoch{Epoch: epoch,
			Pending: q.ProposalsByEpoch[strconv.FormatUint(epoch, 10)], OldestAgeMs: max(0, now-at), Finalized: epoch <= finalized})
	}
	slices.SortFunc(q.PendingEpochStats, func(a, b api.PendingEpoch) int { return cmp.Compare(a.Epoch, b.Epoch) })
	return q
}

// ReleaseFlow returns what holds proposals back and where they are.
func (p *Pipeline) ReleaseFlow() api.ReleaseFlow {
	st := p.Stats()
	f := api.ReleaseFlow{
		ContractVersion: api.ReleaseFlowVersion, MaxPendingMessages: st.MaxPendingMessages, MaxPending: p.cfg.MaxPending,
		MaxBatch: st.MaxBatch, Tiers: map[string]api.TierFlow{},
		Stages: api.ReleaseStages{
			Unverified: max(0, st.Pending-st.Queued-st.InFlight), Packing: st.Queued,
			ReadyBuckets: st.Buckets, MicroBatches: st.MicroBatches, Batches: int(p.sender.batches.Load()), InFlight: st.InFlight,
		},
		Governor: api.Governor{State: "open", Action: "release", Reasons: []string{}},
	}
	for _, c := range payment.Classes {
		f.Tiers[c.Name()] = api.TierFlow{Released: p.sender.released[c].Load()}
	}
	p.mu.Lock()
	for _, pp := range p.pending {
		name := payment.ClassFromProto(pp.record.GetProposal().GetTier()).Name()
		t := f.Tiers[name]
		t.Pending++
		f.Tiers[name] = t
	}
	p.mu.Unlock()
	if st.BackpressureActive {
		reason := fmt.Sprintf("%d proposals in flight, at max_pending_messages %d", st.InFlight, st.MaxPendingMessages)
		if st.ChangesInFlight > 0 {
			reason = fmt.Sprintf("%d proposals and %d other entries in flight, at max_pending_messages %d",
				st.InFlight, st.ChangesInFlight, st.MaxPendingMessages)
		}
		f.Governor = api.Governor{State: "holding", Action: "hold", Reasons: []string{reason}}
	}
	if r := p.sender.refused.Load(); r != nil && p.cfg.Now().Sub(r.at) < refusalMemory {
		f.Governor.State, f.Governor.Action = "holding", "hold"
		f.Governor.Reasons = append(f.Governor.Reasons, "raft refused a batch "+r.at.UTC().Format(time.RFC3339Nano)+": "+r.reason)
	}
	if at := p.sender.oldestQueued.Load(); at > 0 {
		f.Stages.OldestQueuedAgeMs = max(0, p.cfg.Now().UnixMilli()-at)
	}
	if st.Pending >= p.cfg.MaxPending {
		f.Governor.State, f.Governor.Action = "shedding", "shed"
		f.Governor.Reasons = append(f.Governor.Reasons,
			fmt.Sprintf("%d proposals pending, at the intake bound %d: new ones are answered 429", st.Pending, p.cfg.MaxPending))
	}
	return f
}

// EpochOverlay returns the proposals not yet applied by epoch.
func (p *Pipeline) EpochOverlay() api.EpochOverlay {
	current, finalized := p.epochs.Current(), p.epochs.Finalized()
	o := api.EpochOverlay{ContractVersion: api.EpochOverlayVersion, CurrentEpoch: current, NextEpoch: current + 1,
		FinalizedEpoch: finalized, Epochs: []api.EpochProposals{}}
	byEpoch := map[uint64]*api.EpochProposals{}
	p.mu.Lock()
	for _, pp := range p.pending {
		prop := pp.record.GetProposal()
		e := byEpoch[prop.GetEpoch()]
		if e == nil {
			e = &api.EpochProposals{Epoch: prop.GetEpoch(), Current: prop.GetEpoch() == current, Finalized: prop.GetEpoch() <= finalized,
				ByStatus: map[string]int{}, ByTier: map[string]int{}}
			byEpoch[prop.GetEpoch()] = e
		}
		e.ByStatus[api.StatusFromRecord(pp.record).Status]++
		e.ByTier[payment.ClassFromProto(prop.GetTier()).Name()]++
	}
	p.mu.Unlock()
	for _, e := range byEpoch {
		o.Epochs = append(o.Epochs, *e)
	}
	slices.SortFunc(o.Epochs, func(a, b api.EpochProposals) int { return cmp.Compare(a.Epoch, b.Epoch) })
	return o
}
