package consensus

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// Small numbers so that a few hundred entries go through several snapshots.
const (
	testSnapshotEntries  = 50
	testCompactionMargin = 10
)

func snapConfig(t testing.TB, id uint64, peers ...uint64) Config {
	cfg := testConfig(t, id, peers...)
	cfg.SnapshotEntries = testSnapshotEntries
	cfg.CompactionMargin = testCompactionMargin
	return cfg
}

// cluster runs snapshotting nodes (snapKVApplier) over the in-memory
// network.
type cluster struct {
	t     *testing.T
	nw    *network
	peers []uint64
	dirs  map[uint64]string
	fss   map[uint64]vfs.FS // nil: the OS file system
	dbs   map[uint64]*storage.DB
	apps  map[uint64]*kvApplier
	nodes map[uint64]*Node
	// tune, when set, adjusts every node's configuration.
	tune func(*Config)
}

// newCluster prepares a network of ids and starts the nodes of peers (the
// initial voters); the other ids may join later.
func newCluster(t *testing.T, ids []uint64, peers ...uint64) *cluster {
	c := emptyCluster(t, ids, peers...)
	for _, id := range peers {
		c.dirs[id] = t.TempDir()
		c.start(id, false)
	}
	return c
}

// emptyCluster is newCluster without starting anything: set dirs and fss,
// then start.
func emptyCluster(t *testing.T, ids []uint64, peers ...uint64) *cluster {
	c := &cluster{
		t: t, nw: newNetwork(t, ids...), peers: peers,
		dirs: map[uint64]string{}, fss: map[uint64]vfs.FS{}, dbs: map[uint64]*storage.DB{},
		apps: map[uint64]*kvApplier{}, nodes: map[uint64]*Node{},
	}
	t.Cleanup(func() {
		for id, n := range c.nodes {
			if n != nil {
				c.stop(id)
			}
		}
	})
	return c
}

func (c *cluster) start(id uint64, join bool) {
	c.t.Helper()
	db, err := storage.Open(storage.Options{Dir: c.dirs[id], FS: c.fss[id], Logger: zaptest.NewLogger(c.t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		c.t.Fatal(err)
	}
	app := newKVApplier(c.t, db)
	c.dbs[id], c.apps[id] = db, app
	c.nw.attach(id, nil, db)
	cfg := snapConfig(c.t, id, c.peers...)
	cfg.Join = join
	if c.tune != nil {
		c.tune(&cfg)
	}
	n, err := Start(cfg, db, snapKVApplier{app}, c.nw.transport(id))
	if err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	c.nodes[id] = n
	c.nw.attach(id, n, db)
}

func (c *cluster) stop(id uint64) {
	c.t.Helper()
	c.nw.attach(id, nil, nil)
	c.nodes[id].Stop()
	if err := c.nodes[id].Err(); err != nil {
		c.t.Errorf("node %d: %v", id, err)
	}
	if err := c.dbs[id].Close(); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id] = nil
}

func (c *cluster) running() []*Node {
	var out []*Node
	for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
		if c.nodes[id] != nil {
			out = append(out, c.nodes[id])
		}
	}
	return out
}

func (c *cluster) leader() *Node {
	c.t.Helper()
	return waitLeader(c.t, 10*time.Second, c.running()...)
}

// propose commits n entries "<prefix><i>" through the leader, each applied
// on the leader before the next.
func (c *cluster) propose(prefix string, n int) {
	c.t.Helper()
	for i := range n {
		l := c.leader()
		app := c.apps[l.Status().ID]
		want := fmt.Sprintf("%s%03d", prefix, i)
		proposeUntilApplied(c.t, l.Propose, want, func() bool {
			d := app.data(c.t)
			return len(d) > 0 && slices.Contains(d[max(0, len(d)-5):], want)
		})
	}
}

// converged waits until the nodes of ids have applied the same index and
// hold the same data, and returns that data.
func (c *cluster) converged(ids ...uint64) []string {
	c.t.Helper()
	var ref []string
	waitFor(c.t, 20*time.Second, fmt.Sprintf("nodes %v to converge", ids), func() bool {
		ref = c.apps[ids[0]].data(c.t)
		applied := c.apps[ids[0]].AppliedIndex()
		for _, id := range ids[1:] {
			if c.apps[id].AppliedIndex() != applied || !slices.Equal(c.apps[id].data(c.t), ref) {
				return false
			}
		}
		return true
	})
	return ref
}

func firstIndex(n *Node) uint64 { f, _ := n.Storage().FirstIndex(); return f }
func lastIndex(n *Node) uint64  { l, _ := n.Storage().LastIndex(); return l }

// checkSnapshotServes checks what raft would send: data that matches its
// metadata and the log's truncation point.
func checkSnapshotServes(t *testing.T, n *Node) *raftpb.Snapshot {
	t.Helper()
	snap, err := n.Storage().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	md := snap.GetMetadata()
	if md.GetIndex() == 0 || md.GetIndex()+1 < firstIndex(n) {
		t.Fatalf("snapshot at %d does not cover the log starting at %d", md.GetIndex(), firstIndex(n))
	}
	if term, err := n.Storage().Term(md.GetIndex()); err != nil || term != md.GetTerm() {
		t.Fatalf("Term(%d) = %d, %v; snapshot term %d", md.GetIndex(), term, err, md.GetTerm())
	}
	if len(snap.GetData()) > 0 {
		t.Fatalf("served snapshot carries %d bytes of data: it should stay in its file", len(snap.GetData()))
	}
	fmd, fr, err := n.Storage().openCurrentSnapshot()
	if err != nil || fr == nil || fmd.GetIndex() != md.GetIndex() {
		t.Fatalf("open the served snapshot's file: %v", err)
	}
	data, err := io.ReadAll(fr.Data())
	fr.Close()
	if err != nil {
		t.Fatalf("served snapshot's file: %v", err)
	}
	if err := (snapKVApplier{}).VerifySnapshot(md.GetIndex(), md.GetTerm(), bytes.NewReader(data)); err != nil {
		t.Fatalf("served snapshot: %v", err)
	}
	pairs, _ := decodeKVSnapshot(md.GetIndex(), md.GetTerm(), data)
	for _, kv := range pairs {
		if bytes.Equal(kv[0], kvAppliedKey) {
			if got, _ := storage.Uint64(kv[1]); got != md.GetIndex() {
				t.Fatalf("snapshot at %d holds a state applied up to %d", md.GetIndex(), got)
			}
			return snap
		}
	}
	t.Fatal("snapshot data has no applied index")
	return nil
}

func TestSnapshotConfig(t *testing.T) {
	cfg := (Config{ID: 1}).withDefaults()
	if cfg.SnapshotEntries != DefaultSnapshotEntries || cfg.CompactionMargin != DefaultCompactionMargin {
		t.Fatalf("defaults: SnapshotEntries %d, CompactionMargin %d", cfg.SnapshotEntries, cfg.CompactionMargin)
	}
	for _, c := range []Config{{ID: 1, SnapshotEntries: 1<<32 + 1}, {ID: 1, CompactionMargin: ^uint64(0)}} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
}

// TestSnapshotCompactRestart: a single node snapshots every 50 entries,
// compacts behind each snapshot, and restarts from snapshot + remaining log
// without applying anything twice (kvApplier fails on a re-applied entry).
// Log truncation is off: it would truncate past the snapshots
// (TestTruncation covers that).
func TestSnapshotCompactRestart(t *testing.T) {
	c := emptyCluster(t, []uint64{1}, 1)
	c.tune = func(cfg *Config) { cfg.TruncationInterval = -1 }
	c.dirs[1] = t.TempDir()
	c.start(1, false)
	c.propose("a", 130)
	n := c.nodes[1]
	waitFor(t, 10*time.Second, "a snapshot past 100 and a compacted log", func() bool {
		return n.Storage().SnapshotMetadata().GetIndex() >= 100 && firstIndex(n) > 1
	})
	snap := checkSnapshotServes(t, n)
	md := snap.GetMetadata()
	if !slices.Equal(md.GetConfState().GetVoters(), []uint64{1}) {
		t.Fatalf("snapshot conf state %v", md.GetConfState())
	}
	// The margin stays behind the snapshot.
	if f := firstIndex(n); f > md.GetIndex()-testCompactionMargin+1 {
		t.Fatalf("first index %d, snapshot %d: fewer than %d entries kept", f, md.GetIndex(), testCompactionMargin)
	}
	if _, err := n.Storage().Entries(1, 2, 1<<20); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries(1) = %v, want ErrCompacted", err)
	}
	names, err := c.dbs[1].FS().List(c.dbs[1].SnapshotDir())
	if err != nil || len(names) != 1 {
		t.Fatalf("snapshot directory holds %q, %v; want the current snapshot only", names, err)
	}

	appliedBefore := c.apps[1].AppliedIndex()
	dataBefore := c.apps[1].data(t)
	c.stop(1)
	first, last := firstIndex(n), lastIndex(n)
	snapMD := n.Storage().SnapshotMetadata()

	// Reopened storage: same bounds, same snapshot, its term still known.
	db := openDB(t, c.dirs[1])
	st, err := OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := st.FirstIndex(); f != first {
		t.Fatalf("first index %d after reopen, want %d", f, first)
	}
	if l, _ := st.LastIndex(); l != last {
		t.Fatalf("last index %d after reopen, want %d", l, last)
	}
	if term, err := st.Term(first - 1); err != nil || term == 0 {
		t.Fatalf("Term(first-1) = %d, %v", term, err)
	}
	if got := st.SnapshotMetadata(); got.GetIndex() != snapMD.GetIndex() || got.GetTerm() != snapMD.GetTerm() {
		t.Fatalf("snapshot after reopen %v, want %v", got, snapMD)
	}
	if term, err := st.Term(snapMD.GetIndex()); err != nil || term != snapMD.GetTerm() {
		t.Fatalf("Term(snapshot index) = %d, %v", term, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	c.start(1, false)
	if got := c.apps[1].AppliedIndex(); got != appliedBefore {
		t.Fatalf("applied %d after restart, want %d", got, appliedBefore)
	}
	c.propose("b", 80)
	got := c.apps[1].data(t)
	if !slices.Equal(got[:len(dataBefore)], dataBefore) || len(got) != len(dataBefore)+80 {
		t.Fatalf("data after restart: %d entries, want %d then 80 more", len(got), len(dataBefore))
	}
	if c.apps[1].restored() != 0 {
		t.Fatal("a node that never fell behind restored a snapshot")
	}
	checkSnapshotServes(t, c.nodes[1])
}

// TestLaggingFollowerCatchesUpBySnapshot: a follower cut off while the
// others commit far past their compaction point receives a snapshot, then
// the rest of the log, and ends with the same applied index and data.
func TestLaggingFollowerCatchesUpBySnapshot(t *testing.T) {
	ids := []uint64{1, 2, 3}
	c := newCluster(t, ids, ids...)
	c.propose("a", 5)
	c.converged(ids...)

	lid := c.leader().Status().ID
	lag := ids[0]
	if lag == lid {
		lag = ids[1]
	}
	lagLast := lastIndex(c.nodes[lag])
	c.nw.partition(lag, true)
	c.propose("b", 150)
	for _, id := range ids {
		if id != lag {
			n := c.nodes[id]
			waitFor(t, 10*time.Second, "compaction past the lagging follower", func() bool { return firstIndex(n) > lagLast+1 })
		}
	}
	if c.apps[lag].AppliedIndex() > lagLast {
		t.Fatal("the partitioned follower applied entries")
	}

	c.nw.partition(lag, false)
	c.converged(ids...)
	if c.apps[lag].restored() == 0 {
		t.Fatal("the lagging follower caught up without a snapshot")
	}
	if idx := c.nodes[lag].Storage().SnapshotMetadata().GetIndex(); idx <= lagLast {
		t.Fatalf("follower's snapshot at %d, not past its old last index %d", idx, lagLast)
	}
	c.propose("c", 5)
	data := c.converged(ids...)
	if len(data) != 160 {
		t.Fatalf("%d entries applied, want 160", len(data))
	}
	for _, id := range ids {
		if err := c.nodes[id].Err(); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
	}
	if c.nw.checked.Load() == 0 {
		t.Fatal("no acknowledgement went through the persistence check")
	}
}

// TestWipedNodeRejoinsBySnapshot: a node whose data directory was wiped
// comes back the way DESIGN.md prescribes — removed from the membership,
// then started on the empty directory under a new id with Join and added —
// and catches up through a snapshot because the log was compacted.
//
// (Restarting it under its old id is not safe: it forgot its votes and the
// entries it acknowledged. raft detects the latter and panics on the first
// heartbeat whose commit index the empty log cannot hold.)
func TestWipedNodeRejoinsBySnapshot(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3, 4}, 1, 2, 3)
	c.propose("a", 10)
	c.converged(1, 2, 3)
	wiped := uint64(1)
	if c.leader().Status().ID == wiped {
		wiped = 2
	}
	var rest []uint64
	for _, id := range []uint64{1, 2, 3} {
		if id != wiped {
			rest = append(rest, id)
		}
	}
	c.stop(wiped)
	c.dirs[4] = t.TempDir() // the wiped directory, empty
	changeConf(t, c, &raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(wiped)}, func(cs *raftpb.ConfState) bool {
		return !slices.Contains(cs.GetVoters(), wiped)
	})
	c.nodes[wiped] = nil
	delete(c.nodes, wiped)

	c.propose("b", 120)
	leader := c.leader()
	waitFor(t, 10*time.Second, "compaction", func() bool { return firstIndex(leader) > 20 })

	c.start(4, true)
	changeConf(t, c, &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(4))}, func(cs *raftpb.ConfState) bool {
		return slices.Contains(cs.GetVoters(), 4)
	})
	c.converged(append(rest, 4)...)
	if c.apps[4].restored() == 0 {
		t.Fatal("the rejoined node caught up without a snapshot")
	}
	if cs := c.nodes[4].ConfState(); !slices.Contains(cs.GetVoters(), 4) || slices.Contains(cs.GetVoters(), wiped) {
		t.Fatalf("node 4's conf state %v", cs)
	}
	c.propose("c", 3)
	if data := c.converged(append(rest, 4)...); len(data) != 133 {
		t.Fatalf("%d entries, want 133", len(data))
	}
}

// changeConf proposes cc until the leader's membership satisfies done.
func changeConf(t *testing.T, c *cluster, cc *raftpb.ConfChange, done func(*raftpb.ConfState) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done(c.leader().ConfState()) {
		if time.Now().After(deadline) {
			t.Fatalf("conf change %v did not apply", cc)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.leader().ProposeConfChange(ctx, cc)
		cancel()
		if err != nil && !errors.Is(err, ErrProposalDropped) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		// Give it time to commit before proposing it again.
		until := time.Now().Add(time.Second)
		for time.Now().Before(until) && !done(c.leader().ConfState()) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// stageData stages data as if received from a peer (Storage.stageSnapshot
// without the checks), for tests that call save with a snapshot.
func stageData(t *testing.T, st *Storage, md *raftpb.SnapshotMetadata, data []byte) {
	t.Helper()
	tmp, err := st.writeSnapshotFile(md.GetIndex(), md.GetTerm(), func(w io.Writer) error { _, err := w.Write(data); return err })
	if err != nil {
		t.Fatal(err)
	}
	if err := st.fs.Rename(tmp, st.fs.PathJoin(st.snapDir, snapFileName(md.GetIndex(), md.GetTerm())+snapRecvExt)); err != nil {
		t.Fatal(err)
	}
}

// snapFileBytes frames data as a snapshot file at (index, term), as the
// sender's OpenSnapshotFile streams it.
func snapFileBytes(t *testing.T, index, term uint64, data []byte) []byte {
	t.Helper()
	db := openDB(t, t.TempDir())
	defer db.Close()
	st, err := OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := st.writeSnapshotFile(index, term, func(w io.Writer) error { _, err := w.Write(data); return err })
	if err != nil {
		t.Fatal(err)
	}
	f, err := st.fs.Open(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapDirLeftovers lists the files of n's snapshot directory other than
// its current snapshot's.
func snapDirLeftovers(t *testing.T, n *Node) []string {
	t.Helper()
	st := n.Storage()
	names, err := st.fs.List(st.snapDir)
	if err != nil {
		t.Fatal(err)
	}
	md := st.SnapshotMetadata()
	var out []string
	for _, name := range names {
		if md.GetIndex() == 0 || name != snapFileName(md.GetIndex(), md.GetTerm()) {
			out = append(out, name)
		}
	}
	return out
}

// TestReceiveSnapshotRefusesBadData: a snapshot whose stream is truncated,
// whose frame is corrupt or whose data does not verify never reaches raft,
// leaves nothing in the snapshot directory, and the node keeps running.
// Step refuses a snapshot that comes without its data.
func TestReceiveSnapshotRefusesBadData(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	app := newKVApplier(t, db)
	n, err := Start(snapConfig(t, 1, 1, 2, 3), db, snapKVApplier{app}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	const index, term = 100, 5
	md := &raftpb.SnapshotMetadata{Index: new(uint64(index)), Term: new(uint64(term)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	m := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(term)),
		Snapshot: &raftpb.Snapshot{Metadata: md}}

	// A valid kv snapshot, framed, to damage in several ways.
	kv := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, index), term)
	kv = binary.BigEndian.AppendUint32(kv, crc32.ChecksumIEEE(kv))
	good := snapFileBytes(t, index, term, kv)
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	cases := map[string]struct {
		stream []byte
		size   int64
	}{
		"not a snapshot":    {[]byte("not a snapshot file, but long enough for a frame"), 50},
		"truncated stream":  {good[:len(good)-5], int64(len(good))},
		"corrupt frame":     {flipped, int64(len(flipped))},
		"other index":       {snapFileBytes(t, index+1, term, kv), int64(len(good))},
		"data not verified": {snapFileBytes(t, index, term, []byte("0123456789abcdefghij")), int64(len(good))},
	}
	for name, c := range cases {
		err := n.ReceiveSnapshot(context.Background(), m, bytes.NewReader(c.stream), c.size)
		if !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: ReceiveSnapshot = %v, want ErrBadSnapshot", name, err)
		}
		if left := snapDirLeftovers(t, n); len(left) > 0 {
			t.Errorf("%s: refused snapshot left %v", name, left)
		}
	}
	if err := n.Step(context.Background(), m); !errors.Is(err, ErrMalformedMessage) {
		t.Fatalf("Step(snapshot without data) = %v, want ErrMalformedMessage", err)
	}
	// The bootstrap's own conf changes (indexes 1 to 3) may apply
	// meanwhile; the snapshot's index 100 must not.
	if n.Err() != nil || app.AppliedIndex() >= index || n.Storage().SnapshotMetadata().GetIndex() != 0 {
		t.Fatalf("a refused snapshot changed the node: err %v, applied %d", n.Err(), app.AppliedIndex())
	}

	db2 := openDB(t, t.TempDir())
	defer db2.Close()
	plain, err := Start(testConfig(t, 1, 1, 2, 3), db2, newKVApplier(t, db2), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	if err := plain.ReceiveSnapshot(context.Background(), m, bytes.NewReader(good), int64(len(good))); !errors.Is(err, ErrSnapshotUnsupported) {
		t.Fatalf("ReceiveSnapshot without a restorer = %v, want ErrSnapshotUnsupported", err)
	}
}

// TestStartRestoresStoredSnapshot covers a crash between storing a received
// snapshot (Ready loop) and restoring the state from it (apply goroutine):
// Start restores it before raft starts, or refuses without a restorer.
func TestStartRestoresStoredSnapshot(t *testing.T) {
	// A state to snapshot, from a node that ran.
	src := newCluster(t, []uint64{1}, 1)
	src.propose("a", 20)
	srcApp := src.apps[1]
	term, _ := src.nodes[1].Storage().Term(srcApp.AppliedIndex())
	data, err := snapKVApplier{srcApp}.OpenSnapshot(srcApp.AppliedIndex(), term)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := data.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	data.Close()
	want := srcApp.data(t)
	snap := &raftpb.Snapshot{
		Metadata: &raftpb.SnapshotMetadata{Index: new(srcApp.AppliedIndex()), Term: new(term), ConfState: &raftpb.ConfState{Voters: []uint64{1}}},
		Data:     buf.Bytes(),
	}
	// stored is a directory where the Ready loop stored snap, then the
	// process died.
	stored := func() string {
		dir := t.TempDir()
		db := openDB(t, dir)
		st, err := OpenStorage(db)
		if err != nil {
			t.Fatal(err)
		}
		stageData(t, st, snap.GetMetadata(), snap.GetData())
		if err := st.save(&raftpb.HardState{Term: new(term), Commit: snap.Metadata.Index}, nil, snap, true); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	db := openDB(t, stored())
	defer db.Close()
	if _, err := Start(testConfig(t, 1), db, newKVApplier(t, db), nil); !errors.Is(err, ErrSnapshotUnsupported) {
		t.Fatalf("Start without a restorer = %v, want ErrSnapshotUnsupported", err)
	}

	db = openDB(t, stored())
	defer db.Close()
	app := newKVApplier(t, db)
	if app.AppliedIndex() != 0 {
		t.Fatal("state present before the restore")
	}
	n, err := Start(snapConfig(t, 1), db, snapKVApplier{app}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if app.AppliedIndex() != snap.GetMetadata().GetIndex() || !slices.Equal(app.data(t), want) || app.restored() != 1 {
		t.Fatalf("after Start: applied %d, data %d entries; want %d, %d", app.AppliedIndex(), len(app.data(t)), snap.GetMetadata().GetIndex(), len(want))
	}
	waitLeader(t, 5*time.Second, n)
	proposeUntilApplied(t, n.Propose, "after", func() bool { d := app.data(t); return d[len(d)-1] == "after" })
}

func TestSnapshotFilesAfterCrash(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	st, err := OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.save(&raftpb.HardState{Term: new(uint64(1)), Commit: new(uint64(5))}, ents(1, 1, 5), nil, true); err != nil {
		t.Fatal(err)
	}
	md := &raftpb.SnapshotMetadata{Index: new(uint64(4)), Term: new(uint64(1)), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}
	if ok, err := st.createSnapshot(md, func(w io.Writer) error { _, err := w.Write([]byte("four")); return err }); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// Leftovers of crashes: a half-written file and a published one that was
	// never recorded.
	fs, sdir := db.FS(), db.SnapshotDir()
	for _, name := range []string{snapFileName(5, 1) + snapTmpExt, snapFileName(9, 2), snapFileName(7, 2) + snapRecvExt,
		snapFileName(8, 2) + snapRecvExt + snapTmpExt} {
		f, err := fs.Create(fs.PathJoin(sdir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("partial")); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// A stale snapshot is not installed over a newer one.
	old := &raftpb.SnapshotMetadata{Index: new(uint64(3)), Term: new(uint64(1))}
	if ok, err := st.createSnapshot(old, func(w io.Writer) error { return nil }); ok || err != nil {
		t.Fatalf("older snapshot installed: %v, %v", ok, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, dir)
	st, err = OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := db.FS().List(db.SnapshotDir())
	if !slices.Equal(names, []string{snapFileName(4, 1)}) {
		t.Fatalf("snapshot directory after reopen: %q", names)
	}
	if snap, err := st.Snapshot(); err != nil || snap.GetMetadata().GetIndex() != 4 || currentData(t, st) != "four" {
		t.Fatalf("Snapshot() = %v, %v", snap, err)
	}

	// A corrupt file: raft is told to retry, a new snapshot is asked for.
	path := db.FS().PathJoin(db.SnapshotDir(), snapFileName(4, 1))
	f, err := db.FS().OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), snapFileHeaderLen+1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Sending it fails at the end of the file, before a peer could take
	// it, and a new snapshot is asked for.
	rc, _, err := st.OpenSnapshotFile(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, ErrCorruptLog) || !st.wantSnapshot.Load() {
		t.Fatalf("sending a corrupt file = %v, want ErrCorruptLog and a new snapshot wanted", err)
	}
	// A damaged header is found before raft is handed the snapshot.
	f, err = db.FS().OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st.wantSnapshot.Store(false)
	if _, err := st.Snapshot(); !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) || !st.wantSnapshot.Load() {
		t.Fatalf("Snapshot() of a corrupt file = %v, want ErrSnapshotTemporarilyUnavailable and a new snapshot wanted", err)
	}
	// A missing file is corruption at open.
	if err := db.FS().Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	if _, err := OpenStorage(db); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("OpenStorage without the snapshot file = %v, want ErrCorruptLog", err)
	}
}

// TestCompactionRacesReads: reads of the log concurrent with compaction get
// entries or ErrCompacted, never an error raft would panic on.
func TestCompactionRacesReads(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	st, err := OpenStorage(db)
	if err != nil {
		t.Fatal(err)
	}
	const last = 2000
	if err := st.save(&raftpb.HardState{Term: new(uint64(1)), Commit: new(uint64(last))}, ents(1, 1, last), nil, false); err != nil {
		t.Fatal(err)
	}
	md := &raftpb.SnapshotMetadata{Index: new(uint64(last)), Term: new(uint64(1))}
	if _, err := st.createSnapshot(md, func(w io.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(r)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				lo := uint64(1 + rng.Intn(last-10))
				if _, err := st.Entries(lo, lo+10, 1<<20); err != nil && !errors.Is(err, raft.ErrCompacted) {
					errc <- fmt.Errorf("Entries(%d): %w", lo, err)
					return
				}
				if _, err := st.Term(lo); err != nil && !errors.Is(err, raft.ErrCompacted) {
					errc <- fmt.Errorf("Term(%d): %w", lo, err)
					return
				}
			}
		}()
	}
	for i := uint64(5); i < last-10; i += 5 {
		if err := st.Compact(i); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestCrashKeepsAcknowledged runs a node on a file system that can
// simulate a machine crash (only synced data survives) and crashes it at
// many moments while it applies, snapshots and compacts: every restart
// comes up, applies nothing twice, and keeps every entry that had been
// acknowledged (applied) before the crash.
func TestCrashKeepsAcknowledged(t *testing.T) {
	fs := vfs.NewCrashableMem()
	c := emptyCluster(t, []uint64{1}, 1)
	c.dirs[1], c.fss[1] = "/db", fs
	c.start(1, false)
	type crash struct {
		fs    *vfs.MemFS
		acked []string
	}
	var crashes []crash
	for round := range 12 {
		c.propose(fmt.Sprintf("r%02d-", round), 17)
		// Everything applied so far was acknowledged; crash "now".
		acked := c.apps[1].data(t)
		crashes = append(crashes, crash{fs.CrashClone(vfs.CrashCloneCfg{}), acked})
	}
	if firstIndex(c.nodes[1]) == 1 {
		t.Fatal("the log was never compacted: the test does not cover compaction")
	}
	c.stop(1)

	for i, cr := range crashes {
		db, err := storage.Open(storage.Options{Dir: "/db", FS: cr.fs})
		if err != nil {
			t.Fatalf("crash %d: open: %v", i, err)
		}
		app := newKVApplier(t, db)
		n, err := Start(snapConfig(t, 1), db, snapKVApplier{app}, nil)
		if err != nil {
			t.Fatalf("crash %d: start: %v", i, err)
		}
		waitFor(t, 10*time.Second, "the acknowledged entries", func() bool { return len(app.data(t)) >= len(cr.acked) })
		if got := app.data(t); !slices.Equal(got[:len(cr.acked)], cr.acked) {
			t.Fatalf("crash %d: data after restart differs from what was acknowledged", i)
		}
		n.Stop()
		if err := n.Err(); err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
		db.Close()
	}
}

// TestCrashWhileReceivingSnapshot crashes a follower at many moments while
// it receives and restores a snapshot: every crash image starts (restoring
// a stored snapshot if the crash came before the restore) and is never
// behind what it stored.
func TestCrashWhileReceivingSnapshot(t *testing.T) {
	ids := []uint64{1, 2, 3}
	fs := vfs.NewCrashableMem()
	c := emptyCluster(t, ids, ids...)
	c.dirs[1], c.dirs[2], c.dirs[3], c.fss[3] = t.TempDir(), t.TempDir(), "/db", fs
	for _, id := range ids {
		c.start(id, false)
	}
	c.propose("a", 5)
	c.converged(ids...)
	// Node 3 must be a follower for the test to mean anything.
	for c.leader().Status().ID == 3 {
		c.leader().TransferLeadership(context.Background(), 1)
		waitFor(t, 5*time.Second, "a leader other than 3", func() bool {
			l := c.leader()
			return l.Status().ID != 3
		})
	}
	lagLast := lastIndex(c.nodes[3])
	c.nw.partition(3, true)
	c.propose("b", 120)
	waitFor(t, 10*time.Second, "compaction past node 3", func() bool {
		return firstIndex(c.nodes[1]) > lagLast+1 && firstIndex(c.nodes[2]) > lagLast+1
	})

	var images []*vfs.MemFS
	c.nw.partition(3, false)
	target := c.apps[1].AppliedIndex()
	deadline := time.Now().Add(20 * time.Second)
	for c.apps[3].AppliedIndex() < target {
		if time.Now().After(deadline) {
			t.Fatal("node 3 did not catch up")
		}
		images = append(images, fs.CrashClone(vfs.CrashCloneCfg{}))
		time.Sleep(time.Millisecond)
	}
	images = append(images, fs.CrashClone(vfs.CrashCloneCfg{}))
	if c.apps[3].restored() == 0 {
		t.Fatal("node 3 caught up without a snapshot")
	}
	c.stop(3)

	sawStored := false
	for i, img := range images {
		db, err := storage.Open(storage.Options{Dir: "/db", FS: img})
		if err != nil {
			t.Fatalf("image %d: open: %v", i, err)
		}
		app := newKVApplier(t, db)
		cfg := snapConfig(t, 3, ids...)
		cfg.Join = true
		n, err := Start(cfg, db, snapKVApplier{app}, nil)
		if err != nil {
			t.Fatalf("image %d: start: %v", i, err)
		}
		snapIdx := n.Storage().SnapshotMetadata().GetIndex()
		if snapIdx > lagLast {
			sawStored = true
		}
		if app.AppliedIndex() < snapIdx || app.AppliedIndex()+1 < firstIndex(n) {
			t.Fatalf("image %d: applied %d, snapshot %d, first index %d", i, app.AppliedIndex(), snapIdx, firstIndex(n))
		}
		n.Stop()
		if err := n.Err(); err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		db.Close()
	}
	if !sawStored {
		t.Fatal("no crash image had stored the snapshot: the test covered nothing")
	}
	t.Logf("%d crash images started", len(images))
}

// currentData reads the data of st's current snapshot from its file.
func currentData(t *testing.T, st *Storage) string {
	t.Helper()
	_, fr, err := st.openCurrentSnapshot()
	if err != nil || fr == nil {
		t.Fatalf("open the current snapshot: %v", err)
	}
	defer fr.Close()
	b, err := io.ReadAll(fr.Data())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
