package state

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Compaction segments from stored nodes
//
// A compaction step copies live nodes into segments. The stored node is
// the deterministic encoding of a ledgerpb.Node, and a segment is the
// deterministic encoding of a ledgerpb.Segment whose ops hold the nodes:
// Go's protobuf encodes fields in field-number order, and a message field
// as its tag, its length and its own encoding. So the segment's bytes are
// its fields 1–5 encoded, then each node's stored bytes framed as a
// SegmentOp put (field 6), then fields 8 and 9: exactly what marshal of the
// decoded segment gives (TestCompactionSegmentEncoding holds the two
// equal), without decoding and encoding each node again.

// Field numbers of ledgerpb.Segment, SegmentOp and Node used here.
const (
	segmentOpsField   protowire.Number = 6
	segmentOpPutField protowire.Number = 1
	nodeCommitField   protowire.Number = 9
)

// appendCompactionSegment appends the encoding of seg, which has no ops
// and no proposal ids, with nodes (stored node bytes) as its put ops.
func appendCompactionSegment(dst []byte, seg *ledgerpb.Segment, nodes [][]byte) ([]byte, error) {
	head := &ledgerpb.Segment{Index: seg.GetIndex(), Term: seg.GetTerm(), Epoch: seg.GetEpoch(), Generation: seg.GetGeneration(), PrevHash: seg.GetPrevHash()}
	tail := &ledgerpb.Segment{Part: seg.GetPart(), Compaction: seg.GetCompaction()}
	dst, err := marshalAppend(dst, head)
	if err != nil {
		return nil, err
	}
	for _, node := range nodes {
		op := protowire.SizeTag(segmentOpPutField) + protowire.SizeBytes(len(node))
		dst = protowire.AppendTag(dst, segmentOpsField, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(op))
		dst = protowire.AppendTag(dst, segmentOpPutField, protowire.BytesType)
		dst = protowire.AppendBytes(dst, node)
	}
	return marshalAppend(dst, tail)
}

// storedCommitIndex returns the commit index of a stored node without
// decoding the rest of it.
func storedCommitIndex(raw []byte) (uint64, error) {
	var index uint64
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		raw = raw[n:]
		if num == nodeCommitField && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(raw)
			if m < 0 {
				return 0, protowire.ParseError(m)
			}
			index, raw = v, raw[m:] // the last occurrence wins, as in decoding
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, raw)
		if m < 0 {
			return 0, fmt.Errorf("field %d: %w", num, protowire.ParseError(m))
		}
		raw = raw[m:]
	}
	return index, nil
}
