package segments

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

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
	copies  []nodeCopy
	// lastDone is the newest completed run: GC debt's price.
	lastDone *ledgerpb.GcRun
	tarLive  []uint64 // live node bytes each TAR file carries
	written  map[[20]byte]*walletWrites
	live     map[[20]byte]*walletLive
	cids     uint64 // live nodes carrying a CID
	// distinctCIDs counts the CIDs they carry, each once.
	distinctCIDs uint64
}

// live returns a scan of the state, the last one while it is recent: taken
// at the applied index of now, or less than rate.KeptFor its cost ago.
func (c *Catalog) live() (*liveScan, error) {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	if s := c.scan; s != nil {
		age := c.now().Sub(s.at)
		if s.applied == c.machine.AppliedIndex() || age < rate.KeptFor(s.took) {
			return s, nil
		}
	}
	start := c.now()
	s := &liveScan{at: start, written: map[[20]byte]*walletWrites{}, live: map[[20]byte]*walletLive{}}
	view, err := c.openIndexed(func(applied uint64, x *segmentIndex) {
		s.applied = applied
		s.tars = append([]tarFile(nil), x.tars...)
		s.copies = slices.Clip(x.copies) // appended to only: the scan's part stays
		for w, ww := range x.wallets {
			s.written[w] = ww.clone()
		}
	})
	if err != nil {
		return nil, err
	}
	defer view.Close()
	if err := s.addNodes(view); err != nil {
		return nil, err
	}
	s.took = c.now().Sub(start)
	c.scan = s
	return s, nil
}

// addNodes adds up every live node of view: its bytes by TAR file and by
// wallet, and the CIDs. It reads each node's wire format (nodeScan), not a
// decoded message: at a large state this is a read of every live node.
func (s *liveScan) addNodes(view *state.ReadView) error {
	s.tarLive = make([]uint64, len(s.tars))
	seed := maphash.MakeSeed()
	var cidHashes []uint64
	copies, err := s.copyRuns(view)
	if err != nil {
		return err
	}
	var node nodeScan
	if err := view.Nodes(func(value []byte) error {
		if err := node.read(value); err != nil {
			return fmt.Errorf("%w: a content node: %v", state.ErrCorruptState, err)
		}
		size := uint64(len(value))
		tar := tarOf(s.tars, s.newestCopy(copies, node.commitIndex, node.path))
		if tar >= 0 {
			s.tarLive[tar] += size
		}
		if node.cid != "" {
			s.cids++
			cidHashes = append(cidHashes, maphash.String(seed, node.cid))
		}
		if len(node.wallet) != 20 {
			return nil
		}
		w := [20]byte(node.wallet)
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
		return err
	}
	// Distinct CIDs from their 64-bit hashes: 8 bytes per reference while
	// the scan runs, rather than a set of the strings.
	slices.Sort(cidHashes)
	s.distinctCIDs = uint64(len(slices.Compact(cidHashes)))
	return nil
}

// copyRuns are the runs whose compaction segments may hold the newest
// copy of a live node: the newest run, and while it has not copied every
// node (in progress, or given up), the newest complete run before it.
func (s *liveScan) copyRuns(view *state.ReadView) ([]*ledgerpb.GcRun, error) {
	done, err := view.LastDoneGcRun()
	if err != nil {
		return nil, err
	}
	s.lastDone = done
	if last := view.LastGcRun(); last != done {
		return []*ledgerpb.GcRun{last, done}, nil
	}
	return []*ledgerpb.GcRun{done}, nil
}

// newestCopy is the raft index of the newest segment holding the node at
// path, committed at index at, as it is: the one that wrote it, unless a
// compaction run started since copied it (a run copies in key order up to
// its resume key, all once done).
func (s *liveScan) newestCopy(runs []*ledgerpb.GcRun, at uint64, path []byte) uint64 {
	var key []byte
	for _, run := range runs {
		if run == nil || at >= run.GetIndex() {
			return at
		}
		if key == nil {
			key = storage.NodeKey(string(path))
		}
		if resume := run.GetResumeKey(); run.GetDone() || len(resume) > 0 && bytes.Compare(key, resume) < 0 {
			return s.copyIndex(run, key)
		}
	}
	return at
}

// copyIndex is the index of run's compaction segment holding key: the last
// one of its generation starting at or before it.
func (s *liveScan) copyIndex(run *ledgerpb.GcRun, key []byte) uint64 {
	lo, _ := slices.BinarySearchFunc(s.copies, run.GetGeneration(), func(c nodeCopy, g uint32) int { return cmp.Compare(c.generation, g) })
	gen := s.copies[lo:]
	hi, _ := slices.BinarySearchFunc(gen, run.GetGeneration()+1, func(c nodeCopy, g uint32) int { return cmp.Compare(c.generation, g) })
	gen = gen[:hi]
	i, found := slices.BinarySearchFunc(gen, key, func(c nodeCopy, k []byte) int { return bytes.Compare(c.first, k) })
	if !found {
		i--
	}
	if i < 0 {
		return run.GetIndex() // not in the index (a segment that did not decode): the run's start
	}
	return gen[i].index
}

// fragmentation is one wallet's figures in a scan; ok false when its
// segments never touched it.
func (s *liveScan) fragmentation(w [20]byte) (api.WalletFragmentation, bool) {
	ww, ok := s.written[w]
	if !ok {
		return api.WalletFragmentation{}, false
	}
	f := api.WalletFragmentation{Wallet: walletHex(w), BytesWritten: ww.written, NodeWrites: ww.writes, NodeDeletes: ww.deletes,
		TarFilesTouched: len(ww.byTar)}
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
