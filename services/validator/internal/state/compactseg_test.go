package state

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// compactionTestNodes are nodes of the shapes a compaction copies: with and
// without properties, wallet and CID, a large message, a zero commit index.
func compactionTestNodes() []*ledgerpb.Node {
	return []*ledgerpb.Node{
		{Path: "/a"},
		{Path: "/content/aa/bb/cc/0xabc/page", PrimaryType: "ledger:page", Wallet: bytes.Repeat([]byte{7}, 20), Organization: "org",
			ContentType: "text/markdown", ProposalId: bytes.Repeat([]byte{1}, 32), Revision: 3, CommitIndex: 1 << 40, UpdatedAtMs: -5,
			Properties: []*ledgerpb.Property{{Name: "ledger:message", ValueJson: `"` + string(bytes.Repeat([]byte("m"), 70_000)) + `"`}, {Name: "ledger:cid", ValueJson: `"Qm"`}}},
		{Path: "/ü/ß", CommitIndex: 127, Revision: 1},
	}
}

// TestCompactionSegmentEncoding: a compaction segment built from stored
// node bytes is byte for byte the deterministic encoding of the segment
// with the decoded nodes as its ops, and the commit index read from a
// stored node is the decoded one.
func TestCompactionSegmentEncoding(t *testing.T) {
	nodes := compactionTestNodes()
	for _, seg := range []*ledgerpb.Segment{
		{Index: 9, Term: 2, Epoch: 4, Generation: 3, PrevHash: bytes.Repeat([]byte{5}, 32), Part: 7, Compaction: true},
		{Index: 1, Compaction: true},
		{},
	} {
		for n := range len(nodes) + 1 {
			var raw [][]byte
			want := proto.Clone(seg).(*ledgerpb.Segment)
			for _, node := range nodes[:n] {
				b, err := marshal(node)
				if err != nil {
					t.Fatal(err)
				}
				raw = append(raw, b)
				want.Ops = append(want.Ops, &ledgerpb.SegmentOp{Op: &ledgerpb.SegmentOp_Put{Put: node}})
				if got, err := storedCommitIndex(b); err != nil || got != node.GetCommitIndex() {
					t.Fatalf("commit index of %s: %d %v, want %d", node.GetPath(), got, err, node.GetCommitIndex())
				}
			}
			wantRaw, err := marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendCompactionSegment(nil, seg, raw)
			if err != nil || !bytes.Equal(got, wantRaw) {
				t.Fatalf("segment %+v with %d nodes: %x %v\nwant %x", seg, n, got, err, wantRaw)
			}
		}
	}
}

// FuzzStoredCommitIndex: whatever bytes decode as a node, storedCommitIndex
// reads them and finds the commit index decoding finds.
func FuzzStoredCommitIndex(f *testing.F) {
	for _, node := range compactionTestNodes() {
		b, err := marshal(node)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x48, 0x01, 0x48, 0x02}) // field 9 twice: the last wins
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := storedCommitIndex(raw)
		node := &ledgerpb.Node{}
		if proto.Unmarshal(raw, node) != nil {
			return
		}
		if err != nil || got != node.GetCommitIndex() {
			t.Fatalf("storedCommitIndex(%x) = %d, %v; decoding finds %d", raw, got, err, node.GetCommitIndex())
		}
	})
}
