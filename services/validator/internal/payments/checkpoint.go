package payments

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// The checkpoint (ADR 0031)
//
// A validator keeps, locally, the last stream sequence its index holds and
// the index's content at that point: the payments not pruned, the
// retractions still needed, the debt payments not spent. At start the
// Follower restores it and reads the stream from the next sequence, instead
// of from the first message. The content is taken under the index's lock
// after the message of the sequence was observed, so it holds at least what
// the messages up to the sequence say; the messages after it are read
// again, which Observe makes harmless.
//
// Wire form: magic, version, the sequence, the stream's creation time
// (unix ns; a recreated stream has another), the number of records, then
// each record: its kind, when this validator observed it (unix ms), and
// its ledgerpb wire form, length-prefixed; a CRC-32C of all that ends it.
// It is read back at start from local storage, so it is outside input: the
// decoder checks every length and the checksum, and a checkpoint that does
// not decode means a full replay, never a partial index.

// CheckpointStore keeps the checkpoint durably; storage.LocalValue
// satisfies it. Load returns nil, nil when there is none. Save replaces it
// atomically.
type CheckpointStore interface {
	Load() ([]byte, error)
	Save(data []byte) error
}

// ErrMalformedCheckpoint is the error of a checkpoint that does not decode.
var ErrMalformedCheckpoint = errors.New("malformed payment index checkpoint")

const (
	checkpointMagic   = "CLPI"
	checkpointVersion = 1

	recordPayment    byte = 1 // a current payment; at is when it was observed
	recordRetraction byte = 2 // the last retraction of an id; at is when
	recordDebt       byte = 3 // a debt payment; at is unused

	// minRecordBytes is the smallest encoded record: kind, at, length. It
	// bounds the record count a checkpoint of n bytes may claim.
	minRecordBytes = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint is the index's content at stream sequence seq, in the
// index's sweep order (chain order), so that a restored index prunes in
// the same order.
type checkpoint struct {
	seq           uint64
	streamCreated int64 // unix ns
	records       []record
}

// record is one entry of the index: a current payment, a retraction (kept
// before its id's payment, as Observe needs them), or a debt payment; at
// is when this validator observed the payment or the retraction, unix ms.
type record struct {
	kind byte
	at   int64
	pay  payment.ProposalPaid
	debt payment.DebtPaid
}

// count returns the records of kind.
func (cp checkpoint) count(kind byte) int {
	n := 0
	for _, r := range cp.records {
		if r.kind == kind {
			n++
		}
	}
	return n
}

// snapshot returns the index's content, or ok false before it holds any
// message (a checkpoint then would replace a good one with nothing).
func (ix *Index) snapshot() (cp checkpoint, ok bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.consumed == 0 {
		return checkpoint{}, false
	}
	cp = checkpoint{seq: ix.consumed, streamCreated: ix.streamCreated,
		records: make([]record, 0, len(ix.byID)+len(ix.retracted)+ix.ndebts)}
	// The sweep may name a key twice (pruned, then observed again before
	// it was compacted): the first stands for both.
	seen := make(map[pruneKey]struct{}, len(ix.sweep))
	for _, k := range ix.sweep {
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		if k.debt {
			if d, held := ix.debts[k.id][k.log]; held {
				cp.records = append(cp.records, record{kind: recordDebt, debt: d})
			}
			continue
		}
		if x, held := ix.retracted[k.id]; held {
			cp.records = append(cp.records, record{kind: recordRetraction, at: ix.retractedAt[k.id], pay: x})
		}
		if p, held := ix.byID[k.id]; held {
			cp.records = append(cp.records, record{kind: recordPayment, at: ix.observedAt[k.id], pay: p})
		}
	}
	return cp, true
}

// restore replaces the index's content with cp's. It runs before the
// Follower reads any message.
func (ix *Index) restore(cp checkpoint) {
	fresh := NewIndex()
	fresh.now = ix.now
	for _, r := range cp.records {
		switch r.kind {
		case recordRetraction:
			fresh.Observe(r.pay)
			fresh.retractedAt[r.pay.ProposalID] = r.at
		case recordPayment:
			fresh.Observe(r.pay)
			fresh.observedAt[r.pay.ProposalID] = r.at
		case recordDebt:
			fresh.ObserveDebt(r.debt)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.byID, ix.retracted, ix.debts, ix.ndebts = fresh.byID, fresh.retracted, fresh.debts, fresh.ndebts
	ix.byTx, ix.observedAt, ix.retractedAt = fresh.byTx, fresh.observedAt, fresh.retractedAt
	ix.sweep, ix.cursor, ix.peak = fresh.sweep, 0, fresh.peak
	ix.consumed, ix.streamCreated = cp.seq, cp.streamCreated
	ix.signal()
	for id := range ix.watches {
		ix.wake(id)
	}
}

// consumedThrough records that the index holds the message of stream
// sequence seq of the stream created at created.
func (ix *Index) consumedThrough(seq uint64, created time.Time) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.consumed, ix.streamCreated = seq, created.UnixNano()
}

// encode returns the checkpoint's wire form.
func (cp checkpoint) encode() ([]byte, error) {
	b := append([]byte(checkpointMagic), checkpointVersion)
	b = binary.AppendUvarint(b, cp.seq)
	b = binary.AppendVarint(b, cp.streamCreated)
	b = binary.AppendUvarint(b, uint64(len(cp.records)))
	for _, r := range cp.records {
		var m proto.Message = r.pay.Proto()
		if r.kind == recordDebt {
			m = r.debt.Proto()
		}
		wire, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		b = append(b, r.kind)
		b = binary.AppendVarint(b, r.at)
		b = binary.AppendUvarint(b, uint64(len(wire)))
		b = append(b, wire...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// decodeCheckpoint parses a checkpoint's wire form; every error wraps
// ErrMalformedCheckpoint.
func decodeCheckpoint(data []byte) (checkpoint, error) {
	bad := func(format string, args ...any) (checkpoint, error) {
		return checkpoint{}, fmt.Errorf("%w: "+format, append([]any{ErrMalformedCheckpoint}, args...)...)
	}
	if len(data) < len(checkpointMagic)+1+4 || string(data[:len(checkpointMagic)]) != checkpointMagic {
		return bad("no checkpoint header")
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch")
	}
	if v := body[len(checkpointMagic)]; v != checkpointVersion {
		return bad("version %d, this validator reads %d", v, checkpointVersion)
	}
	r := reader{b: body[len(checkpointMagic)+1:]}
	var cp checkpoint
	cp.seq = r.uvarint()
	cp.streamCreated = r.varint()
	n := r.uvarint()
	if r.err != nil {
		return bad("header: %v", r.err)
	}
	if cp.seq == 0 {
		return bad("sequence 0: no checkpoint is written before a message") // Keeper.Checkpoint
	}
	if n > uint64(len(r.b)/minRecordBytes) {
		return bad("%d records claimed in %d bytes", n, len(r.b))
	}
	for i := range n {
		kind := r.byte()
		at := r.varint()
		wire := r.bytes(r.uvarint())
		if r.err != nil {
			return bad("record %d: %v", i, r.err)
		}
		switch kind {
		case recordPayment, recordRetraction:
			var m ledgerpb.Payment
			if err := proto.Unmarshal(wire, &m); err != nil {
				return bad("record %d: %v", i, err)
			}
			p, err := payment.FromProto(&m)
			if err != nil {
				return bad("record %d: %v", i, err)
			}
			if p.Removed != (kind == recordRetraction) {
				return bad("record %d: a retraction recorded as a payment or the reverse", i)
			}
			cp.records = append(cp.records, record{kind: kind, at: at, pay: p})
		case recordDebt:
			var m ledgerpb.DebtPayment
			if err := proto.Unmarshal(wire, &m); err != nil {
				return bad("record %d: %v", i, err)
			}
			d, err := payment.DebtPaidFromProto(&m)
			if err != nil {
				return bad("record %d: %v", i, err)
			}
			if d.Removed {
				return bad("record %d: a retracted debt payment", i)
			}
			cp.records = append(cp.records, record{kind: kind, at: at, debt: d})
		default:
			return bad("record %d: unknown kind %d", i, kind)
		}
	}
	if len(r.b) != 0 {
		return bad("%d bytes after the last record", len(r.b))
	}
	return cp, nil
}

// reader reads varints and byte strings, keeping the first error.
type reader struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errTruncated
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errTruncated
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errTruncated
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errTruncated
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
