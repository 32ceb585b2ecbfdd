package app

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// The storage views (segments, TAR files, GC estimate, fragmentation) add
// up applied state: the segments every applied entry wrote (the provenance
// record, state/DESIGN.md) against the content nodes live now. Segments
// never change once written, so they are read once, incrementally, into a
// segmentIndex; the live nodes change with every write, so they are
// scanned again when asked and the result is kept a while (liveScan).

// tarTargetBytes is the size up to which contiguous segments are grouped
// into one TAR file (ARCHITECTURE: storage model, 256 MiB by default).
const tarTargetBytes = 256 << 20

// tarName names a TAR file as the architecture does: data%05d%c.tar, the
// letter being the generation.
func tarName(number int, generation uint32) string {
	return fmt.Sprintf("data%05d%c.tar", number, 'a'+rune(generation%26))
}

// tarFile is one TAR file of the index.
type tarFile struct {
	generation  uint32
	first, last uint64 // raft indexes of its first and last segment
	segments    int
	bytes       uint64 // stored segment bytes
	written     uint64 // node bytes its segments' writes carry
	prev, head  [32]byte
	chainOK     bool
}

// walletWrites is what one wallet's segments did.
type walletWrites struct {
	written         uint64 // node bytes written
	writes, deletes uint64 // node writes and deletions
	lastTar, tars   int    // the newest TAR file touched, and how many
	byTar           map[int]uint64
}

func (w *walletWrites) touch(tar int) {
	if w.lastTar != tar {
		w.lastTar, w.tars = tar, w.tars+1
	}
}

func (w *walletWrites) clone() *walletWrites {
	c := *w
	c.byTar = make(map[int]uint64, len(w.byTar))
	for k, v := range w.byTar {
		c.byTar[k] = v
	}
	return &c
}

// segmentIndex is every segment read so far, summed. Segments are read in
// raft index order, so TAR numbers only grow and each wallet's TAR files
// are counted as they come.
type segmentIndex struct {
	target          uint64 // TAR file size (tarTargetBytes)
	next            uint64 // the lowest raft index not read yet
	count, bytes    uint64
	writes, deletes uint64
	first, last     uint64
	head            [32]byte // hash of the newest segment read
	breaks          uint64
	generations     []uint32 // ascending
	tars            []tarFile
	wallets         map[[20]byte]*walletWrites
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
		ww = &walletWrites{lastTar: -1, byTar: map[int]uint64{}}
		x.wallets[w] = ww
	}
	return ww
}

// add reads one segment. A segment that does not decode still counts in the
// chain and its TAR file (its bytes are stored), with no writes.
func (x *segmentIndex) add(index uint64, raw []byte, hash [32]byte) {
	seg := &ledgerpb.Segment{}
	decoded := proto.Unmarshal(raw, seg) == nil
	size := uint64(len(raw))
	gen := seg.GetGeneration()
	linked := bytes.Equal(seg.GetPrevHash(), x.head[:])
	if !linked {
		x.breaks++
	}
	n := len(x.tars)
	if n == 0 || x.tars[n-1].generation != gen || (x.tars[n-1].bytes+size > x.target && x.tars[n-1].segments > 0) {
		t := tarFile{generation: gen, first: index, chainOK: true}
		copy(t.prev[:], seg.GetPrevHash())
		x.tars = append(x.tars, t)
		n++
	}
	tar := &x.tars[n-1]
	tar.last, tar.head = index, hash
	tar.segments++
	tar.bytes += size
	tar.chainOK = tar.chainOK && linked
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
	for _, op := range seg.GetOps() {
		if node := op.GetPut(); node != nil {
			x.writes++
			sz := uint64(proto.Size(node))
			tar.written += sz
			if len(node.GetWallet()) == 20 {
				ww := x.wallet([20]byte(node.GetWallet()))
				ww.written += sz
				ww.writes++
				ww.byTar[n-1] += sz
				ww.touch(n - 1)
			}
			continue
		}
		if path := op.GetDeletePath(); path != "" {
			x.deletes++
			if w, ok := walletOfPath(path); ok {
				ww := x.wallet(w)
				ww.deletes++
				ww.touch(n - 1)
			}
		}
	}
}

// catchUp reads the segments of view the index has not read yet.
func (x *segmentIndex) catchUp(view *state.ReadView) error {
	return view.SegmentsFrom(x.next, func(index uint64, raw []byte, hash [32]byte) error {
		x.add(index, raw, hash)
		return nil
	})
}

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

// summary renders the segment chain and the TAR files.
func (x *segmentIndex) summary() (api.SegmentSummary, api.TarSummary) {
	s := api.SegmentSummary{Count: x.count, Bytes: x.bytes, FirstIndex: x.first, LastIndex: x.last, NodeWrites: x.writes,
		NodeDeletes: x.deletes, HeadHash: hexHash(x.head), ChainVerified: x.breaks == 0, ChainBreaks: x.breaks,
		Generations: append([]uint32{}, x.generations...)}
	if len(x.generations) > 0 {
		s.CurrentGeneration = x.generations[len(x.generations)-1]
	}
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
		t.Newest = tarName(n-1, x.tars[n-1].generation)
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
		out[i] = api.TarFile{Name: tarName(i, f.generation), Number: i, Generation: f.generation, FirstIndex: f.first,
			LastIndex: f.last, Segments: f.segments, Bytes: f.bytes, Fill: float64(f.bytes) / float64(x.target), Closed: x.closed(i),
			PrevHash: hexHash(f.prev), HeadHash: hexHash(f.head), ChainOK: f.chainOK}
	}
	return out
}

// walletLive is one wallet's content live at a scan.
type walletLive struct {
	bytes, nodes uint64
	byTar        map[int]uint64
}

// liveScan is applied state at one index, added up: the index's figures
// copied at that index, and the live nodes.
type liveScan struct {
	applied uint64
	at      time.Time
	took    time.Duration
	tars    []tarFile
	tarLive []uint64 // live node bytes each TAR file carries
	written map[[20]byte]*walletWrites
	live    map[[20]byte]*walletLive
	cids    uint64 // live nodes carrying a CID
	// distinctCIDs counts the CIDs they carry, each once.
	distinctCIDs uint64
}

// storageViews keeps the segment index and the last live scan. Reads of
// the index (the storage snapshot) and scans take different locks, so that
// a long scan does not hold up the snapshot.
type storageViews struct {
	machine *state.Machine
	now     func() time.Time

	indexMu sync.Mutex
	index   *segmentIndex

	scanMu sync.Mutex
	scan   *liveScan
}

func newStorageViews(machine *state.Machine, now func() time.Time) *storageViews {
	return &storageViews{machine: machine, now: now, index: newSegmentIndex(tarTargetBytes)}
}

// minRescan is the least time between two scans of the live nodes. A scan
// reads every live node, so it is also kept ten times as long as it took:
// the scans of a large state cost at most a tenth of a core.
const minRescan = time.Second

// keptFor is how long a computation that took took is reused: minRescan,
// or ten times its cost, so that repeating it costs at most a tenth of a
// core.
func keptFor(took time.Duration) time.Duration { return max(minRescan, 10*took) }

// withIndex brings the index up to the state of view and runs fn on it.
func (v *storageViews) withIndex(view *state.ReadView, fn func(*segmentIndex)) error {
	v.indexMu.Lock()
	defer v.indexMu.Unlock()
	if err := v.index.catchUp(view); err != nil {
		return err
	}
	fn(v.index)
	return nil
}

// live returns a scan of the state, the last one while it is recent: taken
// at the applied index of now, or less than minRescan (or ten times its
// own cost) ago.
func (v *storageViews) live() (*liveScan, error) {
	v.scanMu.Lock()
	defer v.scanMu.Unlock()
	if s := v.scan; s != nil {
		age := v.now().Sub(s.at)
		if s.applied == v.machine.AppliedIndex() || age < keptFor(s.took) {
			return s, nil
		}
	}
	start := v.now()
	view, err := v.machine.ReadView()
	if err != nil {
		return nil, err
	}
	defer view.Close()
	s := &liveScan{applied: view.AppliedIndex(), at: start, written: map[[20]byte]*walletWrites{}, live: map[[20]byte]*walletLive{}}
	if err := v.withIndex(view, func(x *segmentIndex) {
		s.tars = append([]tarFile(nil), x.tars...)
		for w, ww := range x.wallets {
			s.written[w] = ww.clone()
		}
	}); err != nil {
		return nil, err
	}
	s.tarLive = make([]uint64, len(s.tars))
	seed := maphash.MakeSeed()
	var cidHashes []uint64
	node := &ledgerpb.Node{}
	if err := view.Nodes(func(value []byte) error {
		if err := proto.Unmarshal(value, node); err != nil {
			return fmt.Errorf("%w: a content node: %v", state.ErrCorruptState, err)
		}
		size := uint64(len(value))
		tar := tarOf(s.tars, node.GetCommitIndex())
		if tar >= 0 {
			s.tarLive[tar] += size
		}
		if cid, ok := nodeCID(node); ok {
			s.cids++
			cidHashes = append(cidHashes, maphash.String(seed, cid))
		}
		if len(node.GetWallet()) != 20 {
			return nil
		}
		w := [20]byte(node.GetWallet())
		wl := s.live[w]
		if wl == nil {
			wl = &walletLive{byTar: map[int]uint64{}}
			s.live[w] = wl
		}
		wl.bytes += size
		wl.nodes++
		if tar >= 0 {
			wl.byTar[tar] += size
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Distinct CIDs from their 64-bit hashes: 8 bytes per reference while
	// the scan runs, rather than a set of the strings.
	slices.Sort(cidHashes)
	s.distinctCIDs = uint64(len(slices.Compact(cidHashes)))
	s.took = v.now().Sub(start)
	v.scan = s
	return s, nil
}

// fragmentation is one wallet's figures in a scan; ok false when its
// segments never touched it.
func (s *liveScan) fragmentation(w [20]byte) (api.WalletFragmentation, bool) {
	ww, ok := s.written[w]
	if !ok {
		return api.WalletFragmentation{}, false
	}
	f := api.WalletFragmentation{Wallet: walletHex(w), BytesWritten: ww.written, NodeWrites: ww.writes, NodeDeletes: ww.deletes,
		TarFilesTouched: ww.tars}
	if wl := s.live[w]; wl != nil {
		f.LiveBytes, f.LiveNodes = wl.bytes, wl.nodes
	}
	// Every live node was written by a segment, so live <= written; the
	// guard keeps a corrupt state from wrapping around.
	if f.BytesWritten > f.LiveBytes {
		f.DeadBytes = f.BytesWritten - f.LiveBytes
		f.FragmentationScore = float64(f.DeadBytes) / float64(f.BytesWritten)
	}
	return f, true
}

// wallets returns every wallet's figures, in address order.
func (s *liveScan) wallets() []api.WalletFragmentation {
	keys := make([][20]byte, 0, len(s.written))
	for w := range s.written {
		keys = append(keys, w)
	}
	slices.SortFunc(keys, func(a, b [20]byte) int { return bytes.Compare(a[:], b[:]) })
	out := make([]api.WalletFragmentation, 0, len(keys))
	for _, w := range keys {
		f, _ := s.fragmentation(w)
		out = append(out, f)
	}
	return out
}

func (s *liveScan) computed(nodeID uint64) api.FragmentationComputed {
	return api.FragmentationComputed{NodeID: nodeID, AppliedIndex: s.applied, ComputedAt: s.at.UTC()}
}
