package segments

import (
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// KeyValue is one line of the store manifest.
type KeyValue struct{ Key, Value string }

// Manifest is what the segment store is at one applied index: its formats
// and the head of its segment chain (ADR 0021). The caller adds what it
// knows of the validator (mode, chain) and renders the lines.
type Manifest struct {
	AppliedIndex uint64
	// Lines are in a fixed order; a key keeps its meaning for good.
	Lines []KeyValue
}

// Manifest describes the segment store as applied now.
func (c *Catalog) Manifest() (Manifest, error) {
	var out Manifest
	err := c.readIndex(func(applied uint64, x *segmentIndex) {
		generation := "none"
		if g, ok := x.currentGeneration(); ok {
			generation = strconv.FormatUint(uint64(g), 10)
		}
		out = Manifest{AppliedIndex: applied, Lines: []KeyValue{
			{"segment.encoding", "protobuf contentledger.v1.Segment"},
			{"segment.hash", "sha256 of the stored bytes"},
			{"segments.count", strconv.FormatUint(x.count, 10)},
			{"segments.bytes", strconv.FormatUint(x.bytes, 10)},
			{"segments.first", strconv.FormatUint(x.first, 10)},
			{"segments.last", strconv.FormatUint(x.last, 10)},
			{"segments.head", hexHash(x.head)},
			{"segments.chainBreaks", strconv.FormatUint(x.breaks, 10)},
			{"tar.targetBytes", strconv.FormatUint(x.target, 10)},
			{"tar.count", strconv.Itoa(len(x.tars))},
			{"generation.current", generation},
		}}
	})
	return out, err
}

// Journal is the segment chain from one raft index on, opened at one
// applied index: a line per segment, oldest first. Each line's hash
// commits to every segment before it, so the first line two validators'
// journals differ on is where their histories part. Close it when done: it
// holds a read view of the state open.
type Journal struct {
	// AppliedIndex is the applied index the journal is read at.
	AppliedIndex uint64

	from uint64
	view *state.ReadView
}

// OpenJournal opens the journal of the segments with raft index >= from.
func (c *Catalog) OpenJournal(from uint64) (*Journal, error) {
	view, err := c.machine.ReadView()
	if err != nil {
		return nil, err
	}
	return &Journal{AppliedIndex: view.AppliedIndex(), from: from, view: view}, nil
}

// Write writes the journal's lines to w, calling beforeWrite (if not nil)
// ahead of each write to w. A failure leaves w with some of the lines.
func (j *Journal) Write(w io.Writer, beforeWrite func()) error {
	bw := newStream(w, beforeWrite)
	var line []byte
	err := j.view.SegmentsFrom(j.from, func(index uint64, raw []byte, hash [32]byte) error {
		seg := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, seg); err != nil {
			return fmt.Errorf("%w: segment %d: %v", state.ErrCorruptState, index, err)
		}
		line = appendJournalLine(line[:0], index, seg, hash)
		_, err := bw.Write(line)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// Close releases the journal's read view.
func (j *Journal) Close() error { return j.view.Close() }

// appendJournalLine appends the journal line of one segment (logfmt):
//
//	index=12 term=2 epoch=1000 generation=0 proposals=3 hash=0x…
//
// A compaction's segments (docs/adr/0033) say so after the index, with
// their part: index=40 compaction=0 term=2 ... proposals=0 hash=0x…
func appendJournalLine(dst []byte, index uint64, seg *ledgerpb.Segment, hash [32]byte) []byte {
	dst = append(dst, "index="...)
	dst = strconv.AppendUint(dst, index, 10)
	if seg.GetCompaction() {
		dst = append(dst, " compaction="...)
		dst = strconv.AppendUint(dst, uint64(seg.GetPart()), 10)
	}
	dst = append(dst, " term="...)
	dst = strconv.AppendUint(dst, seg.GetTerm(), 10)
	dst = append(dst, " epoch="...)
	dst = strconv.AppendUint(dst, seg.GetEpoch(), 10)
	dst = append(dst, " generation="...)
	dst = strconv.AppendUint(dst, uint64(seg.GetGeneration()), 10)
	dst = append(dst, " proposals="...)
	dst = strconv.AppendInt(dst, int64(len(seg.GetProposalIds())), 10)
	dst = append(dst, " hash="...)
	dst = append(dst, hexHash(hash)...)
	return append(dst, '\n')
}
