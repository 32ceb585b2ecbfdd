// Package consensus runs etcd raft for the validator: a Pebble-backed raft
// log, the Ready loop, leader tracking and membership. It knows nothing about
// content: committed entries go to an Applier, outgoing messages to a
// Transport, both declared here and implemented by the caller.
//
// See DESIGN.md for the ordering rules the Ready loop keeps.
package consensus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// Applier is the state machine that committed entries are applied to.
//
// Apply receives committed entries in log order, each exactly once across
// restarts provided AppliedIndex is durable with the applied state: the first
// entry of a call follows the last entry of the previous call, and after a
// restart the first entry is AppliedIndex()+1. Entries include raft's empty
// entries and membership changes (conf changes, which consensus has already
// applied to raft), so the applier can account for every index; they come
// converted to state.Entry (entries.go). Apply must not retain or modify the
// entries: the slice and the data are reused or belong to raft.
//
// An error from Apply is fatal: the node stops and reports it through Err,
// because skipping an entry would make this replica diverge silently.
type Applier interface {
	Apply(entries []state.Entry) error
	AppliedIndex() uint64
}

// SnapshotRestorer is implemented by appliers that can replace their state
// with a raft snapshot's. Without it, Step refuses snapshot messages with
// ErrSnapshotUnsupported (the node cannot catch up once its peers have
// compacted past it) and Start refuses a stored snapshot newer than the
// state.
//
// RestoreSnapshot replaces the applied state with the data read from data,
// which is what a Snapshotter's SnapshotData wrote for the snapshot at
// (index, term): atomically, durably, and after verifying it completely —
// refused data must leave the state untouched. It must read data to its end
// (io.EOF) before changing anything, and treat a read error as refused data:
// data streams from the snapshot file, whose frame is checked only at the
// end. Its memory must not grow with the data's size. Afterwards
// AppliedIndex() is index. It is called on the apply goroutine, never
// concurrently with Apply, and also by Start when a crash came between
// storing a received snapshot and restoring it. An error stops the node
// (ErrApplyFailed).
type SnapshotRestorer interface {
	RestoreSnapshot(index, term uint64, data io.Reader) error
}

// SnapshotVerifier is implemented by restorers that can check a snapshot's
// data without applying it, reading it from data to its end with the same
// rules as RestoreSnapshot. ReceiveSnapshot then refuses a snapshot whose
// data does not verify (ErrBadSnapshot) before raft sees it: once raft
// has, the node can only restore it or stop. It is called on a transport's
// goroutine, concurrently with Apply.
type SnapshotVerifier interface {
	VerifySnapshot(index, term uint64, data io.Reader) error
}

// RemovedMembers is implemented by appliers that remember which members a
// committed change removed. The node then refuses to install a conf change
// that adds a removed id: raft installs it as a change of nothing (raft's
// own way to skip a change downstream of it), and the applier gets it
// without its member changes. WasRemoved answers as of the entries applied
// so far, on the apply goroutine, so the decision is the same on every
// node and again when the entry is handed over after a restart.
type RemovedMembers interface {
	WasRemoved(id uint64) (bool, error)
}

// Snapshotter is implemented by appliers that can also write their state
// as a snapshot. Only for them does the node make snapshots and compact its
// log (Config.SnapshotEntries, Config.CompactionMargin; see snapshot.go).
//
// OpenSnapshot captures the applied state for a snapshot at (index, term),
// where index is AppliedIndex(): the node calls it on the apply goroutine
// between two Apply calls. It must be cheap (a Pebble snapshot, say): the
// capture is encoded afterwards by SnapshotData.WriteTo on another
// goroutine while Apply goes on, then closed. What WriteTo writes is the
// Snapshot.Data that RestoreSnapshot receives on another node.
type Snapshotter interface {
	SnapshotRestorer
	OpenSnapshot(index, term uint64) (SnapshotData, error)
}

// SnapshotData is a captured state that writes itself as snapshot data.
//
// It is an alias of an unnamed interface type, so that an applier can
// declare OpenSnapshot with the same literal result type and implement
// Snapshotter without importing this package.
type SnapshotData = interface {
	io.WriterTo
	io.Closer
}

// Transport carries raft messages to peers.
//
// Send is called from the Ready loop after the entries and hard state the
// messages depend on are durable. It must not block for long (queue per peer
// and drop when full: raft retransmits) and must not modify the messages.
// A transport that fails to reach a peer reports it with
// Node.ReportUnreachable; incoming messages go to Node.Step.
//
// A MsgSnap carries only the snapshot's metadata; its data is a file. The
// transport streams that file (Node.OpenSnapshotFile) and the receiver
// hands the message and the stream to Node.ReceiveSnapshot, never to Step.
// After one, the sending side must call Node.ReportSnapshot with
// raft.SnapshotFinish once the receiver's ReceiveSnapshot accepted it, or
// raft.SnapshotFailure if it was not delivered or was refused: until then
// raft sends that follower nothing else.
type Transport interface {
	Send(msgs []*raftpb.Message)
}

// NopTransport drops every message: the transport of a single-node cluster.
type NopTransport struct{}

// Send implements Transport.
func (NopTransport) Send([]*raftpb.Message) {}

// Errors returned by Node.
var (
	// ErrStopped is returned once the node has stopped.
	ErrStopped = errors.New("consensus: node stopped")
	// ErrNoLeader is returned by Propose while no leader is known.
	ErrNoLeader = errors.New("consensus: no leader")
	// ErrApplyBacklog is returned by Propose while more than
	// Config.MaxApplyLag committed entries wait to be applied.
	ErrApplyBacklog = errors.New("consensus: too many committed entries waiting to be applied")
	// ErrProposalDropped is returned by Propose when raft drops a proposal
	// (for example during a leadership transfer). Retry.
	ErrProposalDropped = raft.ErrProposalDropped
	// ErrApplyFailed wraps the Applier's error that stopped the node.
	ErrApplyFailed = errors.New("consensus: apply failed")
	// ErrSnapshotUnsupported is returned by Step for a snapshot message, and
	// by Start for a stored snapshot newer than the state, when the applier
	// is not a SnapshotRestorer.
	ErrSnapshotUnsupported = errors.New("consensus: the applier cannot restore snapshots")
	// ErrInconsistentState is returned by Start when the applier's state and
	// the raft log do not belong together (for example a state directory
	// from another node, or a state ahead of the log).
	ErrInconsistentState = errors.New("consensus: applied state does not match the raft log")
)

// Role is a node's raft role.
type Role string

// Roles.
const (
	RoleFollower     Role = "FOLLOWER"
	RoleCandidate    Role = "CANDIDATE"
	RolePreCandidate Role = "PRE_CANDIDATE"
	RoleLeader       Role = "LEADER"
)

func roleOf(s raft.StateType) Role {
	switch s {
	case raft.StateLeader:
		return RoleLeader
	case raft.StateCandidate:
		return RoleCandidate
	case raft.StatePreCandidate:
		return RolePreCandidate
	default:
		return RoleFollower
	}
}

// Status is a point-in-time view of a node.
type Status struct {
	ID           uint64
	Role         Role
	Term         uint64
	Leader       uint64 // 0 when unknown
	CommitIndex  uint64 // highest index known committed (and persisted here)
	AppliedIndex uint64 // the applier's applied index
}

// applyJob is one Ready's work for the apply goroutine.
type applyJob struct {
	snapshot *raftpb.Snapshot // non-nil only when the Ready carried one
	entries  []*raftpb.Entry
}

// applyQueueLen bounds the Readys waiting for the apply goroutine. Each
// holds at most Config.MaxCommittedSizePerReady bytes of entries; when the
// queue is full the Ready loop waits, which is the backpressure of last
// resort (Propose's MaxApplyLag check normally triggers first).
const applyQueueLen = 64

// Node is a running raft member.
type Node struct {
	cfg         Config
	log         *zap.Logger
	storage     *Storage
	raft        raft.Node
	applier     Applier
	restorer    SnapshotRestorer // nil if the applier cannot restore
	verifier    SnapshotVerifier // nil if it cannot verify before restoring
	snapshotter Snapshotter      // nil: no snapshots, no compaction
	removed     RemovedMembers   // nil: every conf change is installed
	transport   Transport

	applyc chan applyJob

	stopOnce sync.Once
	stopc    chan struct{} // closed to stop the loops
	done     chan struct{} // closed when everything has stopped
	wg       sync.WaitGroup
	errMu    sync.Mutex
	err      error // the fatal error, if any

	// applyDone is the last index the apply goroutine has handed to the
	// applier (or restored from a snapshot).
	applyDone  atomic.Uint64
	appliedMu  sync.Mutex
	appliedSig chan struct{} // closed and replaced whenever applyDone moves

	statusMu  sync.Mutex
	status    Status // ID, Role, Term, Leader, CommitIndex
	leaderSig chan struct{}

	// applyBuf is the apply goroutine's slice of entries for the applier,
	// reused from one Apply call to the next.
	applyBuf []state.Entry

	// snapIndex is the applied index of the last snapshot made, attempted
	// or restored (apply goroutine only); snapBusy is set while one is
	// being written (snapshot.go).
	snapIndex uint64
	snapBusy  atomic.Bool

	// guard checks messages from peers before raft sees them (peerguard.go).
	guard peerGuard
}

// Start opens the raft state in db and starts a node that applies committed
// entries to app and sends messages through tr (nil: NopTransport).
//
// On an empty log it bootstraps a new cluster of cfg.Peers (or, with
// cfg.Join, waits to be contacted by an existing cluster); otherwise it
// restarts from the log, telling raft that app has applied up to
// app.AppliedIndex() so no entry is applied twice. A stored snapshot newer
// than the state (a crash between receiving it and restoring it) is
// restored first.
//
// app may also implement SnapshotRestorer, SnapshotVerifier and Snapshotter;
// a production applier implements all three.
func Start(cfg Config, db *storage.DB, app Applier, tr Transport) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if db == nil || app == nil {
		return nil, fmt.Errorf("%w: db and applier are required", ErrInvalidConfig)
	}
	if tr == nil {
		tr = NopTransport{}
	}
	st, err := OpenStorage(db)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With(zap.Uint64("raft_id", cfg.ID))
	st.log = log.Named("storage")
	restorer, _ := app.(SnapshotRestorer)

	hs := st.HardState()
	first, _ := st.FirstIndex()
	last, _ := st.LastIndex()
	applied := app.AppliedIndex()
	snapMeta := st.SnapshotMetadata()
	if snapMeta.GetIndex() > applied {
		// The snapshot was stored but the state not restored from it yet.
		if restorer == nil {
			return nil, fmt.Errorf("%w: a snapshot at %d is newer than the state at %d", ErrSnapshotUnsupported, snapMeta.GetIndex(), applied)
		}
		log.Info("restoring the stored snapshot", zap.Uint64("index", snapMeta.GetIndex()), zap.Uint64("applied", applied))
		if err := restoreSnapshot(restorer, st); err != nil {
			return nil, fmt.Errorf("%w: restore the stored snapshot at %d: %w", ErrApplyFailed, snapMeta.GetIndex(), err)
		}
		if applied = app.AppliedIndex(); applied != snapMeta.GetIndex() {
			return nil, fmt.Errorf("%w: restored the snapshot at %d, but the state is at %d", ErrInconsistentState, snapMeta.GetIndex(), applied)
		}
	}
	fresh := last == 0 && raft.IsEmptyHardState(hs) && snapMeta.GetIndex() == 0
	switch {
	case fresh && applied != 0:
		return nil, fmt.Errorf("%w: the raft log is empty but the state is applied up to %d", ErrInconsistentState, applied)
	case hs.GetCommit() > last:
		return nil, fmt.Errorf("%w: commit index %d is beyond the last index %d", ErrCorruptLog, hs.GetCommit(), last)
	case applied > hs.GetCommit():
		return nil, fmt.Errorf("%w: state applied up to %d, beyond the commit index %d", ErrInconsistentState, applied, hs.GetCommit())
	case applied+1 < first:
		return nil, fmt.Errorf("%w: state applied up to %d, but the log starts at %d", ErrInconsistentState, applied, first)
	}

	n := &Node{
		cfg:        cfg,
		log:        log,
		storage:    st,
		applier:    app,
		transport:  tr,
		applyc:     make(chan applyJob, applyQueueLen),
		stopc:      make(chan struct{}),
		done:       make(chan struct{}),
		appliedSig: make(chan struct{}),
		leaderSig:  make(chan struct{}),
		status:     Status{ID: cfg.ID, Role: RoleFollower, Term: hs.GetTerm(), CommitIndex: hs.GetCommit()},
	}
	n.guard.low = noLow
	n.restorer = restorer
	n.verifier, _ = app.(SnapshotVerifier)
	n.snapshotter, _ = app.(Snapshotter)
	n.removed, _ = app.(RemovedMembers)
	n.snapIndex = snapMeta.GetIndex()
	n.applyDone.Store(applied)

	rc := &raft.Config{
		ID:                       cfg.ID,
		ElectionTick:             cfg.ElectionTicks,
		HeartbeatTick:            cfg.HeartbeatTicks,
		Storage:                  st,
		Applied:                  applied,
		MaxSizePerMsg:            cfg.MaxSizePerMsg,
		MaxCommittedSizePerReady: cfg.MaxCommittedSizePerReady,
		MaxInflightMsgs:          cfg.MaxInflightMsgs,
		CheckQuorum:              true,
		PreVote:                  true,
		StepDownOnRemoval:        true,
		Logger:                   newRaftLogger(cfg.Logger.Named("raft")),
	}
	var soleVoter bool
	if fresh && !cfg.Join {
		peers := make([]raft.Peer, len(cfg.Peers))
		for i, id := range cfg.Peers {
			peers[i] = raft.Peer{ID: id}
		}
		n.log.Info("bootstrapping a new cluster", zap.Uint64s("peers", cfg.Peers))
		n.raft = raft.StartNode(rc, peers)
		soleVoter = len(cfg.Peers) == 1
	} else {
		cs, _ := st.ConfState()
		n.log.Info("restarting raft", zap.Uint64("applied", applied), zap.Uint64("commit", hs.GetCommit()),
			zap.Uint64("first_index", first), zap.Uint64("last_index", last), zap.Uint64s("voters", cs.GetVoters()))
		n.raft = raft.RestartNode(rc)
		soleVoter = slices.Equal(cs.GetVoters(), []uint64{cfg.ID}) && len(cs.GetVotersOutgoing()) == 0
	}

	n.wg.Add(2)
	go n.readyLoop()
	go n.applyLoop()
	if n.snapshotter != nil && n.cfg.TruncationInterval > 0 {
		// Truncating past the snapshots needs a snapshot on demand.
		n.wg.Add(1)
		go n.truncateLoop()
	}
	go func() {
		<-n.stopc
		n.wg.Wait()
		n.raft.Stop()
		close(n.done)
	}()

	if soleVoter {
		// A cluster of one needs no election timeout: campaign at once so
		// development nodes and tests are ready immediately.
		if err := n.raft.Campaign(context.Background()); err != nil && !errors.Is(err, raft.ErrStopped) {
			n.log.Warn("campaign failed", zap.Error(err))
		}
	}
	return n, nil
}

// readyLoop ticks raft and handles its Readys.
func (n *Node) readyLoop() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	for {
		// Read before waiting: a Ready received below was computed after
		// every message counted here was stepped (peerGuard.settled).
		stepped := n.guard.stepped.Load()
		select {
		case <-ticker.C:
			n.raft.Tick()
		case rd := <-n.raft.Ready():
			if err := n.handleReady(rd); err != nil {
				n.fail(err)
				return
			}
			n.guard.settled(stepped)
		case <-n.stopc:
			return
		}
	}
}

// handleReady keeps raft's contract for one Ready (DESIGN.md, "Ready loop"):
//
//  1. persist HardState, entries and snapshot in one Pebble batch, synced
//     when raft says so (new entries, a new term or vote) or a snapshot
//     arrived;
//  2. only then send the messages, which may acknowledge those entries or
//     that vote;
//  3. queue the committed entries (and snapshot) for the apply goroutine,
//     which applies them in order, conf changes included;
//  4. if the Ready committed a conf change or carried a snapshot, wait until
//     it is applied, so raft never believes a membership is in force that
//     the node has not installed yet;
//  5. Advance.
//
// Normal entries are applied asynchronously, so a slow applier does not
// stop the ticks and heartbeats of this loop; the apply queue and
// Config.MaxApplyLag bound how far it may fall behind.
func (n *Node) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		n.setSoftState(rd.SoftState)
	}
	hasSnap := !raft.IsEmptySnap(rd.Snapshot)
	if hasSnap && n.restorer == nil {
		return ErrSnapshotUnsupported
	}
	if err := n.storage.save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync || hasSnap); err != nil {
		return err
	}
	if rd.HardState != nil {
		n.setHardState(rd.HardState)
	}
	if len(rd.Messages) > 0 {
		n.transport.Send(rd.Messages)
	}
	if hasSnap || len(rd.CommittedEntries) > 0 {
		job := applyJob{entries: rd.CommittedEntries}
		target := uint64(0)
		if hasSnap {
			job.snapshot = rd.Snapshot
			target = rd.Snapshot.GetMetadata().GetIndex()
		}
		if k := len(rd.CommittedEntries); k > 0 {
			target = rd.CommittedEntries[k-1].GetIndex()
		}
		select {
		case n.applyc <- job:
		case <-n.stopc:
			return nil
		}
		if hasSnap || hasConfChange(rd.CommittedEntries) {
			if !n.waitApplied(target) {
				return nil // stopping
			}
		}
	}
	n.raft.Advance()
	return nil
}

func hasConfChange(ents []*raftpb.Entry) bool {
	for _, e := range ents {
		if e.GetType() != raftpb.EntryNormal {
			return true
		}
	}
	return false
}

// waitApplied blocks until the apply goroutine has finished index, or the
// node stops (false).
func (n *Node) waitApplied(index uint64) bool {
	for {
		n.appliedMu.Lock()
		sig := n.appliedSig
		n.appliedMu.Unlock()
		if n.applyDone.Load() >= index {
			return true
		}
		select {
		case <-sig:
		case <-n.stopc:
			return false
		}
	}
}

func (n *Node) markApplied(index uint64) {
	n.applyDone.Store(index)
	n.appliedMu.Lock()
	close(n.appliedSig)
	n.appliedSig = make(chan struct{})
	n.appliedMu.Unlock()
}

// applyLoop applies queued Readys one at a time, in order.
func (n *Node) applyLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stopc:
			return
		case job := <-n.applyc:
			if err := n.apply(job); err != nil {
				n.fail(err)
				return
			}
			n.maybeSnapshot()
		case <-n.storage.wantc:
			// A snapshot is wanted now (Storage.Snapshot), even if no
			// entry is being applied.
			n.maybeSnapshot()
		}
	}
}

// apply runs one job: the snapshot first, then runs of normal entries in one
// Apply call each, and every conf change on its own, after raft has
// installed it and its ConfState is durable.
func (n *Node) apply(job applyJob) error {
	if job.snapshot != nil {
		// raft has installed the snapshot's ConfState itself, and save has
		// persisted it with the snapshot; only the state is left.
		index := job.snapshot.GetMetadata().GetIndex()
		if err := restoreSnapshot(n.restorer, n.storage); err != nil {
			return fmt.Errorf("%w: restore snapshot at %d: %w", ErrApplyFailed, index, err)
		}
		if got := n.applier.AppliedIndex(); got != index {
			return fmt.Errorf("%w: restored the snapshot at %d, but the state is at %d", ErrApplyFailed, index, got)
		}
		n.snapIndex = index
		n.markApplied(index)
		n.log.Info("caught up through a snapshot", zap.Uint64("index", index), zap.Uint64("term", job.snapshot.GetMetadata().GetTerm()))
	}
	ents := job.entries
	for len(ents) > 0 {
		k := 0
		for k < len(ents) && ents[k].GetType() == raftpb.EntryNormal {
			k++
		}
		var run []state.Entry
		var truncateTo uint64
		if k == 0 {
			e, err := n.applyConfChange(ents[0])
			if err != nil {
				return err
			}
			run, k = append(n.applyBuf[:0], e), 1
		} else {
			run, truncateTo = appendNormalEntries(n.applyBuf[:0], ents[:k])
		}
		err := n.applier.Apply(run)
		// Kept for the next run, emptied so that it holds on to no data.
		clear(run)
		n.applyBuf = run[:0]
		if err != nil {
			return fmt.Errorf("%w: entries [%d, %d]: %w", ErrApplyFailed, ents[0].GetIndex(), ents[k-1].GetIndex(), err)
		}
		n.markApplied(ents[k-1].GetIndex())
		if truncateTo > 0 {
			n.truncate(truncateTo)
		}
		ents = ents[k:]
	}
	return nil
}

// restoreSnapshot hands the current snapshot of st to the restorer, as a
// stream read from its file.
func restoreSnapshot(r SnapshotRestorer, st *Storage) error {
	md, fr, err := st.openCurrentSnapshot()
	if err != nil {
		return err
	}
	if fr == nil {
		return fmt.Errorf("%w: no snapshot to restore", ErrCorruptLog)
	}
	defer fr.Close()
	return r.RestoreSnapshot(md.GetIndex(), md.GetTerm(), fr.Data())
}

// applyConfChange installs a committed conf change in raft and persists the
// resulting ConfState with its index, and returns the entry for the applier.
// A conf change at or below the persisted index is already part of the
// ConfState raft restarted from and is not installed twice (re-entering a
// joint config would make raft panic); the applier still gets it. A change
// that adds a removed member (RemovedMembers) is installed as a change of
// nothing and handed over without its member changes.
func (n *Node) applyConfChange(e *raftpb.Entry) (state.Entry, error) {
	cc, mc, err := decodeConfChange(e)
	if err != nil {
		return state.Entry{}, err
	}
	refused, err := n.addsRemovedMember(mc)
	if err != nil {
		return state.Entry{}, fmt.Errorf("%w: conf change at %d: %w", ErrApplyFailed, e.GetIndex(), err)
	}
	if refused {
		n.log.Warn("refusing a committed membership change that adds a removed member", zap.Uint64("index", e.GetIndex()))
		// NodeId 0 is raft's "skip this change".
		cc, mc = &raftpb.ConfChange{}, &state.MembershipChange{}
	}
	entry := state.Entry{Index: e.GetIndex(), Term: e.GetTerm(), Membership: mc}
	if _, confIndex := n.storage.ConfState(); e.GetIndex() <= confIndex {
		return entry, nil
	}
	cs := n.raft.ApplyConfChange(cc)
	if cs == nil {
		return state.Entry{}, ErrStopped
	}
	if err := n.storage.saveConfState(cs, e.GetIndex()); err != nil {
		return state.Entry{}, err
	}
	n.log.Info("membership changed", zap.Uint64("index", e.GetIndex()),
		zap.Uint64s("voters", cs.GetVoters()), zap.Uint64s("learners", cs.GetLearners()))
	if !slices.Contains(cs.GetVoters(), n.cfg.ID) && !slices.Contains(cs.GetLearners(), n.cfg.ID) &&
		!slices.Contains(cs.GetVotersOutgoing(), n.cfg.ID) {
		n.log.Warn("this node is no longer a member of the cluster")
	}
	return entry, nil
}

// addsRemovedMember reports whether mc adds (as voter or learner) an id
// that the applier remembers as removed.
func (n *Node) addsRemovedMember(mc *state.MembershipChange) (bool, error) {
	if n.removed == nil {
		return false, nil
	}
	for _, c := range mc.Changes {
		if c.Type != state.AddVoter && c.Type != state.AddLearner {
			continue
		}
		if removed, err := n.removed.WasRemoved(c.NodeID); err != nil || removed {
			return removed, err
		}
	}
	return false, nil
}

func (n *Node) setSoftState(ss *raft.SoftState) {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	role := roleOf(ss.RaftState)
	if role == n.status.Role && ss.Lead == n.status.Leader {
		return
	}
	n.status.Role, n.status.Leader = role, ss.Lead
	close(n.leaderSig)
	n.leaderSig = make(chan struct{})
}

func (n *Node) setHardState(hs *raftpb.HardState) {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	n.status.Term, n.status.CommitIndex = hs.GetTerm(), hs.GetCommit()
}

// fail records the first fatal error and stops the node.
func (n *Node) fail(err error) {
	n.errMu.Lock()
	if n.err == nil {
		n.err = err
		n.log.Error("raft node stopping on a fatal error", zap.Error(err))
	}
	n.errMu.Unlock()
	n.stopOnce.Do(func() { close(n.stopc) })
}

// Status returns the node's current role, term, leader and indexes. It does
// not block on raft and is cheap enough to poll.
func (n *Node) Status() Status {
	n.statusMu.Lock()
	st := n.status
	n.statusMu.Unlock()
	st.AppliedIndex = n.applier.AppliedIndex()
	return st
}

// IsLeader reports whether this node leads, from the same cheap status as
// Status.
func (n *Node) IsLeader() bool {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	return n.status.Role == RoleLeader
}

// Leading returns this node's id and current term, and whether it leads
// that term: the three are read together, so that a leader acting for its
// term (an announcement of it, say) names the term it leads.
func (n *Node) Leading() (nodeID, term uint64, ok bool) {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	return n.status.ID, n.status.Term, n.status.Role == RoleLeader
}

// LeaderChanged returns a channel that is closed at the next change of the
// leader or of this node's role. Take a new channel after each close; read
// Status after taking the channel so no change is missed.
func (n *Node) LeaderChanged() <-chan struct{} {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	return n.leaderSig
}

// Propose submits data to be appended to the log.
//
// nil means raft accepted the proposal, not that it will commit: a leader
// change can still drop it. Callers wait for its applied result with a
// deadline and, when it does not appear, propose again with the same
// idempotent id. Errors: ErrNoLeader, ErrApplyBacklog, ErrProposalDropped,
// ErrStopped, ErrReservedData, or ctx's error.
func (n *Node) Propose(ctx context.Context, data []byte) error {
	select {
	case <-n.stopc:
		return ErrStopped
	default:
	}
	n.statusMu.Lock()
	leader, commit := n.status.Leader, n.status.CommitIndex
	n.statusMu.Unlock()
	if len(data) > 0 && data[0] == truncationTag {
		return ErrReservedData
	}
	if leader == raft.None {
		// raft would hold the proposal until a leader appears or ctx ends.
		return ErrNoLeader
	}
	if done := n.applyDone.Load(); commit > done && commit-done > n.cfg.MaxApplyLag {
		return ErrApplyBacklog
	}
	return n.mapErr(n.raft.Propose(ctx, data))
}

// ProposeConfChange proposes a membership change (raftpb.ConfChange or
// ConfChangeV2). Like Propose, nil does not mean it will commit.
func (n *Node) ProposeConfChange(ctx context.Context, cc raftpb.ConfChangeI) error {
	return n.mapErr(n.raft.ProposeConfChange(ctx, cc))
}

// PendingConfChange reports whether the log holds a conf change that this
// node has not applied yet: proposed or committed, raft installs it only
// when it is applied, and drops any other conf change proposed meanwhile.
// It reads the stored log past the applied index, so a change that raft
// accepted but this node has not persisted yet is not seen: a caller that
// proposes changes itself waits until its own change is applied.
func (n *Node) PendingConfChange() (bool, error) {
	applied := n.applyDone.Load()
	last, err := n.storage.LastIndex()
	if err != nil || last <= applied {
		return false, err
	}
	ents, err := n.storage.Entries(applied+1, last+1, math.MaxUint64)
	if err != nil {
		return false, err
	}
	return hasConfChange(ents), nil
}

// Step hands a message received from a peer to raft.
//
// The message is checked first, on the caller's goroutine, against raft's
// rules and this node's stored log (peerguard.go): a message raft would
// panic on, or that breaks raft's invariants for its kind, is refused with
// an error wrapping ErrMalformedMessage (no correct peer sends it) or
// ErrInconsistentMessage (it contradicts this node's log), counted in
// PeerMessagesRefused and logged; raft never sees it.
//
// A snapshot message is refused as malformed: snapshots come with their
// data, through ReceiveSnapshot.
func (n *Node) Step(ctx context.Context, m *raftpb.Message) error {
	if m == nil {
		return fmt.Errorf("%w: nil message", ErrMalformedMessage)
	}
	if m.GetType() == raftpb.MsgSnap {
		return n.refusePeerMessage(m, malformed("a snapshot without its data"))
	}
	return n.step(ctx, m)
}

// ReceiveSnapshot takes a MsgSnap from a peer with its data: size bytes
// from r, the snapshot file as the sender's OpenSnapshotFile returned it.
// The message is checked as Step checks messages, then the file is written
// to the snapshot directory, checked (its frame and, with a
// SnapshotVerifier, the applier's data) and staged, and only then is the
// message stepped into raft, which takes the staged file when it installs
// the snapshot (snapshot.go). Memory stays bounded whatever size is. A
// snapshot raft would ignore (at or below the commit index) is stepped
// without reading r.
//
// Errors: ErrSnapshotUnsupported, ErrBadSnapshot (a truncated stream, a bad
// frame or data: nothing is published), ErrSnapshotBusy and
// ErrSnapshotNoSpace (retry later), the peer checks of Step, and errors of
// r or the disk. The transport reports each to the sender, which tells its
// raft raft.SnapshotFailure; the stream is for this one message.
func (n *Node) ReceiveSnapshot(ctx context.Context, m *raftpb.Message, r io.Reader, size int64) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil message", ErrMalformedMessage)
	case m.GetType() != raftpb.MsgSnap:
		return n.refusePeerMessage(m, malformed("%s sent as a snapshot", m.GetType()))
	case len(m.GetSnapshot().GetData()) > 0:
		return n.refusePeerMessage(m, malformed("a snapshot message with inline data"))
	case n.restorer == nil:
		return ErrSnapshotUnsupported
	}
	// The message alone first, so that nothing is written for a snapshot
	// raft would refuse; Step checks it again against the log of the
	// moment.
	if _, err := checkPeerMessage(m, peerView{}); err != nil {
		return n.refusePeerMessage(m, err)
	}
	md := m.GetSnapshot().GetMetadata()
	if md.GetIndex() > n.storage.HardState().GetCommit() {
		var verify func(io.Reader) error
		if n.verifier != nil {
			verify = func(data io.Reader) error { return n.verifier.VerifySnapshot(md.GetIndex(), md.GetTerm(), data) }
		}
		if err := n.storage.stageSnapshot(md, r, size, n.applyDone.Load(), verify); err != nil {
			if errors.Is(err, ErrBadSnapshot) {
				n.log.Warn("refusing a snapshot that does not verify", zap.Uint64("from", m.GetFrom()),
					zap.Uint64("index", md.GetIndex()), zap.Error(err))
			}
			return err
		}
	}
	return n.step(ctx, m)
}

// OpenSnapshotFile opens the file of the snapshot a MsgSnap this node sends
// refers to, for a transport to stream to the peer: the whole file, frame
// included, and its size. It fails with ErrSnapshotGone once a newer
// snapshot replaced it.
func (n *Node) OpenSnapshotFile(m *raftpb.Message) (io.ReadCloser, int64, error) {
	md := m.GetSnapshot().GetMetadata()
	return n.storage.OpenSnapshotFile(md.GetIndex(), md.GetTerm())
}

// step is Step for every message type, MsgSnap included once its file is
// staged.
func (n *Node) step(ctx context.Context, m *raftpb.Message) error {
	typ := m.GetType()
	if typ != raftpb.MsgApp && typ != raftpb.MsgHeartbeat && typ != raftpb.MsgSnap {
		// Checked against the message alone: nothing of the log's end.
		if _, err := checkPeerMessage(m, peerView{}); err != nil {
			return n.refusePeerMessage(m, err)
		}
		return n.mapErr(n.raft.Step(ctx, m))
	}
	// These can cut raft's log or depend on its end: checked and stepped
	// one at a time, so a heartbeat sees every cut stepped before it. raft
	// takes them at once (its receive channel), so the lock is short.
	n.guard.mu.Lock()
	defer n.guard.mu.Unlock()
	low, err := checkPeerMessage(m, n.peerView())
	if err != nil {
		return n.refusePeerMessage(m, err)
	}
	if low != noLow {
		// Before raft can act on it; conservative if raft does not cut.
		n.guard.low = min(n.guard.low, low)
		n.guard.lowGen = n.guard.stepped.Load() + 1
	}
	err = n.raft.Step(ctx, m)
	n.guard.stepped.Add(1)
	return n.mapErr(err)
}

// ReportUnreachable tells raft that the last message to id was not delivered.
func (n *Node) ReportUnreachable(id uint64) { n.raft.ReportUnreachable(id) }

// ReportSnapshot tells raft whether a snapshot sent to id arrived.
func (n *Node) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	n.raft.ReportSnapshot(id, status)
}

// TransferLeadership asks the current leader to hand leadership to
// transferee. It returns at once; watch LeaderChanged for the result.
func (n *Node) TransferLeadership(ctx context.Context, transferee uint64) {
	n.statusMu.Lock()
	lead := n.status.Leader
	n.statusMu.Unlock()
	n.raft.TransferLeadership(ctx, lead, transferee)
}

// ConfState returns the persisted membership.
func (n *Node) ConfState() *raftpb.ConfState {
	cs, _ := n.storage.ConfState()
	return cs
}

// Storage returns the node's raft log storage (bounds, snapshot metadata).
func (n *Node) Storage() *Storage { return n.storage }

func (n *Node) mapErr(err error) error {
	if errors.Is(err, raft.ErrStopped) {
		return ErrStopped
	}
	return err
}

// Stop stops the node and waits for its goroutines. An Apply call in
// progress is allowed to finish; queued entries not yet applied are applied
// again after a restart (they are in the log). Stop is idempotent.
func (n *Node) Stop() {
	n.stopOnce.Do(func() { close(n.stopc) })
	<-n.done
}

// Done is closed when the node has stopped, by Stop or on a fatal error.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err returns the fatal error that stopped the node, or nil.
func (n *Node) Err() error {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.err
}
