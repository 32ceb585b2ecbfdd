package segments

import (
	"bytes"
	"encoding/hex"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// tarFile is one TAR file of the index.
type tarFile struct {
	generation  uint32
	number      int    // its place in its generation (0 the oldest): tarName
	first, last uint64 // raft indexes of its first and last segment
	segments    int
	bytes       uint64 // stored segment bytes
	written     uint64 // node bytes its segments' writes carry
	writes      uint64 // node writes
	deletes     uint64 // node deletions
	breaks      uint64 // segments not linked to the one before
	prev, head  [32]byte
	chainOK     bool
}

// walletTar is what one wallet's segments did in one TAR file.
type walletTar struct {
	written         uint64 // node bytes written
	writes, deletes uint64 // node writes and deletions
}

func (t *walletTar) add(d walletTar) {
	t.written, t.writes, t.deletes = t.written+d.written, t.writes+d.writes, t.deletes+d.deletes
}

func (t *walletTar) sub(d walletTar) {
	t.written, t.writes, t.deletes = t.written-d.written, t.writes-d.writes, t.deletes-d.deletes
}

// walletWrites is what one wallet's segments did: the totals, and by TAR
// file touched (its place in segmentIndex.tars), so that dropping a TAR
// file subtracts what it held.
type walletWrites struct {
	walletTar
	byTar map[int]walletTar
}

func (w *walletWrites) clone() *walletWrites {
	c := *w
	c.byTar = make(map[int]walletTar, len(w.byTar))
	for k, v := range w.byTar {
		c.byTar[k] = v
	}
	return &c
}

// dropTars forgets the first n TAR files: their figures are subtracted and
// the places of the others move down by n.
func (w *walletWrites) dropTars(n int) {
	byTar := make(map[int]walletTar, len(w.byTar))
	for i, t := range w.byTar {
		if i < n {
			w.sub(t)
			continue
		}
		byTar[i-n] = t
	}
	w.byTar = byTar
}

// segmentIndex is every segment read so far, summed. Segments are read in
// raft index order, so TAR numbers only grow and each wallet's TAR files
// are counted as they come.
type segmentIndex struct {
	target          uint64 // TAR file size (Config.TarTargetBytes)
	run             uint64 // the newest compaction run of the segments read
	next            uint64 // the lowest raft index not read yet
	count, bytes    uint64
	writes, deletes uint64
	first, last     uint64
	head            [32]byte // hash of the newest segment read
	breaks          uint64
	generations     []uint32 // ascending
	tars            []tarFile
	wallets         map[[20]byte]*walletWrites
	// copies are the compaction segments that rewrote nodes, in raft
	// index order, which is key order within a generation: where the live
	// scan finds the newest copy of a node (liveScan.newestCopy).
	copies []nodeCopy
}

// nodeCopy is a compaction segment: the key of the first node it rewrote,
// and where it is.
type nodeCopy struct {
	generation uint32
	first      []byte
	index      uint64
}

func newSegmentIndex(target uint64) *segmentIndex {
	return &segmentIndex{target: target, wallets: map[[20]byte]*walletWrites{}}
}

// walletOfPath returns the wallet of a content path,
// /<root>/<xx>/<xx>/<xx>/<0xwallet>/...
func walletOfPath(path string) ([20]byte, bool) {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 6)
	if len(parts) < 5 || len(parts[4]) != 42 || !common.IsHexAddress(parts[4]) {
		return [20]byte{}, false
	}
	return common.HexToAddress(parts[4]), true
}

func (x *segmentIndex) wallet(w [20]byte) *walletWrites {
	ww := x.wallets[w]
	if ww == nil {
		ww = &walletWrites{byTar: map[int]walletTar{}}
		x.wallets[w] = ww
	}
	return ww
}

// add reads one segment into seg, a scratch whose memory the next add
// reuses. A segment that does not decode still counts in the chain and its
// TAR file (its bytes are stored), with no writes.
func (x *segmentIndex) add(index uint64, raw []byte, hash [32]byte, seg *segmentScan) {
	decoded := seg.read(raw) == nil
	size := uint64(len(raw))
	gen := seg.generation
	// The oldest segment kept after a cleanup is a compaction's first: it
	// names the head of a generation that is gone (ADR 0033).
	anchor := x.count == 0 && seg.compaction && seg.part == 0
	linked := bytes.Equal(seg.prevHash, x.head[:]) || anchor
	if !linked {
		x.breaks++
	}
	n := len(x.tars)
	// A compaction's parts share its raft index: they stay in one file, so
	// that a file is a range of indexes.
	split := n > 0 && seg.part == 0 && x.tars[n-1].bytes+size > x.target && x.tars[n-1].segments > 0
	if n == 0 || x.tars[n-1].generation != gen || split {
		t := tarFile{generation: gen, first: index, chainOK: true}
		if n > 0 && x.tars[n-1].generation == gen {
			t.number = x.tars[n-1].number + 1
		}
		copy(t.prev[:], seg.prevHash)
		x.tars = append(x.tars, t)
		n++
	}
	tar := &x.tars[n-1]
	tar.last, tar.head = index, hash
	tar.segments++
	tar.bytes += size
	tar.chainOK = tar.chainOK && linked
	if !linked {
		tar.breaks++
	}
	if !slices.Contains(x.generations, gen) {
		x.generations = append(x.generations, gen)
		slices.Sort(x.generations)
	}
	if x.count == 0 {
		x.first = index
	}
	x.count++
	x.bytes += size
	x.last, x.head, x.next = index, hash, index+1
	if !decoded {
		return
	}
	if seg.compaction && len(seg.ops) > 0 && seg.ops[0].put {
		x.copies = append(x.copies, nodeCopy{generation: gen, first: storage.NodeKey(string(seg.ops[0].path)), index: index})
	}
	for _, op := range seg.ops {
		if op.put {
			x.writes++
			tar.writes++
			tar.written += op.size
			if len(op.wallet) == 20 {
				x.wallet([20]byte(op.wallet)).count(n-1, walletTar{written: op.size, writes: 1})
			}
			continue
		}
		if len(op.path) > 0 {
			x.deletes++
			tar.deletes++
			if w, ok := walletOfPath(string(op.path)); ok {
				x.wallet(w).count(n-1, walletTar{deletes: 1})
			}
		}
	}
}

// count adds d, done in TAR file tar, to the wallet's figures.
func (w *walletWrites) count(tar int, d walletTar) {
	t := w.byTar[tar]
	t.add(d)
	w.byTar[tar] = t
	w.add(d)
}

// dropBefore forgets the segments below raft index first, which a cleanup
// deleted (ADR 0033). A cleanup deletes whole generations and a TAR file
// holds segments of one generation, so whole TAR files go, with what they
// counted; the rest of the index stays as it was read.
func (x *segmentIndex) dropBefore(first uint64) {
	n := 0
	for n < len(x.tars) && x.tars[n].last < first {
		n++
	}
	if n == 0 {
		return
	}
	for _, t := range x.tars[:n] {
		x.count -= uint64(t.segments)
		x.bytes -= t.bytes
		x.writes -= t.writes
		x.deletes -= t.deletes
		x.breaks -= t.breaks
	}
	x.tars = slices.Delete(x.tars, 0, n)
	for w, ww := range x.wallets {
		ww.dropTars(n)
		if len(ww.byTar) == 0 {
			delete(x.wallets, w)
		}
	}
	x.copies = slices.DeleteFunc(x.copies, func(c nodeCopy) bool { return c.index < first })
	x.generations = x.generations[:0]
	for _, t := range x.tars {
		if !slices.Contains(x.generations, t.generation) {
			x.generations = append(x.generations, t.generation)
		}
	}
	if len(x.tars) > 0 {
		x.first = x.tars[0].first
	}
}

// catchUp reads the segments of view the index has not read yet. After a
// compaction, whose cleanup may have dropped the oldest segments, it first
// forgets those: what it read of the generations kept stays, so a run
// costs the index the segments the run writes, not a second read of the
// whole store. If the index was so far behind that segments it never read
// were dropped, every file it read was dropped before them, and the oldest
// segment kept is read as the anchor of a new chain, as at the start.
func (x *segmentIndex) catchUp(view *state.ReadView) error {
	if run := view.LastGcRun().GetRun(); run != x.run {
		first, ok, err := view.FirstSegmentIndex()
		if err != nil {
			return err
		}
		if !ok {
			first = math.MaxUint64 // nothing is kept
		}
		x.dropBefore(first)
		x.run = run
	}
	var scan segmentScan
	return view.SegmentsFrom(x.next, func(index uint64, raw []byte, hash [32]byte) error {
		x.add(index, raw, hash, &scan)
		return nil
	})
}

func (f tarFile) name() string { return tarName(f.number, f.generation) }

// tarOf returns the TAR file holding the segment of raft index, or -1.
func tarOf(tars []tarFile, index uint64) int {
	i := sort.Search(len(tars), func(i int) bool { return tars[i].last >= index })
	if i < len(tars) && tars[i].first <= index {
		return i
	}
	return -1
}

func hexHash(h [32]byte) string { return "0x" + hex.EncodeToString(h[:]) }

func walletHex(w [20]byte) string { return "0x" + hex.EncodeToString(w[:]) }

// currentGeneration is the newest generation read, ok false before any
// segment.
func (x *segmentIndex) currentGeneration() (uint32, bool) {
	if n := len(x.generations); n > 0 {
		return x.generations[n-1], true
	}
	return 0, false
}

// summary renders the segment chain and the TAR files.
func (x *segmentIndex) summary() (api.SegmentSummary, api.TarSummary) {
	s := api.SegmentSummary{Count: x.count, Bytes: x.bytes, FirstIndex: x.first, LastIndex: x.last, NodeWrites: x.writes,
		NodeDeletes: x.deletes, HeadHash: hexHash(x.head), ChainVerified: x.breaks == 0, ChainBreaks: x.breaks,
		Generations: append([]uint32{}, x.generations...)}
	s.CurrentGeneration, _ = x.currentGeneration()
	t := api.TarSummary{Count: len(x.tars), Bytes: x.bytes, TargetBytes: x.target}
	var closedBytes uint64
	for i, f := range x.tars {
		if x.closed(i) {
			t.Closed++
			closedBytes += f.bytes
		}
	}
	if t.Closed > 0 {
		eff := float64(closedBytes) / float64(uint64(t.Closed)*x.target)
		t.PackingEfficiency = &eff
	}
	if n := len(x.tars); n > 0 {
		t.Newest = x.tars[n-1].name()
	}
	return s, t
}

// closed reports whether TAR file i takes no more segments: a newer one
// follows it.
func (x *segmentIndex) closed(i int) bool { return i < len(x.tars)-1 }

// tarFiles renders every TAR file with its link in the chain.
func (x *segmentIndex) tarFiles() []api.TarFile {
	out := make([]api.TarFile, len(x.tars))
	for i, f := range x.tars {
		out[i] = api.TarFile{Name: f.name(), Number: f.number, Generation: f.generation, FirstIndex: f.first,
			LastIndex: f.last, Segments: f.segments, Bytes: f.bytes, Fill: float64(f.bytes) / float64(x.target), Closed: x.closed(i),
			PrevHash: hexHash(f.prev), HeadHash: hexHash(f.head), ChainOK: f.chainOK}
	}
	return out
}
