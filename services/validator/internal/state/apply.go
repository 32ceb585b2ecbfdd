package state

// Applying one entry
//
// For each BatchItem, in order:
//   - a proposal id that already has a record is a no-op (an id is spent
//     once, ADR 0003), as is an item without a 32-byte id (there is no
//     id to record it under); except that a REJECTED record does not spend
//     its id (ADR 0028): a different proposal's acceptance or decision
//     replaces it;
//   - an item with a rejection is recorded REJECTED with that reason;
//   - a decision whose payment a PaymentReorg marked on the PENDING record
//     is recorded REJECTED payment_orphaned, or committed with the mark's
//     replacement (reorg.go);
//   - a proposal whose path is malformed or outside its wallet's subtree is
//     recorded REJECTED (invalid_field / path_forbidden): intake checks the
//     same, this is the last line that keeps another wallet's content and
//     the key encoding safe from a faulty leader;
//   - WRITE expands the message with proposal.Nodes (the function intake
//     validated it with), removes the nested children the node's previous
//     revision created that the new message no longer has, writes every
//     node as a new revision and emits a content event (plus a binary event
//     when the node carries ledger:cid);
//   - DELETE removes the node and its subtree and emits a delete event.
//
// The other ops emit wallet events (GC debt accounts, gc.go) and consensus
// events (a leader's announcement, finality), dated by the at_ms the
// proposer wrote into the op.
//
// Everything is read through the indexed batch, so a later item sees the
// writes of an earlier one in the same entry.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ethereum/go-ethereum/crypto/keccak"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/segarchive"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// Rejection reasons apply itself decides (codes of ADR 0006).
const (
	ReasonInvalidField  = "invalid_field"
	ReasonPathForbidden = "path_forbidden"
)

// Event types and actions (ADR 0023).
const (
	EventTypeContent   = "content"
	EventTypeBinary    = "binary"
	EventTypeDelete    = "delete"
	EventTypeWallet    = "wallet"
	EventTypeConsensus = "consensus"
	EventActionWrite   = "write"
	EventActionDel     = "delete"

	// Wallet events: a change of the wallet's GC debt account (gc.go);
	// /v1/gc/account/{wallet} has the figures.
	EventActionDebtExecuted    = "debt_executed"
	EventActionDebtPaid        = "debt_paid"
	EventActionLimitSet        = "limit_set"
	EventActionWritesBlocked   = "writes_blocked"
	EventActionWritesUnblocked = "writes_unblocked"

	// Consensus events.
	EventActionLeader   = "leader"   // a leader announced itself in a new term
	EventActionFinalize = "finalize" // an epoch became final (Event.epoch)
	EventActionCompact  = "compact"  // a GcCompact started a generation (Event.epoch: the run's)
	// A compaction run ended: every live node is in its generation, or
	// the leader gave it up (Event.reason says why).
	EventActionCompactDone      = "compact_done"
	EventActionCompactAbandoned = "compact_abandoned"
)

// applier holds the state of one Apply call.
type applier struct {
	b    *pebble.Batch // indexed: reads see earlier writes of this call
	mut  *mutations
	meta *meta // advanced in place; published only after commit
	log  *zap.Logger
	// records are the proposal records this call wrote, for the observer.
	records []*ledgerpb.ProposalRecord
	// run is the compaction the entry being applied ended, whose
	// state hash is added once the entry's digest is known (compact.go).
	run *ledgerpb.GcRun
	// step is the compaction step this call applied last, if any.
	step *ledgerpb.GcCompactStep
	// dropped are the key ranges this call deleted with range deletions,
	// for the machine's SpaceReclaimer once the batch commits.
	dropped []keyRange
	// Per-entry caches of the records a batch changes once per proposal
	// (a wallet's figures, its GC account): read once, written once at the
	// end of the entry in key order (entryRecords).
	walletStats map[[20]byte]*ledgerpb.WalletStats
	accounts    map[[20]byte]*ledgerpb.GcAccount // nil value: the wallet has none
	dirty       map[[20]byte]bool                // accounts to write
}

// entryContext is what apply knows about the entry being applied.
type entryContext struct {
	index, term uint64
	batch       *ledgerpb.ProposalBatch
}

func (a *applier) applyEntry(e *Entry) error {
	if e.Membership != nil {
		return a.applyMembership(e.Membership)
	}
	if len(e.Data) == 0 {
		return nil // the leader's empty entries: index and hash only
	}
	var ent ledgerpb.Entry
	if err := proto.Unmarshal(e.Data, &ent); err != nil {
		// Every validator sees the same bytes and makes the same decision.
		a.log.Warn("skipping an entry that does not decode", zap.Uint64("index", e.Index), zap.Error(err))
		return nil
	}
	switch op := ent.GetOp().(type) {
	case *ledgerpb.Entry_Batch:
		if err := a.applyBatch(entryContext{index: e.Index, term: e.Term, batch: op.Batch}); err != nil {
			return err
		}
		return a.pruneEvents(op.Batch)
	case *ledgerpb.Entry_Finalize:
		return a.finalize(e.Index, op.Finalize)
	case *ledgerpb.Entry_GcExecute:
		return a.gcExecute(e.Index, op.GcExecute)
	case *ledgerpb.Entry_GcSetLimit:
		return a.gcSetLimit(e.Index, op.GcSetLimit)
	case *ledgerpb.Entry_GcPay:
		return a.gcPay(e.Index, op.GcPay)
	case *ledgerpb.Entry_PaymentReorg:
		return a.paymentReorg(op.PaymentReorg)
	case *ledgerpb.Entry_LeaderElected:
		return a.leaderElected(e.Index, e.Term, op.LeaderElected)
	case *ledgerpb.Entry_GcCompact:
		return a.compact(e.Index, e.Term, op.GcCompact)
	case *ledgerpb.Entry_GcCompactStep:
		return a.compactStep(e.Index, e.Term, op.GcCompactStep)
	case *ledgerpb.Entry_GcCompactAbandon:
		return a.compactAbandon(e.Index, op.GcCompactAbandon)
	case *ledgerpb.Entry_BlobIntentDeclare:
		return a.declareIntent(e.Index, op.BlobIntentDeclare)
	case *ledgerpb.Entry_BlobIntentComplete:
		return a.completeIntent(e.Index, op.BlobIntentComplete)
	case *ledgerpb.Entry_BlobIntentExpire:
		return a.expireIntents(e.Index, op.BlobIntentExpire)
	case *ledgerpb.Entry_ClientRegister:
		return a.clientRegister(e.Index, op.ClientRegister)
	default:
		// An op this version does not know (or none): skipped alike everywhere.
		a.log.Warn("skipping an entry without a known op", zap.Uint64("index", e.Index))
		return nil
	}
}

func (a *applier) applyBatch(ec entryContext) error {
	seg := &ledgerpb.Segment{
		Index:      ec.index,
		Term:       ec.term,
		Epoch:      ec.batch.GetEpoch(),
		Generation: a.meta.lastRun.GetGeneration(),
		PrevHash:   append([]byte(nil), a.meta.segmentHash[:]...),
	}
	for _, item := range ec.batch.GetItems() {
		p := item.GetProposal()
		if len(p.GetId()) != 32 {
			a.log.Warn("skipping a batch item without a 32-byte proposal id", zap.Uint64("index", ec.index))
			continue
		}
		prev, err := getRecord(a.b, p.GetId())
		if err != nil {
			return err
		}
		if item.GetAccept() {
			// Intake is replicated: the proposal is PENDING on every
			// validator, so its acceptance survives the leader.
			if prev != nil && !Replaces(prev, p) {
				continue
			}
			rec := &ledgerpb.ProposalRecord{Proposal: p, Status: ledgerpb.Status_STATUS_PENDING}
			if err := a.putRecord(rec); err != nil {
				return err
			}
			if err := a.mut.set(storage.UndecidedKey([32]byte(p.GetId())), nil); err != nil {
				return err
			}
			continue
		}
		// A proposal id is decided once; only the proposal that was
		// accepted under the id can be decided. A REJECTED proposal did
		// not spend the id: another proposal's decision replaces it.
		if Replaces(prev, p) {
			prev = nil
		}
		if prev != nil && (prev.GetStatus() != ledgerpb.Status_STATUS_PENDING || !bytes.Equal(prev.GetProposal().GetDigest(), p.GetDigest())) {
			continue
		}
		if prev != nil {
			if err := a.mut.delete(storage.UndecidedKey([32]byte(p.GetId()))); err != nil {
				return err
			}
		}
		reason, paid := a.check(item), item.GetPayment()
		if reason == "" && prev != nil {
			// A reorg took the payment back after the leader decided
			// (reorg.go): rejected, or committed with the re-mined log.
			paid, reason = orphanedDecision(prev, paid)
		}
		if reason == "" && p.GetAction() == ledgerpb.Action_ACTION_WRITE {
			acc, err := a.entryAccount(p.GetWallet())
			if err != nil {
				return err
			}
			if WritesBlocked(acc) {
				reason = ReasonWriteBlocked
			}
		}
		nested := false
		if reason == "" {
			switch p.GetAction() {
			case ledgerpb.Action_ACTION_WRITE:
				reason, nested, err = a.write(ec, p, seg)
			case ledgerpb.Action_ACTION_DELETE:
				err = a.delete(ec, p, seg)
			}
			if err != nil {
				return err
			}
		}
		if !nested {
			// The decided record keeps the message only where a later
			// write of the path needs it to find the nested children
			// this one created (staleChildren); otherwise the message
			// lives in the node and the segment, and a third copy would
			// only add to every flush and compaction. The entry's
			// proposal is this call's own decoded copy.
			p.Message = nil
		}
		rec := &ledgerpb.ProposalRecord{Proposal: p, Payment: paid, CommitIndex: ec.index}
		switch {
		case reason != "":
			rec.Status, rec.Reason = ledgerpb.Status_STATUS_REJECTED, reason
		case a.meta.finalized > 0 && p.GetEpoch() <= a.meta.finalized:
			// Its epoch is final already: nothing is left to wait for.
			rec.Status, rec.CommittedAtMs, rec.FinalizedAtMs = ledgerpb.Status_STATUS_FINALIZED, ec.batch.GetSealedAtMs(), ec.batch.GetSealedAtMs()
		default:
			rec.Status, rec.CommittedAtMs = ledgerpb.Status_STATUS_COMMITTED, ec.batch.GetSealedAtMs()
			if err := a.mut.set(storage.UnfinalizedKey(p.GetEpoch(), [32]byte(p.GetId())), nil); err != nil {
				return err
			}
			a.meta.unfinalized++
		}
		if err := a.putRecord(rec); err != nil {
			return err
		}
		a.count(rec)
		seg.ProposalIds = append(seg.ProposalIds, p.GetId())
	}
	if err := a.flushEntryRecords(); err != nil {
		return err
	}
	if len(seg.ProposalIds) == 0 {
		return nil // nothing changed: no segment
	}
	raw, err := marshal(seg)
	if err != nil {
		return err
	}
	if err := a.mut.set(storage.SegmentKey(ec.index, 0), raw); err != nil {
		return err
	}
	a.meta.segmentHash = segmentHash(raw)
	a.meta.garbage += uint64(len(raw))
	return nil
}

// Replaces reports whether p may take the id of prev: prev is REJECTED
// and p is a different proposal (ADR 0028: only a commit spends an id, so
// a proposal refused for a payment that was not its own, or for any other
// reason, leaves the id to the proposal its payer meant). A repeat of the
// rejected proposal's own entries stays a no-op.
func Replaces(prev *ledgerpb.ProposalRecord, p *ledgerpb.Proposal) bool {
	return prev != nil && prev.GetStatus() == ledgerpb.Status_STATUS_REJECTED && !bytes.Equal(prev.GetProposal().GetDigest(), p.GetDigest())
}

func segmentHash(raw []byte) [32]byte { return segarchive.Hash(raw) }

// count adds a decided record to the proposal counts.
func (a *applier) count(rec *ledgerpb.ProposalRecord) {
	c := a.meta.counts
	switch rec.GetStatus() {
	case ledgerpb.Status_STATUS_REJECTED:
		c.Rejected++
		if c.RejectedByReason == nil {
			c.RejectedByReason = map[string]uint64{}
		}
		c.RejectedByReason[rec.GetReason()]++
		return
	case ledgerpb.Status_STATUS_FINALIZED:
		c.Finalized++
	}
	c.Committed++
	// The batch's seal time, not this node's clock: every validator holds
	// the same.
	if at := rec.GetCommittedAtMs(); at > 0 {
		c.LastCommitAtMs = at
	}
	if rec.GetProposal().GetAction() == ledgerpb.Action_ACTION_DELETE {
		c.Deletes++
	} else {
		c.Writes++
	}
}

// finalize makes the committed proposals of every epoch up to f.epoch
// FINALIZED, in key order (epoch, then id), and emits a consensus finalize
// event. An epoch at or below the state's finalized epoch changes nothing:
// finality only moves forward.
func (a *applier) finalize(index uint64, f *ledgerpb.FinalizeEpochs) error {
	if f.GetEpoch() <= a.meta.finalized {
		return nil
	}
	lower, upper := storage.UnfinalizedThrough(f.GetEpoch())
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	var marks [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		marks = append(marks, append([]byte(nil), it.Key()...))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, key := range marks {
		id, ok := storage.UnfinalizedID(key)
		if !ok {
			return fmt.Errorf("%w: unfinalized mark %x", ErrCorruptState, key)
		}
		rec, err := getKnownRecord(a.b, id[:])
		if err != nil {
			return err
		}
		if err := a.mut.delete(key); err != nil {
			return err
		}
		a.meta.unfinalized -= min(1, a.meta.unfinalized)
		if rec == nil || rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED {
			continue // cannot happen: the mark is written with the COMMITTED record
		}
		rec.Status, rec.FinalizedAtMs = ledgerpb.Status_STATUS_FINALIZED, f.GetAtMs()
		if err := a.putRecord(rec); err != nil {
			return err
		}
		a.meta.counts.Finalized++
	}
	a.meta.finalized = f.GetEpoch()
	ev := opEvent(EventTypeConsensus, EventActionFinalize, nil, index, f.GetAtMs())
	ev.Epoch = f.GetEpoch()
	return a.emit(ev)
}

// leaderElected emits a consensus leader event for the first announcement
// of a term above the last one announced. The announced term must be the
// raft term of the entry, the term of the leader that appended it: an
// announcement that reached the log under another leader is stale. Node id
// 0 is no raft member.
func (a *applier) leaderElected(index, entryTerm uint64, op *ledgerpb.LeaderElected) error {
	if op.GetNodeId() == 0 || op.GetTerm() != entryTerm || op.GetTerm() <= a.meta.leaderTerm {
		return nil
	}
	a.meta.leaderTerm = op.GetTerm()
	return a.emit(opEvent(EventTypeConsensus, EventActionLeader, nil, index, op.GetAtMs()))
}

// check returns the rejection reason of an item before anything is written,
// or "" if it may be applied.
func (a *applier) check(item *ledgerpb.BatchItem) string {
	if r := item.GetRejection(); r != "" {
		return r
	}
	p := item.GetProposal()
	minDepth := 0
	switch p.GetAction() {
	case ledgerpb.Action_ACTION_WRITE:
		minDepth = 7 // the wallet root (5), the organization, at least one node segment
	case ledgerpb.Action_ACTION_DELETE:
		minDepth = 6 // an organization's whole subtree may go
	default:
		return ReasonInvalidField
	}
	segs, ok := splitPath(p.GetPath())
	if !ok || len(segs) < minDepth || len(p.GetWallet()) != 20 {
		return ReasonInvalidField
	}
	// /<root>/<xx>/<xx>/<xx>/<0xwallet>/<organization>/...
	w := hex.EncodeToString(p.GetWallet())
	if segs[1] != w[0:2] || segs[2] != w[2:4] || segs[3] != w[4:6] || segs[4] != "0x"+w ||
		segs[5] != p.GetOrganization() || w == strings.Repeat("0", 40) {
		return ReasonPathForbidden
	}
	return ""
}

// splitPath splits a full content path into its segments, refusing anything
// but "/seg/seg..." with segments of [A-Za-z0-9._:-] other than "." and
// "..": the node key encoding relies on it (storage.PathSeparator).
func splitPath(path string) ([]string, bool) {
	if len(path) < 2 || path[0] != '/' {
		return nil, false
	}
	segs := strings.Split(path[1:], "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return nil, false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
				return nil, false
			}
		}
	}
	return segs, true
}

// write applies a WRITE. It returns a rejection reason when the message does
// not expand (intake should have refused it), in which case nothing is
// written, and whether the message created nested child nodes.
func (a *applier) write(ec entryContext, p *ledgerpb.Proposal, seg *ledgerpb.Segment) (reason string, nested bool, err error) {
	specs, err := proposal.Nodes(p.GetPath(), p.GetMessage())
	if err != nil || len(specs) == 0 {
		return ReasonInvalidField, false, nil
	}
	for _, s := range specs {
		if _, ok := splitPath(s.Path); !ok {
			return ReasonInvalidField, false, nil
		}
	}
	if ok, err := a.resolveIntents(specs, p.GetWallet()); err != nil || !ok {
		return ReasonInvalidField, false, err
	}
	newPaths := make(map[string]bool, len(specs))
	for _, s := range specs {
		newPaths[s.Path] = true
	}

	// Replace: the nested children the previous revision created and the
	// new message no longer has go first.
	old, err := getNode(a.b, p.GetPath())
	if err != nil {
		return "", false, err
	}
	var created, removed uint64
	if old != nil {
		stale, err := a.staleChildren(old, newPaths)
		if err != nil {
			return "", false, err
		}
		removed = uint64(len(stale))
		for _, path := range stale {
			if err := a.mut.delete(storage.NodeKey(path)); err != nil {
				return "", false, err
			}
			seg.Ops = append(seg.Ops, &ledgerpb.SegmentOp{Op: &ledgerpb.SegmentOp_DeletePath{DeletePath: path}})
		}
	}

	for i, s := range specs {
		prev := old // specs[0] is the node at the proposal's path, read above
		if i > 0 || s.Path != p.GetPath() {
			if prev, err = getNode(a.b, s.Path); err != nil {
				return "", false, err
			}
		}
		rev := uint64(1)
		if prev != nil {
			rev = prev.GetRevision() + 1
		} else {
			created++
		}
		props := make([]*ledgerpb.Property, len(s.Properties))
		for i, pr := range s.Properties {
			props[i] = &ledgerpb.Property{Name: pr.Name, ValueJson: pr.ValueJSON}
		}
		node := &ledgerpb.Node{
			Path:         s.Path,
			PrimaryType:  s.PrimaryType,
			Properties:   props,
			Wallet:       p.GetWallet(),
			Organization: p.GetOrganization(),
			ContentType:  p.GetContentType(),
			ProposalId:   p.GetId(),
			Revision:     rev,
			CommitIndex:  ec.index,
			UpdatedAtMs:  ec.batch.GetSealedAtMs(),
		}
		if err := a.put(storage.NodeKey(s.Path), node); err != nil {
			return "", false, err
		}
		seg.Ops = append(seg.Ops, &ledgerpb.SegmentOp{Op: &ledgerpb.SegmentOp_Put{Put: node}})
	}

	if err := a.countWallet(p.GetWallet(), true, created, removed, ec.batch.GetSealedAtMs(), p.GetPath()); err != nil {
		return "", false, err
	}
	ev := a.event(ec, p, EventTypeContent, EventActionWrite)
	ev.ContentHash = "0x" + hex.EncodeToString(keccak256(p.GetMessage()))
	if err := a.emit(ev); err != nil {
		return "", false, err
	}
	if cid, ok := cidOf(specs[0].Properties); ok {
		bin := a.event(ec, p, EventTypeBinary, EventActionWrite)
		bin.ContentHash = ev.ContentHash
		bin.CasCid = cid
		if bin.BlobId, err = blobIDOfCID(a.b, cid); err != nil {
			return "", false, err
		}
		if err := a.emit(bin); err != nil {
			return "", false, err
		}
	}
	return "", len(specs) > 1, nil
}

// staleChildren lists, parents first, the descendants of old that old's
// proposal created from nested objects, that still carry that proposal's id
// (nobody rewrote them since) and that the new message does not write.
//
// They are found by expanding the old proposal's message again (its record
// holds it), so the cost is the size of that message, not of the subtree
// below the node.
func (a *applier) staleChildren(old *ledgerpb.Node, newPaths map[string]bool) ([]string, error) {
	// Most nodes have no descendants at all. A seek beside the node just
	// read says so for less than the old record costs: a separated value,
	// rarely in the block cache once the state outgrows it.
	if has, err := hasDescendants(a.b, old.GetPath()); err != nil || !has {
		return nil, err
	}
	rec, err := getKnownRecord(a.b, old.GetProposalId())
	if err != nil || rec == nil || rec.GetProposal().GetAction() != ledgerpb.Action_ACTION_WRITE {
		return nil, err
	}
	oldSpecs, err := proposal.Nodes(rec.GetProposal().GetPath(), rec.GetProposal().GetMessage())
	if err != nil {
		return nil, nil // it expanded when it was applied; a changed expander keeps the children
	}
	prefix := old.GetPath() + "/"
	var stale []string
	for _, s := range oldSpecs {
		if !strings.HasPrefix(s.Path, prefix) || newPaths[s.Path] {
			continue
		}
		cur, err := getNode(a.b, s.Path)
		if err != nil {
			return nil, err
		}
		if cur != nil && bytes.Equal(cur.GetProposalId(), old.GetProposalId()) {
			stale = append(stale, s.Path)
		}
	}
	return stale, nil
}

// hasDescendants reports whether any node exists below path.
func hasDescendants(r pebble.Reader, path string) (bool, error) {
	lower, upper := storage.ChildrenBounds(path)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return false, err
	}
	found := it.First()
	return found, errors.Join(it.Error(), it.Close())
}

// delete applies a DELETE: the node at the path and its whole subtree, in
// key order (parents before children).
func (a *applier) delete(ec entryContext, p *ledgerpb.Proposal, seg *ledgerpb.Segment) error {
	lower, upper := storage.SubtreeBounds(p.GetPath())
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	var keys [][]byte
	var deleted uint64 // bytes of the removed nodes, keys and values
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
		lv := it.LazyValue() // its length, without reading a separated value
		deleted += uint64(len(it.Key()) + lv.Len())
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := a.mut.delete(k); err != nil {
			return err
		}
		path, _ := storage.NodePath(k)
		seg.Ops = append(seg.Ops, &ledgerpb.SegmentOp{Op: &ledgerpb.SegmentOp_DeletePath{DeletePath: path}})
	}
	if err := a.accrue(p.GetWallet(), deleted); err != nil {
		return err
	}
	if err := a.countWallet(p.GetWallet(), false, 0, uint64(len(keys)), 0, ""); err != nil {
		return err
	}
	return a.emit(a.event(ec, p, EventTypeDelete, EventActionDel))
}

func (a *applier) event(ec entryContext, p *ledgerpb.Proposal, typ, action string) *ledgerpb.Event {
	return &ledgerpb.Event{
		Type:         typ,
		Action:       action,
		Path:         p.GetPath(),
		Wallet:       "0x" + hex.EncodeToString(p.GetWallet()),
		Timestamp:    ec.batch.GetSealedAtMs(),
		Organization: p.GetOrganization(),
		ProposalId:   "0x" + hex.EncodeToString(p.GetId()),
		CommitIndex:  ec.index,
	}
}

// opEvent is an event of an entry that carries no proposal (GC and
// consensus ops): dated by the op's at_ms, which is 0 in an op of a version
// that did not date it. wallet may be nil.
func opEvent(typ, action string, wallet []byte, index uint64, atMs int64) *ledgerpb.Event {
	ev := &ledgerpb.Event{Type: typ, Action: action, Timestamp: atMs, CommitIndex: index}
	if len(wallet) > 0 {
		ev.Wallet = "0x" + hex.EncodeToString(wallet)
	}
	return ev
}

// emit assigns the next event id and stores the event.
func (a *applier) emit(ev *ledgerpb.Event) error {
	a.meta.lastEvent++
	ev.Id = a.meta.lastEvent
	return a.put(storage.EventKey(ev.Id), ev)
}

func (a *applier) put(key []byte, msg proto.Message) error {
	v, err := marshal(msg)
	if err != nil {
		return err
	}
	return a.mut.set(key, v)
}

// putRecord stores a proposal record and remembers it for the observer.
func (a *applier) putRecord(rec *ledgerpb.ProposalRecord) error {
	if err := a.put(storage.ProposalKey([32]byte(rec.GetProposal().GetId())), rec); err != nil {
		return err
	}
	a.records = append(a.records, rec)
	return nil
}

func cidOf(props []proposal.Property) (string, bool) {
	for _, pr := range props {
		if pr.Name == proposal.CIDProperty {
			var cid string
			if json.Unmarshal([]byte(pr.ValueJSON), &cid) == nil && cid != "" {
				return cid, true
			}
		}
	}
	return "", false
}

func keccak256(b []byte) []byte {
	h := keccak.NewLegacyKeccak256()
	h.Write(b)
	return h.Sum(nil)
}

func getNode(r pebble.Reader, path string) (*ledgerpb.Node, error) {
	return getMessage[*ledgerpb.Node](r, storage.NodeKey(path), "node "+path)
}

func getRecord(r pebble.Reader, id []byte) (*ledgerpb.ProposalRecord, error) {
	if len(id) != 32 {
		return nil, nil
	}
	return getMessage[*ledgerpb.ProposalRecord](r, storage.ProposalKey([32]byte(id)), fmt.Sprintf("proposal %x", id))
}

// getKnownRecord is getRecord for an id something stored names (an
// unfinalized mark, a node), whose record is therefore present:
// storage.GetRecent stops at the newest level that holds it.
func getKnownRecord(r pebble.Reader, id []byte) (*ledgerpb.ProposalRecord, error) {
	if len(id) != 32 {
		return nil, nil
	}
	return getRecentMessage[*ledgerpb.ProposalRecord](r, storage.ProposalKey([32]byte(id)), fmt.Sprintf("proposal %x", id))
}

// getMessage reads the message stored at key into a new M, nil when there
// is none; what names it in a corruption error.
func getMessage[M proto.Message](r pebble.Reader, key []byte, what string) (M, error) {
	v, err := storage.Get(r, key)
	return decodeMessage[M](v, err, what)
}

// getRecentMessage is getMessage for a key usually present and written
// often (storage.GetRecent).
func getRecentMessage[M proto.Message](r pebble.Reader, key []byte, what string) (M, error) {
	v, err := storage.GetRecent(r, key)
	return decodeMessage[M](v, err, what)
}

// decodeMessage decodes the value v a read returned with err into a new
// M, nil when the read found none.
func decodeMessage[M proto.Message](v []byte, err error, what string) (M, error) {
	var none M
	if errors.Is(err, storage.ErrNotFound) {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	m := none.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(v, m); err != nil {
		return none, fmt.Errorf("%w: %s: %v", ErrCorruptState, what, err)
	}
	return m, nil
}

// applyMembership keeps the cluster's address book and the ids of removed
// members: a member added with a ledgerpb.Member naming it as the change's
// context is recorded, a removed member is dropped from the book and its id
// marked removed for good. Consensus installs the membership itself, and
// refuses to install the addition of a removed id (it hands such a change
// over without its changes); this is only where to reach members and which
// ids may never come back. A context that does not decode, names another
// member or names a removed id records nothing, alike everywhere.
func (a *applier) applyMembership(mc *MembershipChange) error {
	for _, c := range mc.Changes {
		switch c.Type {
		case AddVoter, AddLearner:
			var m ledgerpb.Member
			if len(mc.Context) == 0 || proto.Unmarshal(mc.Context, &m) != nil || m.GetId() != c.NodeID {
				continue
			}
			removed, err := a.wasRemoved(c.NodeID)
			if err != nil {
				return err
			}
			if removed {
				continue
			}
			value, err := proto.MarshalOptions{Deterministic: true}.Marshal(&m)
			if err != nil {
				return err
			}
			if err := a.mut.set(storage.MemberKey(c.NodeID), value); err != nil {
				return err
			}
		case RemoveMember:
			if err := a.mut.delete(storage.MemberKey(c.NodeID)); err != nil {
				return err
			}
			removed, err := a.wasRemoved(c.NodeID)
			if err != nil {
				return err
			}
			if !removed {
				if err := a.mut.set(storage.RemovedMemberKey(c.NodeID), nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// wasRemoved reports whether id was a member that a committed change
// removed, as of the entries applied before this one.
func (a *applier) wasRemoved(id uint64) (bool, error) { return removedMember(a.b, id) }

// removedMember reports whether r records id as a removed member.
func removedMember(r pebble.Reader, id uint64) (bool, error) {
	_, err := storage.Get(r, storage.RemovedMemberKey(id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, storage.ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}
