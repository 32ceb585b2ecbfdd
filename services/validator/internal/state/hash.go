package state

// Hashes
//
// Two hashes let validators and offline tools check each other.
//
// Segment hash (the provenance chain). A segment is stored as the bytes of
// proto.MarshalOptions{Deterministic: true}.Marshal(segment), and
//
//	segmentHash = SHA-256(stored segment bytes)
//
// Each segment's prev_hash is the segment hash of the segment before it (32
// zero bytes for the first), so the chain is verified by hashing the stored
// values in index order.
//
// State hash (the rolling hash every applied index advances, empty entries
// and conf changes included):
//
//	stateHash_0 = 32 zero bytes
//	stateHash_i = SHA-256("contentledger/state/v10" ‖ stateHash_{i-1} ‖ BE64(index_i) ‖ BE64(term_i) ‖ changeDigest_i)
//
// changeDigest_i is SHA-256 over the mutations applying entry i made to
// replicated state, in the order apply made them, each encoded as
//
//	set:    'S' ‖ BE32(len(key)) ‖ key ‖ BE32(len(value)) ‖ value
//	delete: 'D' ‖ BE32(len(key)) ‖ key
//	range:  'R' ‖ BE32(len(lower)) ‖ lower ‖ BE32(len(upper)) ‖ upper  (every key in [lower, upper) deleted)
//
// or 32 zero bytes when entry i changed nothing. (v9: segment keys carry a
// part, a GcCompact writes segments, deletes old generations with a range
// deletion and records a run, compact.go. v10: upload intents and blob
// mappings, blob.go, and client bindings, clients.go: new ops and keys; the
// entries of v9 hash as before but for this domain.) The mutations cover nodes,
// proposal records, events (written, and deleted by retention, retention.go)
// and the segment (whose own bytes chain the segment hashes); the metadata keys (applied index, state hash, segment
// hash, event sequence) are excluded because they are derived from it. So
// two validators with equal state hashes at an index made byte-identical
// writes for every entry up to it, not merely the same content changes.
//
// The digest depends on the storage encoding: a change to the key layout or
// to the stored messages is a change of the state hash version (bump the
// domain string with it).

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"github.com/cockroachdb/pebble/v2"
)

const stateHashDomain = "contentledger/state/v10"

// nextStateHash computes stateHash_i from stateHash_{i-1}.
func nextStateHash(prev [32]byte, index, term uint64, digest [32]byte) [32]byte {
	var buf [len(stateHashDomain) + 32 + 8 + 8 + 32]byte
	n := copy(buf[:], stateHashDomain)
	n += copy(buf[n:], prev[:])
	binary.BigEndian.PutUint64(buf[n:], index)
	binary.BigEndian.PutUint64(buf[n+8:], term)
	copy(buf[n+16:], digest[:])
	return sha256.Sum256(buf[:])
}

// mutations writes state changes to a Pebble batch and folds each into the
// change digest of the entry being applied.
type mutations struct {
	b     *pebble.Batch
	h     hash.Hash
	count int
	hdr   [5]byte
}

func newMutations(b *pebble.Batch) *mutations {
	return &mutations{b: b, h: sha256.New()}
}

func (m *mutations) set(key, value []byte) error {
	m.digestPair('S', key, value)
	return m.b.Set(key, value, nil)
}

// digestPair adds an operation on two byte strings to the digest: op, then
// each with its length.
func (m *mutations) digestPair(op byte, a, b []byte) {
	m.hdr[0] = op
	binary.BigEndian.PutUint32(m.hdr[1:], uint32(len(a)))
	m.h.Write(m.hdr[:])
	m.h.Write(a)
	binary.BigEndian.PutUint32(m.hdr[1:], uint32(len(b)))
	m.h.Write(m.hdr[1:])
	m.h.Write(b)
	m.count++
}

func (m *mutations) delete(key []byte) error {
	m.hdr[0] = 'D'
	binary.BigEndian.PutUint32(m.hdr[1:], uint32(len(key)))
	m.h.Write(m.hdr[:])
	m.h.Write(key)
	m.count++
	return m.b.Delete(key, nil)
}

// deleteRange deletes every key in [lower, upper): one tombstone however
// many keys, which is how cleanup drops whole generations (compact.go).
func (m *mutations) deleteRange(lower, upper []byte) error {
	m.digestPair('R', lower, upper)
	return m.b.DeleteRange(lower, upper, nil)
}

// digest returns the change digest of the current entry and starts the next.
func (m *mutations) digest() [32]byte {
	var d [32]byte
	if m.count > 0 {
		m.h.Sum(d[:0])
	}
	m.h.Reset()
	m.count = 0
	return d
}
