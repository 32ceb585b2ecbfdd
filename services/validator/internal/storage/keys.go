package storage

import (
	"encoding/binary"
	"strings"
)

// Key layout
//
// Every key the validator writes lives in this one file, so that the layout
// can be read (and changed) in one place. Keys start with a short ASCII
// prefix naming the concern; integers are encoded big-endian with a fixed
// width, so Pebble's bytewise order is numeric order.
//
// Two top-level namespaces keep raft's own data apart from the replicated
// state, so that a future state snapshot is "every key under StatePrefix at
// the applied index" and the raft log can be truncated without touching it:
//
//	r/  raft (owned by internal/consensus; not replicated as state)
//	    r/e/<index:8>           raft log entry: 8-byte term, then the marshaled raftpb.Entry
//	    r/hs                    raftpb.HardState
//	    r/cs                    conf state record (index of the last conf change + raftpb.ConfState)
//	    r/sn                    raftpb.Snapshot metadata of the newest snapshot; its data is a
//	                            file in DB.SnapshotDir (internal/consensus, snapshot.go)
//	    r/tr                    log truncation point: index and term of the last discarded entry
//
//	s/  replicated state (owned by internal/state; identical on every validator)
//	    s/n/<path>              ledgerpb.Node; '/' in the path is encoded as 0x00 (see NodeKey)
//	    s/p/<id:32>             ledgerpb.ProposalRecord by proposal id
//	    s/v/<id:8>              ledgerpb.Event by sequence number
//	    s/g/<index:8><part:4>   ledgerpb.Segment by raft index and part (a GcCompact writes parts 0, 1, ...;
//	                            every other entry part 0): key order is chain order
//	    s/c/<id:8>              ledgerpb.Member by raft id: the cluster's address book
//	    s/x/<id:8>              empty: the raft id was a member and was removed; never a member again
//	    s/u/<id:32>             empty: the proposal is accepted and undecided (its record is PENDING)
//	    s/q/<epoch:8><id:32>    empty: the proposal is COMMITTED and its epoch not final yet
//	    s/a/<wallet:20>         ledgerpb.GcAccount: a wallet's GC debt account
//	    s/w/<wallet:20>         ledgerpb.WalletStats: a wallet's content figures
//	    s/t/<tx:32><log:4>      empty: the DebtPaid log (transaction, log index) already paid a debt
//	    s/k/<run:8>             ledgerpb.GcRun: a compaction run (GcCompact and its steps), runs 1, 2, ...
//	    s/i/<token:32>          ledgerpb.BlobIntent: a binary upload intent (docs/adr/0037)
//	    s/e/<due:8><token:32>   empty: the intent's next due time, unix ms: expiry while READY_FOR_UPLOAD,
//	                            deletion once COMPLETED or EXPIRED (the leader reads the front)
//	    s/o/<wallet:20><token:32> empty: the intent is open (READY_FOR_UPLOAD): a wallet's are counted
//	    s/b/<sha256:32>         ledgerpb.BlobMapping: a blob id's CID, size and MIME type
//	    s/h/<cid>               32-byte blob id: a CID (binary form) a completed intent checked
//	    s/m/blobs               mappings and their total size (two 8-byte counts)
//	    s/r/c/<client id>       ledgerpb.ClientBinding: the wallet a client id is bound to (docs/adr/0038)
//	    s/r/w/<wallet:20><client id>  empty: the wallet's clients, counted against the cap per wallet
//	    s/m/finalized           newest epoch final on chain, as the last FinalizeEpochs entry said (8 bytes)
//	    s/m/gcepoch             epoch of the last per-epoch GC debt job (8 bytes)
//	    s/m/unfinal             number of unfinalized marks (8 bytes)
//	    s/m/counts              ledgerpb.ProposalCounts: decided proposals by outcome
//	    s/m/applied             applied raft index (8 bytes)
//	    s/m/hash                rolling state hash (32 bytes)
//	    s/m/seghash             hash of the newest segment (32 bytes)
//	    s/m/gcdelta             stored bytes of the segments written since the last compaction (8 bytes)
//	    s/m/event               last assigned event id (8 bytes)
//
//	l/  local to this validator (not replicated, not in the state hash or snapshots:
//	    both read StatePrefix only)
//	    l/pi                    the payment index's checkpoint (internal/payments, checkpoint.go)
//	    l/format                the store format of the whole directory (8 bytes; format.go)
//	    l/url                   the public URL this validator advertises, set by the operator
//	                            (POST /v1/ngrok-url, docs/adr/0038)
const (
	// RaftPrefix is the namespace of the raft log and raft metadata.
	RaftPrefix = "r/"
	// StatePrefix is the namespace of the replicated state machine.
	StatePrefix = "s/"
	// LocalPrefix is the namespace of what one validator keeps for itself.
	LocalPrefix = "l/"

	raftEntryPrefix  = RaftPrefix + "e/"
	nodePrefix       = StatePrefix + "n/"
	proposalPrefix   = StatePrefix + "p/"
	eventPrefix      = StatePrefix + "v/"
	segmentPrefix    = StatePrefix + "g/"
	memberPrefix     = StatePrefix + "c/"
	removedPrefix    = StatePrefix + "x/"
	undecidedPrefix  = StatePrefix + "u/"
	unfinalPrefix    = StatePrefix + "q/"
	accountPrefix    = StatePrefix + "a/"
	walletPrefix     = StatePrefix + "w/"
	debtTxPrefix     = StatePrefix + "t/"
	gcRunPrefix      = StatePrefix + "k/"
	intentPrefix     = StatePrefix + "i/"
	intentDuePrefix  = StatePrefix + "e/"
	openIntentPrefix = StatePrefix + "o/"
	blobPrefix       = StatePrefix + "b/"
	blobCIDPrefix    = StatePrefix + "h/"
	clientPrefix     = StatePrefix + "r/c/"
	walletClientPfx  = StatePrefix + "r/w/"
)

// KeySpace is a named part of the key layout: the storage view reports
// the disk each takes (DB.KeySpaceUsage).
type KeySpace struct {
	Name         string
	Lower, Upper []byte // [Lower, Upper)
}

// KeySpaces are the key spaces the storage view reports, in key order: the
// local namespace, the raft log and the parts of the replicated state that
// grow with the content (DB.KeySpaceUsage adds the rest of the state).
func KeySpaces() []KeySpace {
	space := func(name, prefix string) KeySpace {
		return KeySpace{Name: name, Lower: []byte(prefix), Upper: PrefixEnd([]byte(prefix))}
	}
	return []KeySpace{
		space("local", LocalPrefix),
		space("raftLog", raftEntryPrefix),
		space("segments", segmentPrefix),
		space("nodes", nodePrefix),
		space("records", proposalPrefix),
		space("events", eventPrefix),
	}
}

// Fixed keys (constants, so no caller can modify a shared key slice;
// convert with []byte(...)).
const (
	// RaftHardStateKey holds the raftpb.HardState.
	RaftHardStateKey = RaftPrefix + "hs"
	// RaftConfStateKey holds the conf state and the index it was applied at.
	RaftConfStateKey = RaftPrefix + "cs"
	// RaftSnapshotKey holds the metadata of the newest raft snapshot (its
	// data is a file in DB.SnapshotDir).
	RaftSnapshotKey = RaftPrefix + "sn"
	// RaftTruncatedKey holds the index and term of the last discarded log entry.
	RaftTruncatedKey = RaftPrefix + "tr"

	// AppliedIndexKey holds the last applied raft index, big-endian uint64.
	AppliedIndexKey = StatePrefix + "m/applied"
	// StateHashKey holds the rolling state hash.
	StateHashKey = StatePrefix + "m/hash"
	// SegmentHashKey holds the hash of the newest segment.
	SegmentHashKey = StatePrefix + "m/seghash"
	// GarbageBytesKey holds the stored bytes of the segments written since
	// the last compaction, big-endian uint64.
	GarbageBytesKey = StatePrefix + "m/gcdelta"
	// EventSeqKey holds the last assigned event id, big-endian uint64.
	EventSeqKey = StatePrefix + "m/event"
	// FinalizedEpochKey holds the newest final epoch, big-endian uint64.
	FinalizedEpochKey = StatePrefix + "m/finalized"
	// GcEpochKey holds the epoch of the last per-epoch GC debt job.
	GcEpochKey = StatePrefix + "m/gcepoch"
	// LeaderTermKey holds the newest term a leader announced itself in
	// (LeaderElected), big-endian uint64.
	LeaderTermKey = StatePrefix + "m/leader"
	// UnfinalizedCountKey holds the number of unfinalized marks.
	UnfinalizedCountKey = StatePrefix + "m/unfinal"
	// ProposalCountsKey holds the ledgerpb.ProposalCounts.
	ProposalCountsKey = StatePrefix + "m/counts"
	// BlobTotalsKey holds the number of blob mappings and their total
	// size, two big-endian uint64s.
	BlobTotalsKey = StatePrefix + "m/blobs"

	// PaymentCheckpointKey holds the payment index's checkpoint.
	PaymentCheckpointKey = LocalPrefix + "pi"
	// StoreFormatKey holds the store format (StoreFormat), big-endian uint64.
	StoreFormatKey = LocalPrefix + "format"
	// PublicURLKey holds the public URL the operator set for this
	// validator, as text.
	PublicURLKey = LocalPrefix + "url"
)

// PathSeparator is the byte that stands for '/' inside node keys. It is the
// smallest byte, so a node's descendants sort directly after the node and
// before any sibling whose name extends the node's name ("a", "a/x", "a-b"
// rather than "a", "a-b", "a/x"); a subtree is then one contiguous key range.
// Path segments never contain it ([A-Za-z0-9._:-]+).
const PathSeparator = 0x00

func withUint64(prefix string, v uint64) []byte {
	k := make([]byte, len(prefix)+8)
	copy(k, prefix)
	binary.BigEndian.PutUint64(k[len(prefix):], v)
	return k
}

// RaftEntryKey is the key of the raft log entry at index.
func RaftEntryKey(index uint64) []byte { return withUint64(raftEntryPrefix, index) }

// RaftEntryIndex returns the index encoded in a raft entry key.
func RaftEntryIndex(key []byte) (uint64, bool) {
	if len(key) != len(raftEntryPrefix)+8 || string(key[:len(raftEntryPrefix)]) != raftEntryPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(raftEntryPrefix):]), true
}

// RaftEntryBounds returns the key range [lower, upper) of the raft log
// entries with lo <= index < hi.
func RaftEntryBounds(lo, hi uint64) (lower, upper []byte) {
	return RaftEntryKey(lo), RaftEntryKey(hi)
}

// RaftEntryPrefixBounds returns the key range of the whole raft log.
func RaftEntryPrefixBounds() (lower, upper []byte) {
	return []byte(raftEntryPrefix), PrefixEnd([]byte(raftEntryPrefix))
}

// encodePath maps a path to its key form: '/' becomes PathSeparator.
func encodePath(dst []byte, path string) []byte {
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '/' {
			c = PathSeparator
		}
		dst = append(dst, c)
	}
	return dst
}

// NodeKey is the key of the content node at path (a full path starting
// with '/', without a trailing slash).
func NodeKey(path string) []byte {
	k := make([]byte, 0, len(nodePrefix)+len(path))
	k = append(k, nodePrefix...)
	return encodePath(k, path)
}

// NodePath returns the path encoded in a node key.
func NodePath(key []byte) (string, bool) {
	if len(key) < len(nodePrefix) || string(key[:len(nodePrefix)]) != nodePrefix {
		return "", false
	}
	rest := key[len(nodePrefix):]
	var b strings.Builder
	b.Grow(len(rest))
	for _, c := range rest {
		if c == PathSeparator {
			c = '/'
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// SubtreeBounds returns the key range [lower, upper) holding the node at
// path and all its descendants, and no other node.
func SubtreeBounds(path string) (lower, upper []byte) {
	lower = NodeKey(path)
	upper = append(append([]byte(nil), lower...), PathSeparator+1)
	return lower, upper
}

// ChildrenBounds returns the key range [lower, upper) of the strict
// descendants of path. The root is "/" (or ""). lower is also the prefix
// every descendant key starts with.
func ChildrenBounds(path string) (lower, upper []byte) {
	path = strings.TrimSuffix(path, "/")
	lower = append(NodeKey(path), PathSeparator)
	upper = append(NodeKey(path), PathSeparator+1)
	return lower, upper
}

// ProposalKey is the key of the record of a proposal id.
func ProposalKey(id [32]byte) []byte {
	k := make([]byte, 0, len(proposalPrefix)+32)
	k = append(k, proposalPrefix...)
	return append(k, id[:]...)
}

// EventKey is the key of the event with sequence number id.
func EventKey(id uint64) []byte { return withUint64(eventPrefix, id) }

// EventBounds returns the key range of all events.
func EventBounds() (lower, upper []byte) {
	return []byte(eventPrefix), PrefixEnd([]byte(eventPrefix))
}

// SegmentKey is the key of part of the segments of raft index.
func SegmentKey(index uint64, part uint32) []byte {
	return binary.BigEndian.AppendUint32(withUint64(segmentPrefix, index), part)
}

// SegmentKeyIndex returns the raft index and part a segment key encodes.
func SegmentKeyIndex(key []byte) (index uint64, part uint32, ok bool) {
	if len(key) != len(segmentPrefix)+8+4 || string(key[:len(segmentPrefix)]) != segmentPrefix {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(key[len(segmentPrefix):]), binary.BigEndian.Uint32(key[len(segmentPrefix)+8:]), true
}

// SegmentBounds returns the key range of all segments.
func SegmentBounds() (lower, upper []byte) {
	return []byte(segmentPrefix), PrefixEnd([]byte(segmentPrefix))
}

// GcRunKey is the key of the record of compaction run.
func GcRunKey(run uint64) []byte { return withUint64(gcRunPrefix, run) }

// GcRunBounds returns the key range of every compaction run's record.
func GcRunBounds() (lower, upper []byte) {
	return []byte(gcRunPrefix), PrefixEnd([]byte(gcRunPrefix))
}

// UndecidedKey marks an accepted proposal that has no decision yet.
func UndecidedKey(id [32]byte) []byte { return append([]byte(undecidedPrefix), id[:]...) }

// UndecidedBounds are the bounds of every undecided mark.
func UndecidedBounds() (lower, upper []byte) {
	return []byte(undecidedPrefix), PrefixEnd([]byte(undecidedPrefix))
}

// UndecidedID returns the proposal id of an undecided mark's key.
func UndecidedID(key []byte) ([32]byte, bool) {
	var id [32]byte
	if len(key) != len(undecidedPrefix)+32 || string(key[:len(undecidedPrefix)]) != undecidedPrefix {
		return id, false
	}
	copy(id[:], key[len(undecidedPrefix):])
	return id, true
}

// MemberKey is the key of a cluster member's address book entry.
func MemberKey(id uint64) []byte { return withUint64(memberPrefix, id) }

// MemberBounds are the bounds of every member entry.
func MemberBounds() (lower, upper []byte) {
	return []byte(memberPrefix), PrefixEnd([]byte(memberPrefix))
}

// RemovedMemberKey is the key of the mark of a removed member's raft id.
func RemovedMemberKey(id uint64) []byte { return withUint64(removedPrefix, id) }

// RemovedMemberBounds are the bounds of every removed member's mark.
func RemovedMemberBounds() (lower, upper []byte) {
	return []byte(removedPrefix), PrefixEnd([]byte(removedPrefix))
}

// RemovedMemberID returns the raft id of a removed member's mark.
func RemovedMemberID(key []byte) (uint64, bool) {
	if len(key) != len(removedPrefix)+8 || string(key[:len(removedPrefix)]) != removedPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(removedPrefix):]), true
}

// PrefixEnd returns the smallest key greater than every key with prefix p,
// or nil (no upper bound) if p is all 0xff.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// PutUint64 encodes v as 8 big-endian bytes.
func PutUint64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// Uint64 decodes 8 big-endian bytes.
func Uint64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// UnfinalizedKey marks a committed proposal of epoch that is not final yet.
// Keys sort by epoch, so the proposals of the epochs up to E are one range.
func UnfinalizedKey(epoch uint64, id [32]byte) []byte {
	return append(withUint64(unfinalPrefix, epoch), id[:]...)
}

// UnfinalizedThrough returns the key range of the marks of every epoch up to
// and including epoch.
func UnfinalizedThrough(epoch uint64) (lower, upper []byte) {
	if epoch == ^uint64(0) {
		return []byte(unfinalPrefix), PrefixEnd([]byte(unfinalPrefix))
	}
	return []byte(unfinalPrefix), withUint64(unfinalPrefix, epoch+1)
}

// UnfinalizedID returns the proposal id of an unfinalized mark's key.
func UnfinalizedID(key []byte) ([32]byte, bool) {
	var id [32]byte
	if len(key) != len(unfinalPrefix)+8+32 || string(key[:len(unfinalPrefix)]) != unfinalPrefix {
		return id, false
	}
	copy(id[:], key[len(unfinalPrefix)+8:])
	return id, true
}

// AccountKey is the key of a wallet's GC debt account.
func AccountKey(wallet [20]byte) []byte { return append([]byte(accountPrefix), wallet[:]...) }

// AccountBounds returns the key range of every GC debt account.
func AccountBounds() (lower, upper []byte) {
	return []byte(accountPrefix), PrefixEnd([]byte(accountPrefix))
}

// DebtTxKey marks a DebtPaid log, its transaction and log index, as spent.
// The log index is part of the key because one transaction may carry
// several DebtPaid logs (a contract calling payDebt more than once), and each
// pays once.
func DebtTxKey(tx [32]byte, logIndex uint32) []byte {
	k := make([]byte, 0, len(debtTxPrefix)+32+4)
	k = append(k, debtTxPrefix...)
	k = append(k, tx[:]...)
	return binary.BigEndian.AppendUint32(k, logIndex)
}

// DebtTxBounds returns the key range of the spent DebtPaid logs of
// transaction tx.
func DebtTxBounds(tx [32]byte) (lower, upper []byte) {
	lower = append([]byte(debtTxPrefix), tx[:]...)
	return lower, PrefixEnd(lower)
}

// WalletStatsKey is the key of a wallet's content figures.
func WalletStatsKey(wallet [20]byte) []byte { return append([]byte(walletPrefix), wallet[:]...) }

// IntentKey is the key of the upload intent with token.
func IntentKey(token [32]byte) []byte { return append([]byte(intentPrefix), token[:]...) }

// IntentDueKey is the key that schedules the intent with token at due
// (unix milliseconds).
func IntentDueKey(due uint64, token [32]byte) []byte {
	return append(withUint64(intentDuePrefix, due), token[:]...)
}

// IntentDueBounds returns the key range of every intent due at or before
// due.
func IntentDueBounds(due uint64) (lower, upper []byte) {
	return []byte(intentDuePrefix), withUint64(intentDuePrefix, due+1)
}

// ParseIntentDueKey returns the due time and token an IntentDueKey encodes.
func ParseIntentDueKey(key []byte) (due uint64, token [32]byte, ok bool) {
	if len(key) != len(intentDuePrefix)+8+32 || string(key[:len(intentDuePrefix)]) != intentDuePrefix {
		return 0, token, false
	}
	return binary.BigEndian.Uint64(key[len(intentDuePrefix):]), [32]byte(key[len(intentDuePrefix)+8:]), true
}

// OpenIntentKey is the key that marks the intent with token as open for
// wallet.
func OpenIntentKey(wallet [20]byte, token [32]byte) []byte {
	k := make([]byte, 0, len(openIntentPrefix)+20+32)
	k = append(append(append(k, openIntentPrefix...), wallet[:]...), token[:]...)
	return k
}

// OpenIntentBounds returns the key range of wallet's open intents.
func OpenIntentBounds(wallet [20]byte) (lower, upper []byte) {
	lower = append([]byte(openIntentPrefix), wallet[:]...)
	return lower, PrefixEnd(lower)
}

// BlobKey is the key of the mapping of blob id (a SHA-256).
func BlobKey(id [32]byte) []byte { return append([]byte(blobPrefix), id[:]...) }

// BlobCIDKey is the key that names the blob a CID (binary form) holds.
func BlobCIDKey(cid []byte) []byte { return append([]byte(blobCIDPrefix), cid...) }

// ClientKey is the key of a client id's binding.
func ClientKey(clientID string) []byte { return append([]byte(clientPrefix), clientID...) }

// WalletClientKey marks clientID as one of wallet's clients.
func WalletClientKey(wallet [20]byte, clientID string) []byte {
	k := make([]byte, 0, len(walletClientPfx)+20+len(clientID))
	k = append(append(k, walletClientPfx...), wallet[:]...)
	return append(k, clientID...)
}

// WalletClientBounds returns the key range of wallet's client marks.
func WalletClientBounds(wallet [20]byte) (lower, upper []byte) {
	lower = append([]byte(walletClientPfx), wallet[:]...)
	return lower, PrefixEnd(lower)
}
