package segments

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// FuzzScanSegment holds segmentScan to decoding, which it replaced in the
// index: what decodes scans and nothing else does, and the deterministic encoding of
// what decodes (the form of every segment the validator writes) scans to
// what decoding reads. Nothing panics.
func FuzzScanSegment(f *testing.F) {
	node := &ledgerpb.Node{Path: "/ledger/ab/cd/ef/0x00000000000000000000000000000000000000aa/org/a", PrimaryType: "nt:unstructured",
		Properties: []*ledgerpb.Property{{Name: "k", ValueJson: `"v"`}}, Wallet: bytes.Repeat([]byte{0xaa}, 20), Organization: "org",
		ProposalId: bytes.Repeat([]byte{1}, 32), Revision: 2, CommitIndex: 7, UpdatedAtMs: 9}
	for _, seg := range []*ledgerpb.Segment{
		{Index: 7, Term: 2, Epoch: 3, Generation: 1, PrevHash: bytes.Repeat([]byte{2}, 32), ProposalIds: [][]byte{bytes.Repeat([]byte{1}, 32)},
			Ops: []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_Put{Put: node}}, {Op: &ledgerpb.SegmentOp_DeletePath{DeletePath: node.GetPath() + "/b"}}}},
		{Index: 9, Generation: 2, Part: 3, Compaction: true, Ops: []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_Put{Put: node}}, {}}},
	} {
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(seg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{0x32, 0x03, 0x12, 0x01, 0xff}) // a delete path that is not UTF-8
	f.Add([]byte{0x32, 0x03, 0x0a, 0x01, 0x08}) // a put whose node is cut short
	f.Fuzz(func(t *testing.T, raw []byte) {
		var s segmentScan
		seg := &ledgerpb.Segment{}
		if !scanAgreesWithDecode(t, raw, s.read(raw), seg) {
			return
		}
		canonical, err := proto.MarshalOptions{Deterministic: true}.Marshal(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.read(canonical); err != nil {
			t.Fatalf("the deterministic encoding does not scan: %v", err)
		}
		if s.generation != seg.GetGeneration() || !bytes.Equal(s.prevHash, seg.GetPrevHash()) || s.part != seg.GetPart() ||
			s.compaction != seg.GetCompaction() || len(s.ops) != len(seg.GetOps()) {
			t.Fatalf("scanned gen %d prev %x part %d compaction %v, %d ops; decoded %v", s.generation, s.prevHash, s.part, s.compaction, len(s.ops), seg)
		}
		for i, op := range seg.GetOps() {
			got := s.ops[i]
			if put := op.GetPut(); put != nil {
				if !got.put || got.size != uint64(proto.Size(put)) || !bytes.Equal(got.wallet, put.GetWallet()) || string(got.path) != put.GetPath() {
					t.Fatalf("op %d: scanned %+v, decoded put %v (size %d)", i, got, put, proto.Size(put))
				}
				continue
			}
			if got.put || string(got.path) != op.GetDeletePath() {
				t.Fatalf("op %d: scanned %+v, decoded %v", i, got, op)
			}
		}
	})
}

// FuzzScanNode holds nodeScan to decoding, which the live scan used
// before: what decodes scans and nothing else does, to the same path,
// wallet, commit index and CID (nodeCID). Nothing panics.
func FuzzScanNode(f *testing.F) {
	for _, n := range []*ledgerpb.Node{
		{Path: "/ledger/ab/cd/ef/0x00000000000000000000000000000000000000aa/org/a", Wallet: bytes.Repeat([]byte{0xaa}, 20), CommitIndex: 7,
			Properties: []*ledgerpb.Property{{Name: "a", ValueJson: "1"}, {Name: proposal.CIDProperty, ValueJson: `"bafkreiabc"`}}},
		{Path: "/p", Properties: []*ledgerpb.Property{{Name: proposal.CIDProperty, ValueJson: `""`}, {Name: proposal.CIDProperty, ValueJson: "7"},
			{Name: proposal.CIDProperty, ValueJson: `"Qm1"`}, {Name: proposal.CIDProperty, ValueJson: `"Qm2"`}}},
	} {
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{0x1a, 0x03, 0x0a, 0x01, 0xff}) // a property name that is not UTF-8
	f.Add([]byte{0x48, 0x05, 0x48, 0x09, 0x22, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var n nodeScan
		node := &ledgerpb.Node{}
		if !scanAgreesWithDecode(t, raw, n.read(raw), node) {
			return
		}
		cid, _ := nodeCID(node)
		if string(n.path) != node.GetPath() || !bytes.Equal(n.wallet, node.GetWallet()) || n.commitIndex != node.GetCommitIndex() || n.cid != cid {
			t.Fatalf("scanned %+v (cid %q), decoded %v (cid %q)", n, n.cid, node, cid)
		}
	})
}

// BenchmarkReadSegment: what the index reads of a compaction segment of
// about 1 MiB (1,000 nodes of 1 KiB), scanned or decoded as it was before.
// scanAgreesWithDecode decodes raw into m and fails t unless the scan
// (scanErr) accepted raw exactly when decoding did. It reports whether raw
// decoded, so that the caller compares what each read.
func scanAgreesWithDecode(t *testing.T, raw []byte, scanErr error, m proto.Message) bool {
	t.Helper()
	if err := proto.Unmarshal(raw, m); err != nil {
		if scanErr == nil {
			t.Fatalf("scans, but does not decode: %v", err)
		}
		return false
	}
	if scanErr != nil {
		t.Fatalf("decodes, but does not scan: %v", scanErr)
	}
	return true
}

func BenchmarkReadSegment(b *testing.B) {
	seg := &ledgerpb.Segment{Index: 9, Generation: 2, Compaction: true}
	for i := range 1000 {
		seg.Ops = append(seg.Ops, &ledgerpb.SegmentOp{Op: &ledgerpb.SegmentOp_Put{Put: &ledgerpb.Node{
			Path:       fmt.Sprintf("/ledger/ab/cd/ef/0x00000000000000000000000000000000000000aa/org/soak/%d", i),
			Properties: []*ledgerpb.Property{{Name: "body", ValueJson: strconv.Quote(strings.Repeat("x", 900))}},
			Wallet:     bytes.Repeat([]byte{0xaa}, 20), ProposalId: bytes.Repeat([]byte{1}, 32), Revision: 1, CommitIndex: uint64(i)}}})
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(seg)
	if err != nil {
		b.Fatal(err)
	}
	var scan segmentScan
	benchReads(b, len(raw), func() error { return scan.read(raw) }, func() error {
		s := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, s); err != nil {
			return err
		}
		for _, op := range s.GetOps() {
			_ = proto.Size(op.GetPut())
		}
		return nil
	})
}

// BenchmarkReadNode: what the live scan reads of a 1 KiB node, scanned or
// decoded as it was before.
func BenchmarkReadNode(b *testing.B) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(&ledgerpb.Node{
		Path:       "/ledger/ab/cd/ef/0x00000000000000000000000000000000000000aa/org/soak/1",
		Properties: []*ledgerpb.Property{{Name: "body", ValueJson: strconv.Quote(strings.Repeat("x", 900))}, {Name: proposal.CIDProperty, ValueJson: `"bafkreiabc"`}},
		Wallet:     bytes.Repeat([]byte{0xaa}, 20), ProposalId: bytes.Repeat([]byte{1}, 32), Revision: 1, CommitIndex: 7})
	if err != nil {
		b.Fatal(err)
	}
	var scan nodeScan
	benchReads(b, len(raw), func() error { return scan.read(raw) }, func() error {
		n := &ledgerpb.Node{}
		if err := proto.Unmarshal(raw, n); err != nil {
			return err
		}
		_, _ = nodeCID(n)
		return nil
	})
}

// benchReads runs a read of size bytes as scan and decode sub-benchmarks.
func benchReads(b *testing.B, size int, scan, decode func() error) {
	for _, r := range []struct {
		name string
		read func() error
	}{{"scan", scan}, {"decode", decode}} {
		b.Run(r.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := r.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
