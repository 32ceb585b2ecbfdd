// Package segarchive writes and verifies segment archives: the TAR files of
// the storage layout (docs/architecture.md), streamed out of a validator as real tar
// archives for backups and offline checks.
//
// A segment is the stored protobuf (ledgerpb.Segment) of what one applied
// raft entry changed; its hash is the SHA-256 of those bytes, and each
// segment names the hash of the one before it. An archive starts with a
// manifest member (ManifestName, JSON) that says which segments follow and
// the hashes they chain from and to, then holds one member per segment, in
// raft index order, named by its index (EntryName) and holding exactly the
// stored bytes. The chain can be checked with nothing but the archive:
// Chain.Verify re-hashes every member, follows the links, within a file and
// from one file to the next, and holds the result to the manifest, so an
// archive cut short at a member boundary (which tar itself cannot tell) is
// found out.
//
// Archives are deterministic: every member has the same mode, owner and
// modification time (the Unix epoch), so the archive of a run of segments
// is the same bytes on every validator that applied them. Two validators'
// archives can be compared with sha256sum.
package segarchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// MaxSegmentBytes bounds one member when reading an archive, so that a
// damaged or hostile header cannot make the reader allocate without limit.
// A segment holds one raft entry's changes, far below it.
const MaxSegmentBytes = 64 << 20

// entrySuffix ends every segment member's name.
const entrySuffix = ".seg"

// ManifestName is the name of an archive's first member.
const ManifestName = "manifest.json"

// maxManifestBytes bounds the manifest member when reading.
const maxManifestBytes = 64 << 10

// Errors of Verify. Each is wrapped with where it was found.
var (
	// ErrMalformed: the file is not a segment archive (not a tar stream, a
	// member that is not a regular file named EntryName, out of order,
	// too large, or not a segment).
	ErrMalformed = errors.New("segarchive: not a segment archive")
	// ErrChainBroken: a segment does not name the hash of the one before it.
	ErrChainBroken = errors.New("segarchive: segment chain broken")
)

// Hash is the hash of a segment: the SHA-256 of its stored bytes.
func Hash(raw []byte) [32]byte { return sha256.Sum256(raw) }

// CountOps returns how many node writes and deletions a segment holds.
func CountOps(seg *ledgerpb.Segment) (writes, deletes int) {
	for _, op := range seg.GetOps() {
		switch {
		case op.GetPut() != nil:
			writes++
		case op.GetDeletePath() != "":
			deletes++
		}
	}
	return writes, deletes
}

// EntryName is the member name of part of the segments of raft index: 20
// decimal digits, so that names sort as indexes do, and for a part after
// the first (a compaction writes several segments at its index) a dash and
// 10 more.
func EntryName(index uint64, part uint32) string {
	if part == 0 {
		return fmt.Sprintf("%020d%s", index, entrySuffix)
	}
	return fmt.Sprintf("%020d-%010d%s", index, part, entrySuffix)
}

// parseEntryName returns the raft index and part a member name gives.
func parseEntryName(name string) (index uint64, part uint32, ok bool) {
	body, ok := strings.CutSuffix(name, entrySuffix)
	if !ok || len(body) < 20 {
		return 0, 0, false
	}
	index, err := strconv.ParseUint(body[:20], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(body) == 31 && body[20] == '-' {
		p, err := strconv.ParseUint(body[21:], 10, 32)
		if err != nil {
			return 0, 0, false
		}
		part = uint32(p)
	}
	return index, part, EntryName(index, part) == name
}

// Manifest describes the segments of an archive. Hashes are 0x-prefixed
// hex.
type Manifest struct {
	// Name is the TAR file's name in the storage model (data00000a.tar).
	Name       string `json:"name"`
	FirstIndex uint64 `json:"firstIndex"`
	LastIndex  uint64 `json:"lastIndex"`
	Segments   int    `json:"segments"`
	Bytes      uint64 `json:"bytes"`
	// PrevHash is the hash the first segment names, HeadHash the hash of
	// the last one.
	PrevHash string `json:"prevHash"`
	HeadHash string `json:"headHash"`
}

// Writer writes a segment archive.
type Writer struct {
	tw *tar.Writer
}

// NewWriter starts an archive on w with its manifest. The segments added
// must then be the ones m describes.
func NewWriter(w io.Writer, m Manifest) (*Writer, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	aw := &Writer{tw: tar.NewWriter(w)}
	return aw, aw.member(ManifestName, raw)
}

// Add appends part of the segments of raft index, raw being its stored
// bytes. Segments are added in chain order (raft index, then part).
func (w *Writer) Add(index uint64, part uint32, raw []byte) error {
	return w.member(EntryName(index, part), raw)
}

func (w *Writer) member(name string, body []byte) error {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     int64(len(body)),
		Mode:     0o644,
		ModTime:  time.Unix(0, 0),
		Format:   tar.FormatUSTAR,
	}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := w.tw.Write(body)
	return err
}

// Close writes the archive's trailer. It does not close the underlying
// writer.
func (w *Writer) Close() error { return w.tw.Close() }

// Summary is what Verify read from one archive.
type Summary struct {
	Manifest   Manifest
	Segments   int
	Bytes      uint64 // stored segment bytes
	FirstIndex uint64
	LastIndex  uint64
	// PrevHash is the hash the first segment names (the head of the
	// archive before it), HeadHash the hash of the last segment.
	PrevHash [32]byte
	HeadHash [32]byte
	// NodeWrites and NodeDeletes count the segments' operations.
	NodeWrites, NodeDeletes int
	// Compactions are the raft indexes where a compaction started a
	// generation in this archive: a segment of the next generation
	// following one of the previous, both verified.
	Compactions []uint64
}

// Chain verifies archives in order, each linked to the one before. The zero
// value accepts any first archive, whatever its first segment links to (an
// archive that does not start the chain names a hash it does not hold).
type Chain struct {
	started    bool
	last       uint64
	lastPart   uint32
	generation uint32
	head       [32]byte
}

// Head returns the index and hash of the last segment verified, ok false
// before any.
func (c *Chain) Head() (index uint64, hash [32]byte, ok bool) { return c.last, c.head, c.started }

// Verify reads one archive from r and checks every segment: the member is
// the segment its name says, indexes grow, and each segment links to the
// one before it, across archives too. The chain advances only when the
// whole archive verifies.
func (c *Chain) Verify(r io.Reader) (Summary, error) {
	var s Summary
	tr := tar.NewReader(r)
	if err := readManifest(tr, &s.Manifest); err != nil {
		return s, err
	}
	started, last, lastPart, generation, head := c.started, c.last, c.lastPart, c.generation, c.head
	var buf bytes.Buffer
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s, fmt.Errorf("%w: after %d segments: %v", ErrMalformed, s.Segments, err)
		}
		index, part, ok := parseEntryName(hdr.Name)
		if !ok || hdr.Typeflag != tar.TypeReg {
			return s, fmt.Errorf("%w: member %q is not a segment", ErrMalformed, hdr.Name)
		}
		if hdr.Size < 0 || hdr.Size > MaxSegmentBytes {
			return s, fmt.Errorf("%w: segment %d has %d bytes (at most %d)", ErrMalformed, index, hdr.Size, MaxSegmentBytes)
		}
		if started && (index < last || index == last && part <= lastPart) {
			return s, fmt.Errorf("%w: segment %d part %d follows segment %d part %d", ErrMalformed, index, part, last, lastPart)
		}
		buf.Reset()
		if _, err := io.Copy(&buf, tr); err != nil {
			return s, fmt.Errorf("%w: segment %d: %v", ErrMalformed, index, err)
		}
		raw := buf.Bytes()
		seg := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, seg); err != nil {
			return s, fmt.Errorf("%w: segment %d does not decode: %v", ErrMalformed, index, err)
		}
		if seg.GetIndex() != index || seg.GetPart() != part {
			return s, fmt.Errorf("%w: member %s holds the segment of index %d part %d", ErrMalformed, hdr.Name, seg.GetIndex(), seg.GetPart())
		}
		prev := seg.GetPrevHash()
		if len(prev) != len(head) {
			return s, fmt.Errorf("%w: segment %d names a previous hash of %d bytes", ErrChainBroken, index, len(prev))
		}
		if started && !bytes.Equal(prev, head[:]) {
			return s, fmt.Errorf("%w: segment %d names previous hash %s, segment %d hashes to %s",
				ErrChainBroken, index, hexHash([32]byte(prev)), last, hexHash(head))
		}
		if started && seg.GetGeneration() != generation {
			// Generations change only where a compaction starts one.
			if seg.GetGeneration() != generation+1 || !seg.GetCompaction() || part != 0 {
				return s, fmt.Errorf("%w: segment %d part %d of generation %d follows generation %d", ErrChainBroken, index, part,
					seg.GetGeneration(), generation)
			}
			s.Compactions = append(s.Compactions, index)
		}
		if s.Segments == 0 {
			s.FirstIndex, s.PrevHash = index, [32]byte(prev)
		}
		writes, deletes := CountOps(seg)
		s.NodeWrites += writes
		s.NodeDeletes += deletes
		started, last, lastPart, generation, head = true, index, part, seg.GetGeneration(), Hash(raw)
		s.Segments++
		s.Bytes += uint64(len(raw))
		s.LastIndex, s.HeadHash = index, head
	}
	if err := s.matches(s.Manifest); err != nil {
		return s, err
	}
	c.started, c.last, c.lastPart, c.generation, c.head = started, last, lastPart, generation, head
	return s, nil
}

// readManifest reads the first member, which must be the manifest.
func readManifest(tr *tar.Reader, m *Manifest) error {
	hdr, err := tr.Next()
	if err != nil {
		return fmt.Errorf("%w: no manifest: %v", ErrMalformed, err)
	}
	if hdr.Name != ManifestName || hdr.Typeflag != tar.TypeReg || hdr.Size < 0 || hdr.Size > maxManifestBytes {
		return fmt.Errorf("%w: the first member is %q, not a manifest", ErrMalformed, hdr.Name)
	}
	raw, err := io.ReadAll(tr)
	if err != nil {
		return fmt.Errorf("%w: manifest: %v", ErrMalformed, err)
	}
	if err := json.Unmarshal(raw, m); err != nil {
		return fmt.Errorf("%w: manifest: %v", ErrMalformed, err)
	}
	return nil
}

// matches checks what was read against the manifest.
func (s *Summary) matches(m Manifest) error {
	if s.Segments != m.Segments || s.Bytes != m.Bytes {
		return fmt.Errorf("%w: %d segments of %d bytes, the manifest says %d of %d (cut short?)",
			ErrMalformed, s.Segments, s.Bytes, m.Segments, m.Bytes)
	}
	if s.Segments == 0 {
		return nil
	}
	if s.FirstIndex != m.FirstIndex || s.LastIndex != m.LastIndex ||
		hexHash(s.PrevHash) != m.PrevHash || hexHash(s.HeadHash) != m.HeadHash {
		return fmt.Errorf("%w: segments %d-%d chain from %s to %s, the manifest says %d-%d from %s to %s",
			ErrMalformed, s.FirstIndex, s.LastIndex, hexHash(s.PrevHash), hexHash(s.HeadHash),
			m.FirstIndex, m.LastIndex, m.PrevHash, m.HeadHash)
	}
	return nil
}

func hexHash(h [32]byte) string { return "0x" + hex.EncodeToString(h[:]) }
