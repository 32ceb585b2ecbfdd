package state

// Snapshots
//
// A snapshot is the whole replicated state: every key under
// storage.StatePrefix ("s/") — nodes, proposal records, events, segments and
// the metadata keys (applied index, state hash, segment hash, event
// counter) — as of one applied index. The raft log (under "r/") is not part
// of it; internal/consensus keeps the snapshot's raft metadata.
//
// Creating one does not stop Apply: OpenSnapshot takes a Pebble snapshot (a
// sequence number, no copying) between two Apply calls, and the encoding
// reads from it later, on another goroutine, while applies continue on the
// live database.
//
// Restoring one replaces the state in a single synced Pebble batch: a
// DeleteRange over "s/" followed by every pair of the snapshot (later
// operations of a batch win over earlier ones). Readers see the old state or
// the new one, never a mix, and a crash keeps either. Nothing is written
// before the data has been verified completely: checksum, structure, key
// order, and that the applied index and state hash it holds are the ones its
// header and the raft metadata announce.
//
// Data format, version 1 (integers big-endian; uvarint as encoding/binary):
//
//	header (64 bytes):
//	    magic       "CLSTSNAP"
//	    version     uint32 = 1
//	    flags       uint32 = 0
//	    index       uint64   applied index the state is at (= raft snapshot index)
//	    term        uint64   term of the entry at index    (= raft snapshot term)
//	    state hash  [32]byte the state hash at index (hash.go)
//	records, keys strictly increasing, every key under "s/":
//	    uvarint(len(key)) ‖ key ‖ uvarint(len(value)) ‖ value      (len(key) >= 1;
//	                                                               shortest uvarints)
//	end of records:
//	    uvarint(0)
//	trailer (12 bytes):
//	    count       uint64   number of records
//	    checksum    uint32   CRC-32C (Castagnoli) of every byte before it
//
// Keys are written in Pebble's order, so the records could be ingested as an
// sstable without sorting; the strict order also rules out duplicates. With
// shortest uvarints, one state at one (index, term) has exactly one
// encoding, so equal states give byte-identical snapshots on every
// validator.
//
// Size: encoding streams (WriteTo), but raft carries a snapshot as one
// []byte in its message and restoring builds one Pebble batch from
// it, so a restore needs about twice the encoded size in memory. The peer
// transport bounds a snapshot at 1 GiB. Beyond that the way forward is to
// stream the records into sstables and ingest them with
// pebble.DB.IngestAndExcise, which the format already allows.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// Snapshot format constants.
const (
	snapshotMagic   = "CLSTSNAP"
	snapshotVersion = 1

	snapshotHeaderLen  = 8 + 4 + 4 + 8 + 8 + 32
	snapshotTrailerLen = 8 + 4
	// snapshotMinLen is an empty record list: header, end marker, trailer.
	snapshotMinLen = snapshotHeaderLen + 1 + snapshotTrailerLen
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot errors.
var (
	// ErrBadSnapshot is wrapped by every error about snapshot data that
	// cannot be restored: truncated, corrupt, an unknown version, or not
	// matching the index and term it came with.
	ErrBadSnapshot = errors.New("state: bad snapshot")
	// ErrSnapshotIndex is returned by OpenSnapshot when the state is not at
	// the index the caller asked for.
	ErrSnapshotIndex = errors.New("state: state is not at the requested snapshot index")
	// ErrStaleSnapshot is returned by RestoreSnapshot for a snapshot older
	// than the applied state: restoring it would roll the state back.
	ErrStaleSnapshot = errors.New("state: snapshot is older than the applied state")
)

// snapshotHeader is the decoded header of snapshot data.
type snapshotHeader struct {
	index, term uint64
	stateHash   [32]byte
}

func (h snapshotHeader) append(dst []byte) []byte {
	dst = append(dst, snapshotMagic...)
	dst = binary.BigEndian.AppendUint32(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, h.index)
	dst = binary.BigEndian.AppendUint64(dst, h.term)
	return append(dst, h.stateHash[:]...)
}

// Snapshot is the replicated state captured at one applied index, ready to
// be encoded. It holds a Pebble snapshot: Close it.
type Snapshot struct {
	snap   *pebble.Snapshot
	header snapshotHeader
}

// OpenSnapshot captures the state for a raft snapshot at (index, term)
// (consensus.Snapshotter). index must be the applied index: the caller
// (the consensus apply goroutine) calls it between two Apply calls.
// Capturing is cheap; the returned Snapshot is encoded by WriteTo, which may
// run concurrently with later applies.
func (m *Machine) OpenSnapshot(index, term uint64) (interface {
	io.WriterTo
	io.Closer
}, error) {
	s, err := m.newSnapshot(index, term)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (m *Machine) newSnapshot(index, term uint64) (*Snapshot, error) {
	snap := m.db.Pebble().NewSnapshot()
	applied, err := getUint64(snap, []byte(storage.AppliedIndexKey))
	if err == nil && applied != index {
		err = fmt.Errorf("%w: asked for %d, state is at %d", ErrSnapshotIndex, index, applied)
	}
	var hash [32]byte
	if err == nil {
		hash, err = getHash(snap, []byte(storage.StateHashKey))
	}
	if err == nil && index == 0 {
		err = fmt.Errorf("%w: nothing applied yet", ErrSnapshotIndex)
	}
	if err != nil {
		snap.Close()
		return nil, err
	}
	return &Snapshot{snap: snap, header: snapshotHeader{index: index, term: term, stateHash: hash}}, nil
}

// Index returns the applied index the snapshot was taken at.
func (s *Snapshot) Index() uint64 { return s.header.index }

// StateHash returns the state hash at Index.
func (s *Snapshot) StateHash() [32]byte { return s.header.stateHash }

// WriteTo encodes the snapshot to w in the format above and returns the
// bytes written. It streams: memory use does not grow with the state.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	crc := crc32.New(castagnoli)
	out := io.MultiWriter(bw, crc)

	buf := s.header.append(make([]byte, 0, 4096))
	if _, err := out.Write(buf); err != nil {
		return cw.n, err
	}
	lo := []byte(storage.StatePrefix)
	it, err := s.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: storage.PrefixEnd(lo)})
	if err != nil {
		return cw.n, err
	}
	var count uint64
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return cw.n, err
		}
		buf = binary.AppendUvarint(buf[:0], uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		if len(buf)+len(v) <= cap(buf) {
			buf = append(buf, v...)
			if _, err := out.Write(buf); err != nil {
				it.Close()
				return cw.n, err
			}
		} else {
			// A large value goes straight through instead of growing buf.
			if _, err := out.Write(buf); err != nil {
				it.Close()
				return cw.n, err
			}
			if _, err := out.Write(v); err != nil {
				it.Close()
				return cw.n, err
			}
		}
		count++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return cw.n, err
	}
	buf = binary.AppendUvarint(buf[:0], 0)
	buf = binary.BigEndian.AppendUint64(buf, count)
	if _, err := out.Write(buf); err != nil {
		return cw.n, err
	}
	buf = binary.BigEndian.AppendUint32(buf[:0], crc.Sum32())
	if _, err := bw.Write(buf); err != nil {
		return cw.n, err
	}
	err = bw.Flush()
	return cw.n, err
}

// Close releases the Pebble snapshot. It is idempotent.
func (s *Snapshot) Close() error {
	if s.snap == nil {
		return nil
	}
	err := s.snap.Close()
	s.snap = nil
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// decodeSnapshot checks data completely and calls fn, if not nil, with each
// record in order. Keys and values alias data. It never panics, whatever
// data holds; every error wraps ErrBadSnapshot. With fn nil it only
// verifies, so a caller can refuse bad data before changing anything.
func decodeSnapshot(data []byte, fn func(key, value []byte) error) (snapshotHeader, error) {
	var h snapshotHeader
	bad := func(format string, args ...any) (snapshotHeader, error) {
		return snapshotHeader{}, fmt.Errorf("%w: "+format, append([]any{ErrBadSnapshot}, args...)...)
	}
	if len(data) < snapshotMinLen {
		return bad("%d bytes, shorter than the smallest snapshot (%d)", len(data), snapshotMinLen)
	}
	if string(data[:8]) != snapshotMagic {
		return bad("not snapshot data (magic %q)", data[:8])
	}
	if v := binary.BigEndian.Uint32(data[8:]); v != snapshotVersion {
		return bad("format version %d, this build reads %d", v, snapshotVersion)
	}
	if f := binary.BigEndian.Uint32(data[12:]); f != 0 {
		return bad("unknown flags %#x", f)
	}
	body, trailer := data[:len(data)-4], data[len(data)-4:]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(trailer); got != want {
		return bad("checksum %08x, want %08x (truncated or corrupt)", got, want)
	}
	h.index = binary.BigEndian.Uint64(data[16:])
	h.term = binary.BigEndian.Uint64(data[24:])
	copy(h.stateHash[:], data[32:64])
	if h.index == 0 {
		return bad("index 0")
	}

	recs := body[snapshotHeaderLen : len(body)-8]
	wantCount := binary.BigEndian.Uint64(body[len(body)-8:])
	var (
		count      uint64
		prev       []byte
		sawApplied bool
		sawHash    bool
	)
	var scratch [binary.MaxVarintLen64]byte
	next := func() ([]byte, bool) {
		n, k := binary.Uvarint(recs)
		// Only the shortest encoding of a length is valid: one state has
		// exactly one encoding.
		if k <= 0 || binary.PutUvarint(scratch[:], n) != k || n > uint64(len(recs)-k) {
			return nil, false
		}
		b := recs[k : k+int(n)]
		recs = recs[k+int(n):]
		return b, true
	}
	for {
		key, ok := next()
		if !ok {
			return bad("record %d: key overruns the data", count)
		}
		if len(key) == 0 {
			break // end of records
		}
		value, ok := next()
		if !ok {
			return bad("record %d: value overruns the data", count)
		}
		if !bytes.HasPrefix(key, []byte(storage.StatePrefix)) {
			return bad("record %d: key %q is outside the state", count, key)
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			return bad("record %d: key %q does not sort after %q", count, key, prev)
		}
		prev = key
		switch string(key) {
		case storage.AppliedIndexKey:
			if n, ok := storage.Uint64(value); !ok || n != h.index {
				return bad("applied index %x, header says %d", value, h.index)
			}
			sawApplied = true
		case storage.StateHashKey:
			if !bytes.Equal(value, h.stateHash[:]) {
				return bad("state hash %x, header says %x", value, h.stateHash)
			}
			sawHash = true
		case storage.SegmentHashKey:
			if len(value) != 32 {
				return bad("segment hash of %d bytes", len(value))
			}
		case storage.EventSeqKey:
			if len(value) != 8 {
				return bad("event counter of %d bytes", len(value))
			}
		case storage.ProposalCountsKey:
			if err := proto.Unmarshal(value, &ledgerpb.ProposalCounts{}); err != nil {
				return bad("proposal counts do not decode: %v", err)
			}
		case storage.FinalizedEpochKey, storage.GcEpochKey, storage.LeaderTermKey, storage.UnfinalizedCountKey:
			if len(value) != 8 {
				return bad("%s of %d bytes", key, len(value))
			}
		}
		if fn != nil {
			if err := fn(key, value); err != nil {
				return snapshotHeader{}, err
			}
		}
		count++
	}
	if len(recs) != 0 {
		return bad("%d bytes after the last record", len(recs))
	}
	if count != wantCount {
		return bad("%d records, trailer says %d", count, wantCount)
	}
	if !sawApplied || !sawHash {
		return bad("the applied index or the state hash is missing")
	}
	return h, nil
}

// checkSnapshot verifies snapshot data and that it holds the state at index
// and term.
func checkSnapshot(index, term uint64, data []byte, fn func(key, value []byte) error) (snapshotHeader, error) {
	h, err := decodeSnapshot(data, fn)
	if err != nil {
		return h, err
	}
	if h.index != index || h.term != term {
		return snapshotHeader{}, fmt.Errorf("%w: data is at index %d term %d, metadata at index %d term %d",
			ErrBadSnapshot, h.index, h.term, index, term)
	}
	return h, nil
}

// VerifySnapshot checks the data of a snapshot at (index, term) without
// changing anything (consensus.SnapshotVerifier): checksum, structure, and
// that it holds the state at that index and term.
func (m *Machine) VerifySnapshot(index, term uint64, data []byte) error {
	_, err := checkSnapshot(index, term, data, nil)
	return err
}

// RestoreSnapshot replaces the whole replicated state with the data of a
// snapshot at (index, term) (consensus.SnapshotRestorer). The data is verified completely before
// anything is written; a refused snapshot leaves the state untouched. The
// replacement is one synced batch, after which AppliedIndex and StateHash
// are the snapshot's and Changed is signalled.
//
// Restoring the state the machine is already at is allowed (a restart that
// finds the snapshot's state already restored); an older one is refused
// with ErrStaleSnapshot.
func (m *Machine) RestoreSnapshot(index, term uint64, data []byte) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()

	h, err := checkSnapshot(index, term, data, nil)
	if err != nil {
		return err
	}
	m.mu.RLock()
	applied := m.meta.applied
	m.mu.RUnlock()
	if h.index < applied {
		return fmt.Errorf("%w: snapshot at %d, state at %d", ErrStaleSnapshot, h.index, applied)
	}

	// Sized up front: the batch holds every record plus a few bytes each,
	// and growing a batch of hundreds of MiB copies it over and over.
	b := m.db.Pebble().NewBatchWithSize(len(data) + len(data)/8 + 1024)
	defer b.Close()
	lo := []byte(storage.StatePrefix)
	if err := b.DeleteRange(lo, storage.PrefixEnd(lo), nil); err != nil {
		return err
	}
	if _, err := checkSnapshot(index, term, data, func(k, v []byte) error { return b.Set(k, v, nil) }); err != nil {
		return err
	}
	if err := b.Commit(m.db.DurableWrites()); err != nil {
		return fmt.Errorf("state: restore snapshot: %w", err)
	}

	md, err := loadMeta(m.db.Pebble())
	if err != nil {
		return err
	}
	if md.applied != h.index || md.stateHash != h.stateHash {
		// decodeSnapshot checked both keys; reading back anything else means
		// the database did not keep the batch.
		return fmt.Errorf("%w: restored state is at %d, snapshot at %d", ErrCorruptState, md.applied, h.index)
	}
	m.mu.Lock()
	m.meta = md
	m.history.add(md.applied, md.stateHash) // starts the history over
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	m.log.Info("restored a snapshot", zap.Uint64("index", h.index), zap.Uint64("term", h.term),
		zap.Int("bytes", len(data)))
	if o := m.observer.Load(); o != nil {
		(*o).StateRestored()
	}
	return nil
}
