package segments

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/contentledger/contentledger/pkg/proposal"
)

// Reading segments and nodes without decoding them
//
// The index (index.go) needs little of a segment: its generation, previous
// hash, part and compaction flag, and for each op a put's node size,
// wallet and path or a delete's path. Decoding it into a ledgerpb.Segment
// builds every node, with its properties, as messages and strings: on a
// compaction segment, a megabyte of live content, most of the index's
// cost and garbage. segmentScan reads the wire format instead and holds
// slices of the segment's bytes. For every segment the validator writes
// (a deterministic encoding) it reads what decoding gives
// (FuzzScanSegment); it refuses what decoding refuses for malformed wire
// data and strings that are not UTF-8, so that a segment counts its writes
// under the same condition as before. The live scan (scan.go) reads every
// live node the same way (nodeScan: path, wallet, commit index and CID;
// FuzzScanNode).

// Field numbers of ledgerpb.Segment, SegmentOp, Node and Property.
const (
	segGenerationField protowire.Number = 4
	segPrevHashField   protowire.Number = 5
	segOpsField        protowire.Number = 6
	segPartField       protowire.Number = 8
	segCompactionField protowire.Number = 9

	opPutField    protowire.Number = 1
	opDeleteField protowire.Number = 2

	nodePathField       protowire.Number = 1
	nodeTypeField       protowire.Number = 2
	nodePropertiesField protowire.Number = 3
	nodeWalletField     protowire.Number = 4
	nodeOrgField        protowire.Number = 5
	nodeContentField    protowire.Number = 6
	nodeCommitField     protowire.Number = 9

	propertyNameField  protowire.Number = 1
	propertyValueField protowire.Number = 2
)

// segmentScan is one segment as the index reads it. Its slices point into
// the segment's bytes; ops is reused from one read to the next.
type segmentScan struct {
	generation uint32
	prevHash   []byte
	part       uint32
	compaction bool
	ops        []scannedOp
}

// scannedOp is one op: a put of a node (size is its encoded length) or a
// delete of path.
type scannedOp struct {
	put    bool
	size   uint64
	wallet []byte
	path   []byte
}

var errNotUTF8 = errors.New("a string field is not UTF-8")

// read reads raw into s. On an error s is zero: the segment counts as one
// that does not decode.
func (s *segmentScan) read(raw []byte) error {
	ops := s.ops[:0]
	*s = segmentScan{}
	err := forEachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == segGenerationField && typ == protowire.VarintType:
			s.generation = uint32(x)
		case num == segPrevHashField && typ == protowire.BytesType:
			s.prevHash = v
		case num == segPartField && typ == protowire.VarintType:
			s.part = uint32(x)
		case num == segCompactionField && typ == protowire.VarintType:
			s.compaction = x != 0
		case num == segOpsField && typ == protowire.BytesType:
			op, err := readOp(v)
			if err != nil {
				return fmt.Errorf("op %d: %w", len(ops), err)
			}
			ops = append(ops, op)
		}
		return nil
	})
	if err != nil {
		*s = segmentScan{ops: ops[:0]}
		return err
	}
	s.ops = ops
	return nil
}

// readOp reads a SegmentOp. Of its oneof, the last field present wins, as
// in decoding.
func readOp(raw []byte) (scannedOp, error) {
	var op scannedOp
	err := forEachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case opPutField:
			wallet, path, err := readNode(v)
			if err != nil {
				return err
			}
			op = scannedOp{put: true, size: uint64(len(v)), wallet: wallet, path: path}
		case opDeleteField:
			if !utf8.Valid(v) {
				return errNotUTF8
			}
			op = scannedOp{path: v}
		}
		return nil
	})
	return op, err
}

// readNode returns the wallet and path of a Node, checking its strings;
// the index needs no CID.
func readNode(raw []byte) (wallet, path []byte, err error) {
	var n nodeScan
	err = n.readFields(raw, false)
	return n.wallet, n.path, err
}

// nodeScan is a stored node as the live scan (scan.go) reads it, read the
// same way: its slices point into the node's bytes.
type nodeScan struct {
	path, wallet []byte
	commitIndex  uint64
	// cid is the CID the node references (nodeCID), "" for none.
	cid string
}

// read reads raw into n; on an error n is zero.
func (n *nodeScan) read(raw []byte) error { return n.readFields(raw, true) }

// readFields is read, taking the CID only with cid.
func (n *nodeScan) readFields(raw []byte, cid bool) error {
	*n = nodeScan{}
	err := forEachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		if num == nodeCommitField && typ == protowire.VarintType {
			n.commitIndex = x
		}
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case nodeWalletField:
			n.wallet = v
		case nodePathField, nodeTypeField, nodeOrgField, nodeContentField:
			if !utf8.Valid(v) {
				return errNotUTF8
			}
			if num == nodePathField {
				n.path = v
			}
		case nodePropertiesField:
			return n.readProperty(v, cid)
		}
		return nil
	})
	if err != nil {
		*n = nodeScan{}
	}
	return err
}

// readProperty checks a Property's strings and, with cid, takes its CID
// when it is the first property that names one, as nodeCID does.
func (n *nodeScan) readProperty(raw []byte, cid bool) error {
	var name, value []byte
	err := forEachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType || num != propertyNameField && num != propertyValueField {
			return nil
		}
		if !utf8.Valid(v) {
			return errNotUTF8
		}
		if num == propertyNameField {
			name = v
		} else {
			value = v
		}
		return nil
	})
	if err != nil || !cid || n.cid != "" || string(name) != proposal.CIDProperty {
		return err
	}
	var s string
	if json.Unmarshal(value, &s) == nil {
		n.cid = s
	}
	return nil
}

// forEachField calls f with each field of the message encoded in raw: its
// number, wire type, and value (v for length-delimited fields, x for
// varints). Other wire types are checked and passed with neither.
func forEachField(raw []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber { // ConsumeTag checks only the least
			return fmt.Errorf("field number %d is out of range", num)
		}
		raw = raw[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(raw)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(raw)
		default:
			n = protowire.ConsumeFieldValue(num, typ, raw)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		raw = raw[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
