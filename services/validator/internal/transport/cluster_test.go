package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// The transport plugs into consensus in both directions.
var (
	_ consensus.Transport = (*Transport)(nil)
	_ Raft                = (*consensus.Node)(nil)
)

// kvApplier is a minimal durable state machine: the data of each normal
// entry under t/d/<index> and the applied index under t/applied, in one
// batch, so a restarted node resumes exactly where it stopped.
type kvApplier struct {
	db      *storage.DB
	mu      sync.Mutex
	applied uint64
}

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
	defer a.mu.Unlock()
	b := a.db.Pebble().NewBatch()
	defer b.Close()
	applied := a.applied
	for _, e := range ents {
		if e.Index != applied+1 {
			return fmt.Errorf("entry %d applied after %d", e.Index, applied)
		}
		if e.Membership == nil && len(e.Data) > 0 {
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
	return nil
}

func (a *kvApplier) AppliedIndex() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

func (a *kvApplier) data(t testing.TB) []string {
	t.Helper()
	lo := []byte("t/d/")
	it, err := a.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: storage.PrefixEnd(lo)})
	must(t, err)
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Value()))
	}
	return out
}

// member is one validator of a test cluster: Pebble, applier, raft node
// and transport.
type member struct {
	id   uint64
	dir  string
	addr string
	tls  Credentials
	db   *storage.DB
	app  *kvApplier
	node *consensus.Node
	tr   *Transport
}

type cluster struct {
	t       testing.TB
	ids     []uint64
	members map[uint64]*member
}

// newCluster starts a cluster of n validators wired through this
// transport, in the order the validator wires them: transport New,
// AddPeer, consensus.Start with the transport, transport Start.
func newCluster(t testing.TB, n int, tlsFor func(id uint64) Credentials) *cluster {
	t.Helper()
	c := &cluster{t: t, members: map[uint64]*member{}}
	for i := 1; i <= n; i++ {
		id := uint64(i)
		c.ids = append(c.ids, id)
		m := &member{id: id, dir: t.TempDir(), addr: "127.0.0.1:0"}
		if tlsFor != nil {
			m.tls = tlsFor(id)
		}
		c.members[id] = m
		m.tr = c.newTransport(m) // binds now, so every address is known before AddPeer
		m.addr = m.tr.Addr()
	}
	for _, id := range c.ids {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			c.stop(id)
		}
	})
	return c
}

func (c *cluster) newTransport(m *member) *Transport {
	cfg := testConfig(c.t, m.id)
	cfg.ListenAddr = m.addr
	cfg.Credentials = m.tls
	tr, err := New(cfg)
	must(c.t, err)
	return tr
}

// start starts member id (its transport is created unless it exists).
func (c *cluster) start(id uint64) {
	c.t.Helper()
	m := c.members[id]
	if m.tr == nil {
		m.tr = c.newTransport(m)
	}
	for _, other := range c.ids {
		if other != id {
			must(c.t, m.tr.AddPeer(other, c.members[other].addr))
		}
	}
	db, err := storage.Open(storage.Options{Dir: m.dir, NoSync: true, Logger: testLogger(c.t)})
	must(c.t, err)
	m.db, m.app = db, newKVApplier(c.t, db)
	m.node, err = consensus.Start(consensus.Config{
		ID:           id,
		Peers:        c.ids,
		TickInterval: 20 * time.Millisecond,
		Logger:       testLogger(c.t),
	}, m.db, m.app, m.tr)
	must(c.t, err)
	must(c.t, m.tr.Start(m.node))
}

// stop stops member id: raft node, then transport, then Pebble.
func (c *cluster) stop(id uint64) {
	m := c.members[id]
	if m.node == nil {
		return
	}
	m.node.Stop()
	if err := m.node.Err(); err != nil {
		c.t.Errorf("node %d: %v", id, err)
	}
	must(c.t, m.tr.Close())
	must(c.t, m.db.Close())
	m.node, m.tr, m.db = nil, nil, nil
}

func (c *cluster) leader(timeout time.Duration) *member {
	c.t.Helper()
	var l *member
	waitFor(c.t, timeout, "a leader known to every running member", func() bool {
		l = nil
		for _, m := range c.members {
			if m.node != nil && m.node.Status().Role == consensus.RoleLeader {
				l = m
			}
		}
		if l == nil {
			return false
		}
		for _, m := range c.members {
			if m.node != nil && m.node.Status().Leader != l.id {
				return false
			}
		}
		return true
	})
	return l
}

// propose proposes data on m until every member in ids has applied it.
func (c *cluster) propose(m *member, data string, ids ...uint64) {
	c.t.Helper()
	has := func() bool {
		for _, id := range ids {
			if !slices.Contains(c.members[id].app.data(c.t), data) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := m.node.Propose(ctx, []byte(data))
		cancel()
		if err == nil {
			until := time.Now().Add(5 * time.Second)
			for time.Now().Before(until) {
				if has() {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			continue
		}
		if !errors.Is(err, consensus.ErrNoLeader) && !errors.Is(err, consensus.ErrProposalDropped) &&
			!errors.Is(err, context.DeadlineExceeded) {
			c.t.Fatalf("propose %q: %v", data, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("proposal %q was not applied on %v in time", data, ids)
}

// sameData checks that every member in ids applied the same data, with n
// distinct items (a proposal retried after a slow commit may apply twice).
func (c *cluster) sameData(n int, ids ...uint64) {
	c.t.Helper()
	ref := c.members[ids[0]].app.data(c.t)
	if got := distinct(ref); got != n {
		c.t.Fatalf("node %d applied %d distinct items, want %d: %q", ids[0], got, n, ref)
	}
	for _, id := range ids[1:] {
		if got := c.members[id].app.data(c.t); !slices.Equal(got, ref) {
			c.t.Fatalf("node %d applied %q, node %d applied %q", id, got, ids[0], ref)
		}
	}
}

func distinct(items []string) int {
	seen := map[string]bool{}
	for _, it := range items {
		seen[it] = true
	}
	return len(seen)
}

// exercise elects a leader and replicates proposals, from the leader and
// from a follower (raft forwards a follower's MsgProp over the transport),
// to every member.
func (c *cluster) exercise(prefix string) {
	c.t.Helper()
	l := c.leader(10 * time.Second)
	var f *member
	for _, id := range c.ids {
		if id != l.id {
			f = c.members[id]
			break
		}
	}
	for i := range 10 {
		c.propose(l, fmt.Sprintf("%s-l%02d", prefix, i), c.ids...)
	}
	for i := range 5 {
		c.propose(f, fmt.Sprintf("%s-f%02d", prefix, i), c.ids...)
	}
	c.sameData(15, c.ids...)
	// Followers talk to the leader only (outside elections).
	for peer, st := range l.tr.Stats() {
		if !st.Connected || !st.InboundConnected || st.MsgsSent == 0 || st.MsgsRecv == 0 {
			c.t.Errorf("leader %d ↔ follower %d: %+v", l.id, peer, st)
		}
	}
}

func TestThreeNodeClusterOverTCP(t *testing.T) {
	checkLeaks(t)
	c := newCluster(t, 3, nil)
	c.exercise("plain")
}

func TestDeadPeerDoesNotBlockAndCatchesUp(t *testing.T) {
	checkLeaks(t)
	c := newCluster(t, 3, nil)
	l := c.leader(10 * time.Second)
	var dead, live uint64
	for _, id := range c.ids {
		if id != l.id {
			if dead == 0 {
				dead = id
			} else {
				live = id
			}
		}
	}
	for i := range 5 {
		c.propose(l, fmt.Sprintf("before%d", i), c.ids...)
	}

	c.stop(dead)

	// Send to the dead peer returns at once, whatever the queue holds.
	before := l.tr.Stats()[dead].Dropped
	flood := make([]*raftpb.Message, 3*DefaultQueueLen)
	for i := range flood {
		flood[i] = heartbeat(l.id, dead)
	}
	start := time.Now()
	for range 10 {
		l.tr.Send(flood)
	}
	// Generous: a Send that waited for the network would wait for ever
	// (nothing listens); the bound only has to survive a loaded machine.
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Send of %d messages to a dead peer took %v", 10*len(flood), took)
	}
	if st := l.tr.Stats()[dead]; st.Dropped < before+uint64(len(flood)) || st.QueueDepth > DefaultQueueLen {
		t.Fatalf("after flooding a dead peer: %+v (dropped before %d)", st, before)
	}

	// The other two keep committing.
	for i := range 10 {
		c.propose(l, fmt.Sprintf("during%d", i), l.id, live)
	}
	waitFor(t, 5*time.Second, "the dead peer to show as disconnected", func() bool {
		st := l.tr.Stats()[dead]
		return !st.Connected && st.LastError != ""
	})

	// It comes back on the same address and catches up.
	c.start(dead)
	waitFor(t, 10*time.Second, "the restarted peer to catch up", func() bool {
		return slices.Equal(c.members[dead].app.data(t), l.app.data(t))
	})
	c.sameData(15, c.ids...)
	c.propose(l, "after", c.ids...)
	st := l.tr.Stats()[dead]
	if !st.Connected || st.Reconnects == 0 {
		t.Fatalf("leader's view of the restarted peer: %+v", st)
	}
}

func TestThreeNodeClusterWithTLS(t *testing.T) {
	checkLeaks(t)
	pki := newPKI(t)
	c := newCluster(t, 3, func(id uint64) Credentials { return pki.creds(id) })
	c.exercise("tls")

	// A peer without a client certificate is refused at the TLS layer,
	// even though node 1 knows its id, and hears nothing.
	n1 := c.members[1]
	must(t, n1.tr.AddPeer(9, freeAddr(t)))
	refusedBefore := n1.tr.Totals().HandshakesRefused
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	if reply, err := rawHandshake(n1.addr, noCert, hello{version: protocolVersion, kind: kindStream, from: 9, to: 1, cluster: "test-cluster"}); err == nil || reply != nil {
		t.Fatalf("a peer without a certificate: reply %v, %v", reply, err)
	}
	waitFor(t, 5*time.Second, "the certificate-less peer to be refused", func() bool {
		return n1.tr.Totals().HandshakesRefused > refusedBefore
	})
	if st := n1.tr.Stats()[9]; st.MsgsRecv != 0 || st.InboundConnected {
		t.Fatalf("node 1 received from the certificate-less peer: %+v", st)
	}

	// A plaintext peer is refused too.
	cfg := testConfig(t, 9)
	plain := newTransport(t, cfg)
	must(t, plain.AddPeer(1, n1.addr))
	must(t, plain.Start(newRecorder()))
	refusedBefore = n1.tr.Totals().HandshakesRefused
	plain.Send([]*raftpb.Message{heartbeat(9, 1)})
	waitFor(t, 5*time.Second, "the plaintext peer to be refused", func() bool {
		return n1.tr.Totals().HandshakesRefused > refusedBefore && plain.Stats()[1].LastError != ""
	})
	if n1.tr.Stats()[9].MsgsRecv != 0 {
		t.Fatal("node 1 received from a plaintext peer")
	}
}
