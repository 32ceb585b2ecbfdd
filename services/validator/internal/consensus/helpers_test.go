package consensus

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// kvApplier is a minimal durable state machine for the tests: it stores the
// data of every normal entry under t/d/<index> and its applied index under
// t/applied in the same batch, like the real state machine does, and fails
// on any entry it has already applied or that leaves a gap. It remembers the
// membership changes it was handed, in memory.
//
// snapKVApplier adds snapshots of everything under t/ (Snapshotter,
// SnapshotVerifier), in a format of its own.
type kvApplier struct {
	db *storage.DB

	mu       sync.Mutex
	applied  uint64
	restores int           // snapshots restored
	block    chan struct{} // when non-nil, Apply waits for it to close
	fail     error         // when non-nil, Apply returns it
	// memberships are the membership changes applied since the process
	// started, copied.
	memberships []state.Entry
}

type snapKVApplier struct{ *kvApplier }

var (
	_ Snapshotter      = snapKVApplier{}
	_ SnapshotVerifier = snapKVApplier{}
)

var kvAppliedKey = []byte("t/applied")

func kvDataKey(i uint64) []byte { return append([]byte("t/d/"), storage.PutUint64(i)...) }

func newKVApplier(t testing.TB, db *storage.DB) *kvApplier {
	t.Helper()
	a := &kvApplier{db: db}
	v, err := db.Get(kvAppliedKey)
	switch {
	case err == nil:
		a.applied, _ = storage.Uint64(v)
	case !errors.Is(err, storage.ErrNotFound):
		t.Fatal(err)
	}
	return a
}

func (a *kvApplier) Apply(ents []state.Entry) error {
	a.mu.Lock()
	block, fail := a.block, a.fail
	a.mu.Unlock()
	if block != nil {
		<-block
	}
	if fail != nil {
		return fail
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.db.Pebble().NewBatch()
	defer b.Close()
	applied := a.applied
	var memberships []state.Entry
	for _, e := range ents {
		if e.Index != applied+1 {
			return fmt.Errorf("entry %d applied after %d (re-applied or gap)", e.Index, applied)
		}
		switch {
		case e.Membership != nil:
			mc := *e.Membership
			mc.Changes, mc.Context = slices.Clone(mc.Changes), bytes.Clone(mc.Context)
			memberships = append(memberships, state.Entry{Index: e.Index, Term: e.Term, Membership: &mc})
		case len(e.Data) > 0:
			if err := b.Set(kvDataKey(e.Index), e.Data, nil); err != nil {
				return err
			}
		}
		applied = e.Index
	}
	if err := b.Set(kvAppliedKey, storage.PutUint64(applied), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	a.applied = applied
	a.memberships = append(a.memberships, memberships...)
	return nil
}

// membershipChanges returns the membership changes applied so far.
func (a *kvApplier) membershipChanges() []state.Entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.memberships)
}

func (a *kvApplier) AppliedIndex() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

// data returns the data of the applied normal entries, in log order.
func (a *kvApplier) data(t testing.TB) []string {
	t.Helper()
	lo := []byte("t/d/")
	it, err := a.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: storage.PrefixEnd(lo)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Value()))
	}
	return out
}

var kvPrefix = []byte("t/")

// OpenSnapshot captures t/ at index (Snapshotter).
func (a snapKVApplier) OpenSnapshot(index, term uint64) (SnapshotData, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.applied != index {
		return nil, fmt.Errorf("snapshot at %d asked, applied %d", index, a.applied)
	}
	return &kvSnapshot{snap: a.db.Pebble().NewSnapshot(), index: index, term: term}, nil
}

type kvSnapshot struct {
	snap        *pebble.Snapshot
	index, term uint64
}

// WriteTo writes index ‖ term ‖ (len ‖ key ‖ len ‖ value)* ‖ CRC-32 of it all.
func (s *kvSnapshot) WriteTo(w io.Writer) (int64, error) {
	var buf []byte
	buf = binary.BigEndian.AppendUint64(buf, s.index)
	buf = binary.BigEndian.AppendUint64(buf, s.term)
	it, err := s.snap.NewIter(&pebble.IterOptions{LowerBound: kvPrefix, UpperBound: storage.PrefixEnd(kvPrefix)})
	if err != nil {
		return 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(it.Key())))
		buf = append(buf, it.Key()...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(it.Value())))
		buf = append(buf, it.Value()...)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, err
	}
	buf = binary.BigEndian.AppendUint32(buf, crc32.ChecksumIEEE(buf))
	n, err := w.Write(buf)
	return int64(n), err
}

func (s *kvSnapshot) Close() error { return s.snap.Close() }

// decodeKVSnapshot checks the data of a snapshot at (index, term) and
// returns its pairs.
func decodeKVSnapshot(index, term uint64, d []byte) ([][2][]byte, error) {
	if len(d) < 20 || crc32.ChecksumIEEE(d[:len(d)-4]) != binary.BigEndian.Uint32(d[len(d)-4:]) {
		return nil, errors.New("kv snapshot: bad checksum")
	}
	if binary.BigEndian.Uint64(d) != index || binary.BigEndian.Uint64(d[8:]) != term {
		return nil, errors.New("kv snapshot: data does not match metadata")
	}
	var pairs [][2][]byte
	d = d[16 : len(d)-4]
	for len(d) > 0 {
		var kv [2][]byte
		for i := range kv {
			if len(d) < 4 || uint64(len(d)-4) < uint64(binary.BigEndian.Uint32(d)) {
				return nil, errors.New("kv snapshot: truncated")
			}
			n := binary.BigEndian.Uint32(d)
			kv[i], d = d[4:4+n], d[4+n:]
		}
		pairs = append(pairs, kv)
	}
	return pairs, nil
}

// VerifySnapshot implements SnapshotVerifier. The test applier's states
// are small: it reads them whole.
func (a snapKVApplier) VerifySnapshot(index, term uint64, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, err = decodeKVSnapshot(index, term, data)
	return err
}

// RestoreSnapshot replaces t/ with the snapshot's pairs in one batch.
func (a snapKVApplier) RestoreSnapshot(index, term uint64, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	pairs, err := decodeKVSnapshot(index, term, data)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.db.Pebble().NewBatch()
	defer b.Close()
	if err := b.DeleteRange(kvPrefix, storage.PrefixEnd(kvPrefix), nil); err != nil {
		return err
	}
	for _, kv := range pairs {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			return err
		}
	}
	if err := b.Commit(a.db.DurableWrites()); err != nil {
		return err
	}
	a.applied = index
	a.restores++
	return nil
}

func (a *kvApplier) restored() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.restores
}

func openDB(t testing.TB, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(storage.Options{Dir: dir, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// proposeUntilApplied proposes data through propose (retrying on errors a
// caller is told to retry on) and waits until applied reports it.
func proposeUntilApplied(t testing.TB, propose func(context.Context, []byte) error, data string, applied func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := propose(ctx, []byte(data))
		cancel()
		if err == nil {
			until := time.Now().Add(2 * time.Second)
			for time.Now().Before(until) {
				if applied() {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			continue
		}
		if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrProposalDropped) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("propose %q: %v", data, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("proposal %q was not applied in time", data)
}

// network is an in-memory transport between nodes of one test process. It
// clones every message (as serialization would) and checks raft's ordering
// contract on the sending side: an acknowledgement of entries or a granted
// vote may leave only after what it acknowledges is in Pebble.
type network struct {
	t    testing.TB
	quit chan struct{}
	wg   sync.WaitGroup

	checked atomic.Int64 // acknowledgements and votes whose persistence was verified

	mu    sync.Mutex
	nodes map[uint64]*Node
	dbs   map[uint64]*storage.DB
	inbox map[uint64]chan *raftpb.Message
	cut   map[uint64]bool // partitioned: nothing in or out
}

func newNetwork(t testing.TB, ids ...uint64) *network {
	nw := &network{
		t: t, quit: make(chan struct{}),
		nodes: map[uint64]*Node{}, dbs: map[uint64]*storage.DB{}, inbox: map[uint64]chan *raftpb.Message{},
		cut: map[uint64]bool{},
	}
	for _, id := range ids {
		ch := make(chan *raftpb.Message, 4096)
		nw.inbox[id] = ch
		nw.wg.Add(1)
		go nw.deliver(id, ch)
	}
	t.Cleanup(func() { close(nw.quit); nw.wg.Wait() })
	return nw
}

func (nw *network) deliver(id uint64, ch chan *raftpb.Message) {
	defer nw.wg.Done()
	for {
		select {
		case <-nw.quit:
			return
		case m := <-ch:
			nw.mu.Lock()
			n, from, cut := nw.nodes[id], nw.nodes[m.GetFrom()], nw.cut[id] || nw.cut[m.GetFrom()]
			nw.mu.Unlock()
			err := errors.New("unreachable")
			if n != nil && !cut {
				// A stopped node drops it, like a dead peer.
				if m.GetType() == raftpb.MsgSnap && from != nil {
					err = streamSnapshot(from, n, m)
				} else if m.GetType() != raftpb.MsgSnap {
					err = n.Step(context.Background(), m)
				}
			}
			// Like a real transport, tell the sender how a snapshot fared.
			if m.GetType() == raftpb.MsgSnap && from != nil {
				status := raft.SnapshotFinish
				if err != nil {
					status = raft.SnapshotFailure
				}
				from.ReportSnapshot(id, status)
			}
		}
	}
}

// partition cuts id off from every peer (on) or reconnects it.
func (nw *network) partition(id uint64, on bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cut[id] = on
}

// attach makes id reachable (n) or unreachable (nil); db is what the
// ordering check reads.
func (nw *network) attach(id uint64, n *Node, db *storage.DB) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.nodes[id] = n
	if db != nil {
		nw.dbs[id] = db
	}
}

func (nw *network) transport(from uint64) Transport { return netTransport{nw, from} }

type netTransport struct {
	nw   *network
	from uint64
}

func (tr netTransport) Send(msgs []*raftpb.Message) {
	nw := tr.nw
	nw.mu.Lock()
	db := nw.dbs[tr.from]
	sender := nw.nodes[tr.from]
	cut := nw.cut[tr.from]
	nw.mu.Unlock()
	for _, m := range msgs {
		if cut {
			if m.GetType() == raftpb.MsgSnap && sender != nil {
				sender.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
			}
			continue
		}
		if db != nil {
			if checked, err := checkPersisted(db, m); err != nil {
				nw.t.Errorf("node %d sent %v before persisting: %v", tr.from, m.GetType(), err)
			} else if checked {
				nw.checked.Add(1)
			}
		}
		ch, ok := nw.inbox[m.GetTo()]
		if !ok {
			continue
		}
		select {
		case ch <- proto.Clone(m).(*raftpb.Message):
		default:
			if sender != nil {
				sender.ReportUnreachable(m.GetTo())
				if m.GetType() == raftpb.MsgSnap {
					sender.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
				}
			}
		}
	}
}

// checkPersisted verifies in Pebble what m depends on; checked says whether
// m depended on anything.
func checkPersisted(db *storage.DB, m *raftpb.Message) (checked bool, err error) {
	switch {
	case m.GetType() == raftpb.MsgAppResp && !m.GetReject() && m.GetIndex() > 0:
		// Send runs on the sender's Ready loop right after its save, so
		// nothing can have overwritten the entry in between. An entry
		// covered by a stored snapshot is as durable as one in the log.
		if _, err := db.Get(storage.RaftEntryKey(m.GetIndex())); err != nil {
			if v, terr := db.Get([]byte(storage.RaftTruncatedKey)); terr == nil && len(v) == 16 && binary.BigEndian.Uint64(v) >= m.GetIndex() {
				return true, nil
			}
			return true, fmt.Errorf("acknowledges entry %d that is not in Pebble: %v", m.GetIndex(), err)
		}
		return true, nil
	case m.GetType() == raftpb.MsgVoteResp && !m.GetReject():
		v, err := db.Get([]byte(storage.RaftHardStateKey))
		if err != nil {
			return true, fmt.Errorf("vote for %d in term %d but no hard state: %v", m.GetTo(), m.GetTerm(), err)
		}
		hs := &raftpb.HardState{}
		if err := proto.Unmarshal(v, hs); err != nil {
			return true, err
		}
		if hs.GetTerm() < m.GetTerm() || (hs.GetTerm() == m.GetTerm() && hs.GetVote() != m.GetTo()) {
			return true, fmt.Errorf("vote for %d in term %d but persisted term %d vote %d", m.GetTo(), m.GetTerm(), hs.GetTerm(), hs.GetVote())
		}
		return true, nil
	}
	return false, nil
}

// streamSnapshot does what a transport does with a MsgSnap: it streams the
// sender's snapshot file to the receiver's ReceiveSnapshot.
func streamSnapshot(from, to *Node, m *raftpb.Message) error {
	f, size, err := from.OpenSnapshotFile(m)
	if err != nil {
		return err
	}
	defer f.Close()
	return to.ReceiveSnapshot(context.Background(), m, f, size)
}
