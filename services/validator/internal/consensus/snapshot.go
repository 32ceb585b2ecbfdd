package consensus

// Snapshots and log compaction
//
// What a snapshot is. raft needs Storage.Snapshot to return, at any time, a
// snapshot whose index is at least the log's truncation point and whose data
// is the applied state at exactly that index. The state lives in the same
// Pebble database and keeps changing as entries apply, so data "at an index"
// cannot be produced later from the live database: it has to be captured at
// that index and kept. So a snapshot is persisted when it is made:
//
//   - the metadata (index, term, ConfState) in Pebble under r/sn, and
//   - the data in one file, <snap dir>/<index:016x>-<term:016x>.snap, in the
//     frame below, next to the database (storage.DB.SnapshotDir),
//     compressed (ADR 0034).
//
// A file rather than Pebble keys because the data can be large (bounded by
// the disk and the transport's MaxSnapshotSize, 64 GiB by default): written
// once sequentially, streamed once per follower that needs it, and deleted
// when the next snapshot replaces it, without passing through Pebble's WAL,
// memtables and compactions. No path holds a snapshot in memory (ADR 0032):
// making, serving, receiving and restoring all stream through buffers of
// snapFileBufSize.
//
// Making one (Node.maybeSnapshot, on the apply goroutine). After
// Config.SnapshotEntries applied entries, between two Apply calls — so the
// state is at exactly the applied index i — the node takes the term of i from
// the log and the ConfState it persisted (which reflects exactly the conf
// changes up to i, since the apply goroutine installs them itself), and asks
// the applier to capture its state (Snapshotter.OpenSnapshot: a Pebble
// snapshot, cheap). A background goroutine then encodes the capture into a
// temporary file while applies go on, and createSnapshot publishes it:
//
//  1. write <name>.tmp, fsync it;
//  2. rename it to <name>, fsync the directory;
//  3. commit r/sn (synced) — this is the moment the snapshot exists;
//  4. delete the previous snapshot's file;
//  5. compact the log up to i − Config.CompactionMargin (Storage.Compact).
//
// A crash before 3 leaves a file no r/sn names: OpenStorage deletes every
// file in the directory but the current one. A crash between 3 and 5 leaves
// a longer log than needed; the next snapshot compacts it. Compaction never
// passes the snapshot's index (ErrCompactBeyondSnapshot), so the snapshot
// and the log always cover every index together.
//
// Raft's MsgSnap carries only the metadata; Snapshot.Data stays empty on
// both sides. The file travels beside the message:
//
// Serving one. Storage.Snapshot returns the metadata after checking the
// file's header; it is only called when a follower is behind the
// truncation point. A snapshot older than the latest membership change is
// not served (the follower may be a member it does not list); a fresh one
// is requested from the apply goroutine instead. The transport then opens
// the file (Node.OpenSnapshotFile) and streams it, frame included; the
// reader checks the frame as it goes, so a corrupt file fails the send at
// its end (and asks for a new snapshot) instead of reaching the peer.
//
// Receiving one (Node.ReceiveSnapshot, on a transport goroutine, then
// Storage.save on the Ready loop). The message is checked as Step checks
// messages; then stageSnapshot writes the stream to <name>.recv.tmp
// (refusing it beyond the disk's free space, or while two received files
// already wait), syncs it, reads it back checking the frame and the
// applier's data (SnapshotVerifier), and renames it <name>.recv. Only then
// is the message stepped into raft. When raft installs it, save renames
// <name>.recv to <name> (step 2) before the batch that records r/sn, the
// ConfState, the truncation point and the HardState commits (synced), and
// before any message acknowledging the snapshot leaves. Received files
// raft did not take are deleted once the node is past them. The state is
// restored afterwards, on the apply goroutine, from the file as a stream
// (SnapshotRestorer reads it to its end, the frame checked at the end,
// before it changes anything). If the node crashes in between, Start finds
// a snapshot newer than the applied state and restores it from the file
// before raft starts: nothing acknowledged is lost, and the applied index
// is never behind the log's first index. A crash while receiving leaves
// *.recv and *.tmp files, which OpenStorage deletes.
//
// File frame (integers big-endian):
//
//	header  (32 bytes): magic "CLRFTSNP" ‖ version uint32 = 2 ‖ reserved uint32 = 0 ‖ index uint64 ‖ term uint64
//	data    the applier's snapshot data (raftpb.Snapshot.Data), opaque here, as one S2
//	        stream (github.com/klauspost/compress/s2, blocks of at most 1 MiB); version 1
//	        files, still read, hold it uncompressed
//	trailer (12 bytes): len(data) uint64 ‖ CRC-32C of everything before this field
//
// The checksum protects the data at rest, independently of whatever the
// applier's own format checks end to end.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/klauspost/compress/s2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

const (
	snapFileMagic = "CLRFTSNP"
	// snapFileVersion is the version files are written in: 2, whose data
	// is the applier's data compressed as one S2 stream (ADR 0034).
	// Version 1, the data as it is, is still read.
	snapFileVersion    = 2
	snapFilePlain      = 1
	snapFileHeaderLen  = 32
	snapFileTrailerLen = 12
	snapFileExt        = ".snap"
	snapTmpExt         = ".tmp"
	// snapRecvExt names a snapshot received from a peer and verified,
	// waiting for raft to take it (stageSnapshot, Storage.save).
	snapRecvExt = ".recv"
	// snapFileBufSize is the buffer of every snapshot file read or
	// write, and the largest piece of a snapshot held in memory here.
	snapFileBufSize = 1 << 20
	// maxStagedSnapshots bounds the received snapshots waiting for raft:
	// a peer cannot fill the disk with snapshots raft never takes.
	maxStagedSnapshots = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot errors.
var (
	// ErrCompactBeyondSnapshot is returned by Storage.Compact for an index
	// past the newest snapshot: the entries in between would be covered by
	// neither the log nor a snapshot, and a follower that needs them could
	// never catch up.
	ErrCompactBeyondSnapshot = errors.New("consensus: compaction beyond the newest snapshot")
	// ErrBadSnapshot is returned by Node.Step for a snapshot message whose
	// data the applier refuses (SnapshotVerifier); the message is dropped.
	// A transport reports it to the sender, which then calls
	// ReportSnapshot(id, raft.SnapshotFailure) so that its leader retries.
	ErrBadSnapshot = errors.New("consensus: snapshot data refused")
	// ErrSnapshotGone is returned by Storage.OpenSnapshotFile for a
	// snapshot that a newer one replaced since raft chose to send it.
	ErrSnapshotGone = errors.New("consensus: the snapshot was replaced")
	// ErrSnapshotBusy is returned by Node.ReceiveSnapshot while another
	// snapshot is being received, or while maxStagedSnapshots received
	// ones wait for raft. The sender retries later.
	ErrSnapshotBusy = errors.New("consensus: cannot take another snapshot now")
	// ErrSnapshotNoSpace is returned by Node.ReceiveSnapshot for a snapshot
	// larger than the free space of the snapshot directory's disk.
	ErrSnapshotNoSpace = errors.New("consensus: no disk space for the snapshot")
	// errStopping aborts a snapshot being written when the node stops.
	errStopping = errors.New("consensus: stopping")
)

func snapFileName(index, term uint64) string {
	return fmt.Sprintf("%016x-%016x%s", index, term, snapFileExt)
}

// openSnapshotDir creates the snapshot directory if needed and deletes
// every file in it but the current snapshot's, which must exist: the
// leftovers of a crash between writing a file and recording it (steps 1–3
// above) or between recording a new one and deleting the old one (4).
func (s *Storage) openSnapshotDir() error {
	fs, dir := s.fs, s.snapDir
	if _, err := fs.Stat(dir); oserrNotExist(err) {
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("consensus: create snapshot directory: %w", err)
		}
		// The new directory's entry must be durable before files in it
		// are relied upon.
		if err := s.syncDir(fs.PathDir(dir)); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("consensus: snapshot directory: %w", err)
	}
	md := s.snapshot.GetMetadata()
	current := ""
	if md.GetIndex() > 0 {
		current = snapFileName(md.GetIndex(), md.GetTerm())
		f, err := fs.Open(fs.PathJoin(dir, current))
		if err != nil {
			return fmt.Errorf("%w: the data of snapshot %d (term %d): %v", ErrCorruptLog, md.GetIndex(), md.GetTerm(), err)
		}
		err = checkSnapFileHeader(f, md.GetIndex(), md.GetTerm())
		f.Close()
		if err != nil {
			return err
		}
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("consensus: list snapshot directory: %w", err)
	}
	removed := false
	for _, name := range names {
		if name == current || !(strings.HasSuffix(name, snapFileExt) || strings.HasSuffix(name, snapTmpExt) ||
			strings.HasSuffix(name, snapRecvExt)) {
			continue
		}
		if err := fs.Remove(fs.PathJoin(dir, name)); err != nil && !oserrNotExist(err) {
			return fmt.Errorf("consensus: remove stale snapshot file: %w", err)
		}
		removed = true
	}
	if removed {
		return s.syncDir(dir)
	}
	return nil
}

// oserrNotExist reports a missing file on the OS file system (a wrapped
// ENOENT) and on vfs.MemFS alike.
func oserrNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }

func (s *Storage) syncDir(dir string) error {
	if !s.sync {
		return nil
	}
	d, err := s.fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("consensus: open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("consensus: sync directory %s: %w", dir, err)
	}
	return nil
}

// writeSnapshotFile writes the frame of a snapshot at (index, term), with
// the data that write produces, to a temporary file and syncs it. It
// returns the temporary file's path; publishSnapshotFile renames it.
func (s *Storage) writeSnapshotFile(index, term uint64, write func(io.Writer) error) (tmp string, err error) {
	tmp = s.fs.PathJoin(s.snapDir, snapFileName(index, term)+snapTmpExt)
	f, err := s.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", fmt.Errorf("consensus: create snapshot file: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			_ = s.fs.Remove(tmp)
		}
	}()
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(f, snapFileBufSize)
	fw := &frameWriter{w: bw, crc: crc}

	var hdr [snapFileHeaderLen]byte
	copy(hdr[:], snapFileMagic)
	binary.BigEndian.PutUint32(hdr[8:], snapFileVersion)
	binary.BigEndian.PutUint64(hdr[16:], index)
	binary.BigEndian.PutUint64(hdr[24:], term)
	if _, err := fw.Write(hdr[:]); err != nil {
		return "", err
	}
	fw.n = 0
	// One goroutine: the snapshot is written beside applies, which the
	// cores are for. Block output does not depend on the concurrency, so
	// equal data gives equal files everywhere.
	zw := s2.NewWriter(fw, s2.WriterConcurrency(1))
	if err := write(zw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("consensus: compress snapshot file: %w", err)
	}
	var trl [snapFileTrailerLen]byte
	binary.BigEndian.PutUint64(trl[:], uint64(fw.n))
	crc.Write(trl[:8])
	binary.BigEndian.PutUint32(trl[8:], crc.Sum32())
	if _, err := bw.Write(trl[:]); err != nil {
		return "", err
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("consensus: write snapshot file: %w", err)
	}
	if s.sync {
		if err := f.Sync(); err != nil {
			return "", fmt.Errorf("consensus: sync snapshot file: %w", err)
		}
	}
	err = f.Close()
	f = nil
	if err != nil {
		return "", fmt.Errorf("consensus: close snapshot file: %w", err)
	}
	return tmp, nil
}

// frameWriter writes through to w, folding everything into crc and counting
// the bytes.
type frameWriter struct {
	w   io.Writer
	crc hash.Hash32
	n   int64
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.crc.Write(p[:n])
	f.n += int64(n)
	return n, err
}

// publishSnapshotFile renames a file written by writeSnapshotFile to its
// final name and makes the rename durable. Called with writeMu held.
func (s *Storage) publishSnapshotFile(tmp string, index, term uint64) error {
	if err := s.fs.Rename(tmp, s.fs.PathJoin(s.snapDir, snapFileName(index, term))); err != nil {
		return fmt.Errorf("consensus: publish snapshot file: %w", err)
	}
	return s.syncDir(s.snapDir)
}

// retireSnapshotFile deletes the file of a snapshot that is no longer the
// current one. Failing to is harmless (OpenStorage deletes leftovers).
// Called with writeMu held.
func (s *Storage) retireSnapshotFile(old *raftpb.SnapshotMetadata, cur *raftpb.SnapshotMetadata) {
	if old.GetIndex() == 0 || (old.GetIndex() == cur.GetIndex() && old.GetTerm() == cur.GetTerm()) {
		return
	}
	if err := s.fs.Remove(s.fs.PathJoin(s.snapDir, snapFileName(old.GetIndex(), old.GetTerm()))); err != nil && !oserrNotExist(err) {
		s.log.Warn("could not delete a replaced snapshot file", zap.Uint64("index", old.GetIndex()), zap.Error(err))
	}
}

func checkSnapFileHeader(r io.Reader, index, term uint64) error {
	var hdr [snapFileHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("%w: snapshot file %d: header: %v", ErrCorruptLog, index, err)
	}
	return checkSnapHeader(hdr[:], index, term)
}

func checkSnapHeader(hdr []byte, index, term uint64) error {
	switch {
	case string(hdr[:8]) != snapFileMagic:
		return fmt.Errorf("%w: snapshot file %d: not a snapshot file", ErrCorruptLog, index)
	case binary.BigEndian.Uint32(hdr[8:]) != snapFileVersion && binary.BigEndian.Uint32(hdr[8:]) != snapFilePlain:
		return fmt.Errorf("%w: snapshot file %d: version %d", ErrCorruptLog, index, binary.BigEndian.Uint32(hdr[8:]))
	case binary.BigEndian.Uint64(hdr[16:]) != index || binary.BigEndian.Uint64(hdr[24:]) != term:
		return fmt.Errorf("%w: snapshot file %d: holds index %d term %d, want term %d", ErrCorruptLog, index,
			binary.BigEndian.Uint64(hdr[16:]), binary.BigEndian.Uint64(hdr[24:]), term)
	}
	return nil
}

// snapFileReader reads the data of a snapshot file as a stream and checks
// the file's frame as it goes: the header before the first byte, the
// trailer's length and checksum when the data is read to its end. A
// frame that does not check out turns the end of the data into an error
// wrapping ErrCorruptLog instead of io.EOF, so a consumer that reads to the
// end (SnapshotRestorer, SnapshotVerifier) never takes a corrupt file for a
// good one.
type snapFileReader struct {
	f       vfs.File
	r       *bufio.Reader
	crc     hash.Hash32
	index   uint64
	left    int64 // data bytes not read yet
	dataLen int64
	hdr     [snapFileHeaderLen]byte
	trl     [snapFileTrailerLen]byte // once checkTrailer ran
	err     error                    // sticky: the frame's verdict once the data is read
}

// openSnapFileReader opens the snapshot file at path for (index, term),
// checks its header and size, and returns a reader of its data.
func openSnapFileReader(fs vfs.FS, path string, index, term uint64) (*snapFileReader, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot %d: %v", ErrCorruptLog, index, err)
	}
	r, err := newSnapFileReader(f, index, term)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func newSnapFileReader(f vfs.File, index, term uint64) (*snapFileReader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("consensus: snapshot file %d: %w", index, err)
	}
	size := st.Size()
	if size < snapFileHeaderLen+snapFileTrailerLen {
		return nil, fmt.Errorf("%w: snapshot file %d: %d bytes", ErrCorruptLog, index, size)
	}
	r := &snapFileReader{f: f, r: bufio.NewReaderSize(f, snapFileBufSize), crc: crc32.New(castagnoli), index: index,
		dataLen: size - snapFileHeaderLen - snapFileTrailerLen}
	r.left = r.dataLen
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: snapshot file %d: header: %v", ErrCorruptLog, index, err)
	}
	if err := checkSnapHeader(r.hdr[:], index, term); err != nil {
		return nil, err
	}
	r.crc.Write(r.hdr[:])
	return r, nil
}

// Size returns the size of the data (without the frame) as the file holds
// it: compressed in a version 2 file.
func (r *snapFileReader) Size() int64 { return r.dataLen }

// Data returns a reader of the applier's data: the file's data
// decompressed (version 2) or as it is (version 1). Its end is the frame's
// verdict, as for r itself.
func (r *snapFileReader) Data() io.Reader {
	if binary.BigEndian.Uint32(r.hdr[8:]) == snapFilePlain {
		return r
	}
	return s2.NewReader(r, s2.ReaderMaxBlockSize(s2MaxBlockSize))
}

// s2MaxBlockSize is the largest block a snapshot stream may announce: the
// writer's default (1 MiB). A hostile file cannot make the reader allocate
// more.
const s2MaxBlockSize = 1 << 20

func (r *snapFileReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		r.err = r.checkTrailer()
		return 0, r.err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.crc.Write(p[:n])
	r.left -= int64(n)
	if err == io.EOF {
		err = nil // the file shrank under us: ReadFull in checkTrailer says so
	}
	if err != nil {
		r.err = fmt.Errorf("%w: snapshot file %d: %v", ErrCorruptLog, r.index, err)
	}
	return n, err
}

func (r *snapFileReader) checkTrailer() error {
	var trl [snapFileTrailerLen + 1]byte
	k, err := io.ReadFull(r.r, trl[:])
	switch {
	case k < snapFileTrailerLen:
		return fmt.Errorf("%w: snapshot file %d: trailer: %v", ErrCorruptLog, r.index, err)
	case k > snapFileTrailerLen:
		return fmt.Errorf("%w: snapshot file %d: bytes after the trailer", ErrCorruptLog, r.index)
	}
	if n := binary.BigEndian.Uint64(trl[:]); n != uint64(r.dataLen) {
		return fmt.Errorf("%w: snapshot file %d: %d bytes of data, trailer says %d", ErrCorruptLog, r.index, r.dataLen, n)
	}
	copy(r.trl[:], trl[:])
	r.crc.Write(trl[:8])
	if got, want := r.crc.Sum32(), binary.BigEndian.Uint32(trl[8:]); got != want {
		return fmt.Errorf("%w: snapshot file %d: checksum %08x, want %08x", ErrCorruptLog, r.index, got, want)
	}
	return io.EOF
}

// Verify reads the rest of the data and returns the frame's verdict.
func (r *snapFileReader) Verify() error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	return nil
}

func (r *snapFileReader) Close() error { return r.f.Close() }

// openCurrentSnapshot opens the data of the current snapshot for reading.
func (s *Storage) openCurrentSnapshot() (*raftpb.SnapshotMetadata, *snapFileReader, error) {
	s.writeMu.Lock()
	s.mu.Lock()
	md := proto.Clone(s.snapshot.GetMetadata()).(*raftpb.SnapshotMetadata)
	s.mu.Unlock()
	if md.GetIndex() == 0 {
		s.writeMu.Unlock()
		return md, nil, nil
	}
	// Open under writeMu so the file cannot be replaced in between; read
	// after, since an open file stays readable when it is deleted.
	r, err := openSnapFileReader(s.fs, s.fs.PathJoin(s.snapDir, snapFileName(md.GetIndex(), md.GetTerm())), md.GetIndex(), md.GetTerm())
	s.writeMu.Unlock()
	return md, r, err
}

// OpenSnapshotFile opens the file of the snapshot at (index, term), which
// must be the current one, for sending to a peer: the whole file, frame
// included, and its size. A replaced snapshot is gone (ErrSnapshotGone):
// raft will send the newer one. The frame is checked as the file is read,
// at no extra cost: a corrupt file fails the read at its end, before the
// peer could take it, and a new snapshot is requested.
func (s *Storage) OpenSnapshotFile(index, term uint64) (io.ReadCloser, int64, error) {
	s.writeMu.Lock()
	md := s.SnapshotMetadata()
	if md.GetIndex() != index || md.GetTerm() != term {
		s.writeMu.Unlock()
		return nil, 0, fmt.Errorf("%w: asked for %d (term %d), current is %d (term %d)", ErrSnapshotGone,
			index, term, md.GetIndex(), md.GetTerm())
	}
	r, err := openSnapFileReader(s.fs, s.fs.PathJoin(s.snapDir, snapFileName(index, term)), index, term)
	s.writeMu.Unlock()
	if err != nil {
		s.requestSnapshot()
		return nil, 0, err
	}
	size := snapFileHeaderLen + r.dataLen + snapFileTrailerLen
	return &snapFileSender{r: r, onCorrupt: s.requestSnapshot}, size, nil
}

// snapFileSender reads a whole snapshot file, frame included, checking the
// frame as snapFileReader does.
type snapFileSender struct {
	r         *snapFileReader
	off       int // of the header, then of the trailer
	inTrailer bool
	onCorrupt func()
}

func (s *snapFileSender) Read(p []byte) (int, error) {
	switch {
	case !s.inTrailer && s.off < snapFileHeaderLen:
		n := copy(p, s.r.hdr[s.off:])
		s.off += n
		return n, nil
	case !s.inTrailer:
		n, err := s.r.Read(p)
		if err == io.EOF {
			s.inTrailer, s.off, err = true, 0, nil
		} else if err != nil && errors.Is(err, ErrCorruptLog) {
			s.onCorrupt()
		}
		return n, err
	case s.off < snapFileTrailerLen:
		n := copy(p, s.r.trl[s.off:])
		s.off += n
		return n, nil
	}
	return 0, io.EOF
}

func (s *snapFileSender) Close() error { return s.r.Close() }

// createSnapshot persists a snapshot with metadata md and the data write
// produces (steps 1–4 in the comment at the top), and makes it the current
// snapshot — unless a snapshot at a higher index became current meanwhile
// (one received from the leader), in which case it is discarded and
// installed is false. A snapshot at the current one's index replaces it
// (its file was unreadable; the state at one index is the same state).
func (s *Storage) createSnapshot(md *raftpb.SnapshotMetadata, write func(io.Writer) error) (installed bool, err error) {
	index, term := md.GetIndex(), md.GetTerm()
	if s.snapshotIndex() > index {
		return false, nil
	}
	tmp, err := s.writeSnapshotFile(index, term, write)
	if err != nil {
		return false, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.snapshotIndex() > index {
		_ = s.fs.Remove(tmp)
		return false, nil
	}
	if err := s.publishSnapshotFile(tmp, index, term); err != nil {
		_ = s.fs.Remove(tmp)
		return false, err
	}
	snap := &raftpb.Snapshot{Metadata: proto.Clone(md).(*raftpb.SnapshotMetadata)}
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		return false, err
	}
	if err := s.db.Pebble().Set([]byte(storage.RaftSnapshotKey), v, s.db.DurableWrites()); err != nil {
		return false, fmt.Errorf("consensus: record snapshot: %w", err)
	}
	s.mu.Lock()
	old := s.snapshot.GetMetadata()
	s.snapshot = raftpb.EnsureSnapshot(snap)
	s.mu.Unlock()
	s.retireSnapshotFile(old, md)
	return true, nil
}

// snapshotIndex returns the index of the current snapshot (0 if none).
func (s *Storage) snapshotIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot.GetMetadata().GetIndex()
}

// SnapshotMetadata returns the metadata of the current snapshot (empty if
// none was made or received yet), without reading its data.
func (s *Storage) SnapshotMetadata() *raftpb.SnapshotMetadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.snapshot.GetMetadata()).(*raftpb.SnapshotMetadata)
}

// stopWriter fails writes once stop is closed, so that encoding a large
// snapshot does not delay Node.Stop.
type stopWriter struct {
	w    io.Writer
	stop <-chan struct{}
}

func (s stopWriter) Write(p []byte) (int, error) {
	select {
	case <-s.stop:
		return 0, errStopping
	default:
	}
	return s.w.Write(p)
}

// maybeSnapshot starts a snapshot of the applied state when
// Config.SnapshotEntries entries were applied since the last one, or when
// Storage.Snapshot asked for one (the current one predates a membership
// change, or its file is unreadable). It runs on the apply goroutine
// between jobs, so the applier's state is at exactly its applied index; the
// writing happens on another goroutine (writeSnapshot), one at a time.
func (n *Node) maybeSnapshot() {
	if n.snapshotter == nil || n.snapBusy.Load() {
		return
	}
	applied := n.applier.AppliedIndex()
	want := n.storage.wantSnapshot.Load()
	if applied < n.snapIndex+n.cfg.SnapshotEntries && !want {
		return
	}
	if cur := n.storage.snapshotIndex(); applied < cur || (applied == cur && !want) {
		return
	}
	cs, confIndex := n.storage.ConfState()
	if confIndex > applied {
		// After a restart between persisting a conf change and applying it
		// (DESIGN.md) the persisted membership is newer than the state;
		// the conf change is being redelivered, snapshot after it.
		return
	}
	term, err := n.storage.Term(applied)
	if err != nil {
		n.log.Warn("no snapshot: the term of the applied index is unknown", zap.Uint64("index", applied), zap.Error(err))
		return
	}
	// Counted from here whatever happens next, so that a failing snapshot
	// is retried after another SnapshotEntries (or the next request from
	// Storage.Snapshot), not after every Apply.
	n.snapIndex = applied
	n.storage.wantSnapshot.Store(false)
	data, err := n.snapshotter.OpenSnapshot(applied, term)
	if err != nil {
		n.log.Error("could not capture the state for a snapshot", zap.Uint64("index", applied), zap.Error(err))
		return
	}
	md := &raftpb.SnapshotMetadata{Index: new(applied), Term: new(term), ConfState: cs}
	n.snapBusy.Store(true)
	n.wg.Add(1)
	go n.writeSnapshot(md, data)
}

// writeSnapshot writes a captured state as the new snapshot and compacts
// the log behind it, keeping Config.CompactionMargin entries.
//
// A failure is logged, not fatal: the node stays correct with a longer log,
// and the next snapshot is attempted after another SnapshotEntries.
func (n *Node) writeSnapshot(md *raftpb.SnapshotMetadata, data SnapshotData) {
	defer n.wg.Done()
	defer n.snapBusy.Store(false)
	defer data.Close()
	index := md.GetIndex()
	var size int64
	installed, err := n.storage.createSnapshot(md, func(w io.Writer) error {
		k, err := data.WriteTo(stopWriter{w: w, stop: n.stopc})
		size = k
		return err
	})
	switch {
	case errors.Is(err, errStopping):
		return
	case err != nil:
		n.log.Error("snapshot failed", zap.Uint64("index", index), zap.Error(err))
		return
	case !installed:
		n.log.Info("snapshot superseded by a newer one", zap.Uint64("index", index))
		return
	}
	n.log.Info("snapshot created", zap.Uint64("index", index), zap.Uint64("term", md.GetTerm()), zap.Int64("bytes", size))
	if index <= n.cfg.CompactionMargin {
		return
	}
	upTo := index - n.cfg.CompactionMargin
	switch err := n.storage.Compact(upTo); {
	case err == nil:
		n.log.Info("log compacted", zap.Uint64("up_to", upTo))
	case errors.Is(err, raft.ErrCompacted):
		// A snapshot received meanwhile truncated the log further.
	default:
		n.log.Error("log compaction failed", zap.Uint64("up_to", upTo), zap.Error(err))
	}
}

// stageSnapshot takes the file of a snapshot at md received from a peer
// (size bytes from r: the whole file, frame included), without ever
// holding more than snapFileBufSize of it in memory:
//
//  1. refuse it if the disk cannot hold it (ErrSnapshotNoSpace), or if
//     maxStagedSnapshots received ones still wait for raft (ErrSnapshotBusy);
//  2. write <name>.recv.tmp and sync it;
//  3. read it back, checking the frame (header, size, checksum) and, with
//     verify, the applier's data;
//  4. rename it to <name>.recv and sync the directory.
//
// Only then may raft see the message; save publishes <name>.recv as the
// snapshot's file before recording it. A failure at any step deletes the
// temporary file; a crash leaves files OpenStorage deletes. applied is the
// node's applied index: a staged snapshot at or below it can no longer be
// taken by raft, and is deleted here.
func (s *Storage) stageSnapshot(md *raftpb.SnapshotMetadata, r io.Reader, size int64, applied uint64, verify func(io.Reader) error) (err error) {
	index, term := md.GetIndex(), md.GetTerm()
	if !s.recvMu.TryLock() {
		return fmt.Errorf("%w: another snapshot is being received", ErrSnapshotBusy)
	}
	defer s.recvMu.Unlock()
	if size < snapFileHeaderLen+snapFileTrailerLen {
		return fmt.Errorf("%w: a snapshot file of %d bytes", ErrBadSnapshot, size)
	}
	name := snapFileName(index, term) + snapRecvExt
	s.writeMu.Lock()
	n, err := s.pruneStagedLocked(max(applied, s.snapshotIndex()), name)
	s.writeMu.Unlock()
	if err != nil {
		return err
	} else if n >= maxStagedSnapshots {
		return fmt.Errorf("%w: %d received snapshots wait for raft", ErrSnapshotBusy, n)
	}
	if du, err := s.fs.GetDiskUsage(s.snapDir); err == nil && uint64(size) > du.AvailBytes {
		return fmt.Errorf("%w: %d bytes, %d free", ErrSnapshotNoSpace, size, du.AvailBytes)
	}

	tmp := s.fs.PathJoin(s.snapDir, name+snapTmpExt)
	f, err := s.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("consensus: create received snapshot file: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			_ = s.fs.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, snapFileBufSize)
	if n, err := io.CopyN(bw, r, size); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: the stream ended after %d of %d bytes", ErrBadSnapshot, n, size)
		}
		return fmt.Errorf("consensus: receive snapshot %d: %w", index, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("consensus: write received snapshot: %w", err)
	}
	if s.sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("consensus: sync received snapshot: %w", err)
		}
	}
	err = f.Close()
	f = nil
	if err != nil {
		return fmt.Errorf("consensus: close received snapshot: %w", err)
	}

	fr, err := openSnapFileReader(s.fs, tmp, index, term)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	if verify != nil {
		err = verify(fr.Data())
	}
	if err == nil {
		// Whatever verify read, the frame is checked to its end.
		err = fr.Verify()
	}
	fr.Close()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	if err := s.fs.Rename(tmp, s.fs.PathJoin(s.snapDir, name)); err != nil {
		return fmt.Errorf("consensus: stage received snapshot: %w", err)
	}
	return s.syncDir(s.snapDir)
}

// pruneStagedLocked deletes the received snapshots at or below upTo,
// except keep (a name), and returns how many others remain. It cannot
// delete one that save is about to publish: raft hands out a snapshot only
// above its commit index, which is at least the applied index and the
// current snapshot's. Called with writeMu held.
func (s *Storage) pruneStagedLocked(upTo uint64, keep string) (int, error) {
	names, err := s.fs.List(s.snapDir)
	if err != nil {
		return 0, fmt.Errorf("consensus: list snapshot directory: %w", err)
	}
	left := 0
	for _, name := range names {
		if !strings.HasSuffix(name, snapRecvExt) || name == keep {
			continue
		}
		index, err := strconv.ParseUint(name[:min(16, len(name))], 16, 64)
		if err != nil || index <= upTo {
			if err := s.fs.Remove(s.fs.PathJoin(s.snapDir, name)); err != nil && !oserrNotExist(err) {
				return 0, fmt.Errorf("consensus: remove a received snapshot: %w", err)
			}
			continue
		}
		left++
	}
	return left, nil
}

// publishStagedSnapshot makes the received file of the snapshot at (index,
// term) its snapshot file (save, with writeMu held).
func (s *Storage) publishStagedSnapshot(index, term uint64) error {
	staged := s.fs.PathJoin(s.snapDir, snapFileName(index, term)+snapRecvExt)
	if _, err := s.fs.Stat(staged); err != nil {
		return fmt.Errorf("%w: snapshot %d (term %d) to install was not received: %v", ErrCorruptLog, index, term, err)
	}
	return s.publishSnapshotFile(staged, index, term)
}
