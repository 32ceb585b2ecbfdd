package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{NodeID: 1, ClusterID: "c"}, true},
		{"zero id", Config{ClusterID: "c"}, false},
		{"no cluster", Config{NodeID: 1}, false},
		{"long cluster", Config{NodeID: 1, ClusterID: strings.Repeat("x", MaxClusterIDLen+1)}, false},
		{"negative queue", Config{NodeID: 1, ClusterID: "c", QueueLen: -1}, false},
		{"negative timeout", Config{NodeID: 1, ClusterID: "c", WriteTimeout: -time.Second}, false},
		{"backoff inverted", Config{NodeID: 1, ClusterID: "c", BackoffMin: time.Second, BackoffMax: time.Millisecond}, false},
		{"backoff min above default max", Config{NodeID: 1, ClusterID: "c", BackoffMin: time.Minute}, true},
		{"tiny frame", Config{NodeID: 1, ClusterID: "c", MaxFrameSize: 100}, false},
		{"huge frame", Config{NodeID: 1, ClusterID: "c", MaxFrameSize: 2 << 30}, false},
		{"negative snapshot", Config{NodeID: 1, ClusterID: "c", MaxSnapshotSize: -1}, false},
		{"bad listen", Config{NodeID: 1, ClusterID: "c", ListenAddr: "7090"}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", tc.name, err)
		}
	}
	d := Config{NodeID: 1, ClusterID: "c"}.withDefaults()
	if d.ListenAddr != DefaultListenAddr || d.QueueLen != DefaultQueueLen || d.MaxFrameSize != DefaultMaxFrameSize ||
		d.MaxSnapshotSize != DefaultMaxSnapshotSize || d.BackoffMin != DefaultBackoffMin || d.BackoffMax != DefaultBackoffMax ||
		d.Logger == nil {
		t.Errorf("defaults = %+v", d)
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	lo := func(n int64) int64 { return 0 }
	hi := func(n int64) int64 { return n - 1 }
	var got []time.Duration
	for range 6 {
		got = append(got, b.next(lo))
	}
	want := []time.Duration{50, 100, 200, 400, 500, 500}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("lowest jitter: %v, want %v ms", got, want)
		}
	}
	b.reset()
	if d := b.next(hi); d != 100*time.Millisecond {
		t.Fatalf("after reset, highest jitter = %v, want 100ms", d)
	}
}

func TestPeerManagement(t *testing.T) {
	checkLeaks(t)
	a, b, ra, rb := startPair(t, nil)
	if got := a.Peers(); !maps.Equal(got, map[uint64]string{2: b.Addr()}) {
		t.Fatalf("Peers() = %v", got)
	}
	for _, tc := range []struct {
		id   uint64
		addr string
		want error
	}{
		{0, "127.0.0.1:1", ErrInvalidPeer},
		{1, "127.0.0.1:1", ErrInvalidPeer}, // itself
		{3, "no-port", ErrInvalidPeer},
		{2, "127.0.0.1:1", ErrPeerExists},
		{2, b.Addr(), nil}, // idempotent
	} {
		if err := a.AddPeer(tc.id, tc.addr); !errors.Is(err, tc.want) {
			t.Errorf("AddPeer(%d, %q) = %v, want %v", tc.id, tc.addr, err, tc.want)
		}
	}
	if err := a.UpdatePeer(5, "127.0.0.1:1"); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("UpdatePeer of an unknown peer = %v", err)
	}
	if err := a.RemovePeer(5); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("RemovePeer of an unknown peer = %v", err)
	}
	if err := a.Start(ra); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("second Start = %v", err)
	}

	a.Send([]*raftpb.Message{heartbeat(1, 2)})
	waitFor(t, 5*time.Second, "a heartbeat", func() bool { return rb.count(raftpb.MsgHeartbeat) == 1 })

	// Unknown destination: dropped, counted, reported.
	a.Send([]*raftpb.Message{heartbeat(1, 7), snapMsg(1, 7, 10, []byte("x"))})
	if got := a.Totals().DroppedUnknownPeer; got != 2 {
		t.Errorf("DroppedUnknownPeer = %d, want 2", got)
	}
	if ra.unreachableCount(7) != 1 {
		t.Errorf("unreachable reports for 7 = %d, want 1", ra.unreachableCount(7))
	}
	if got := ra.snapReports(); len(got) != 1 || got[0] != (snapReport{7, raft.SnapshotFailure}) {
		t.Errorf("snapshot reports = %v", got)
	}

	// Move peer 2 away and back: the stream follows the address.
	must(t, a.UpdatePeer(2, freeAddr(t)))
	waitFor(t, 5*time.Second, "the stream to leave the old address", func() bool { return !a.Stats()[2].Connected })
	must(t, a.UpdatePeer(2, b.Addr()))
	a.Send([]*raftpb.Message{heartbeat(1, 2)})
	waitFor(t, 5*time.Second, "a heartbeat at the restored address", func() bool {
		if rb.count(raftpb.MsgHeartbeat) < 2 {
			a.Send([]*raftpb.Message{heartbeat(1, 2)}) // the first may have been dropped while redialing
			time.Sleep(5 * time.Millisecond)
			return false
		}
		return true
	})

	// Removing a peer closes its inbound stream and refuses it from then on.
	refused := b.Totals().HandshakesRefused
	must(t, b.RemovePeer(1))
	if _, ok := b.Peers()[1]; ok {
		t.Fatal("peer 1 still listed after RemovePeer")
	}
	waitFor(t, 5*time.Second, "the removed peer to be refused", func() bool {
		a.Send([]*raftpb.Message{heartbeat(1, 2)})
		time.Sleep(2 * time.Millisecond)
		// Plaintext: a is not authenticated, it hears no reason.
		return b.Totals().HandshakesRefused > refused && strings.Contains(a.Stats()[2].LastError, refusedReason)
	})

	must(t, a.Close())
	must(t, a.Close()) // idempotent
	a.Send([]*raftpb.Message{heartbeat(1, 2)})
	if err := a.AddPeer(3, "127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddPeer after Close = %v", err)
	}
}

func TestSendBeforeStartIsDelivered(t *testing.T) {
	checkLeaks(t)
	a := newTransport(t, testConfig(t, 1))
	b := newTransport(t, testConfig(t, 2))
	rb := newRecorder()
	must(t, a.AddPeer(2, b.Addr()))
	must(t, b.AddPeer(1, a.Addr()))
	must(t, b.Start(rb))
	// a's node is not bound yet: its messages are queued and delivered,
	// and nothing panics for lack of a Raft to report to.
	a.Send([]*raftpb.Message{heartbeat(1, 2), heartbeat(1, 2)})
	waitFor(t, 5*time.Second, "messages sent before Start", func() bool { return rb.count(raftpb.MsgHeartbeat) == 2 })
	must(t, a.Start(newRecorder()))
}

func TestHandshakeRefusals(t *testing.T) {
	checkLeaks(t)
	pki := newPKI(t)
	for _, tc := range []struct {
		name   string
		mod    func(a, b *Config)
		peerID uint64 // the id a dials b as
		addB   bool   // b knows a
		want   error  // with TLS: a's certificate authenticates it, it hears why
	}{
		{"wrong cluster", func(a, b *Config) { b.ClusterID = "other-cluster" }, 2, true, ErrClusterMismatch},
		// With TLS the dialer finds out itself: b's certificate names 2.
		{"wrong receiver", nil, 3, true, ErrPeerIdentity},
		{"unknown sender", nil, 2, false, ErrUnknownSender},
	} {
		for _, withTLS := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tls=%v", tc.name, withTLS), func(t *testing.T) {
				ca, cb := testConfig(t, 1), testConfig(t, 2)
				want := tc.want
				if withTLS {
					ca.Credentials, cb.Credentials = pki.creds(1), pki.creds(2)
				} else {
					// Nobody is authenticated: the dialer learns nothing.
					want = ErrRejected
				}
				if tc.mod != nil {
					tc.mod(&ca, &cb)
				}
				a, b := newTransport(t, ca), newTransport(t, cb)
				ra, rb := newRecorder(), newRecorder()
				must(t, a.AddPeer(tc.peerID, b.Addr()))
				if tc.addB {
					must(t, b.AddPeer(1, a.Addr()))
				}
				must(t, a.Start(ra))
				must(t, b.Start(rb))

				_, err := a.dial(context.Background(), b.Addr(), kindStream, tc.peerID)
				if !errors.Is(err, want) {
					t.Fatalf("dial = %v, want %v", err, want)
				}
				if !withTLS && (!strings.Contains(err.Error(), refusedReason) || strings.Contains(err.Error(), "cluster")) {
					t.Fatalf("an unauthenticated dialer learned the reason: %v", err)
				}
				a.Send([]*raftpb.Message{heartbeat(1, tc.peerID)})
				waitFor(t, 5*time.Second, "the refusal to be recorded", func() bool {
					return b.Totals().HandshakesRefused >= 2 && a.Stats()[tc.peerID].LastError != "" && ra.unreachableCount(tc.peerID) > 0
				})
				if !strings.Contains(a.Stats()[tc.peerID].LastError, want.Error()) {
					t.Errorf("LastError = %q, want it to mention %q", a.Stats()[tc.peerID].LastError, want)
				}
				if rb.total() != 0 || a.Stats()[tc.peerID].Connected {
					t.Fatal("a refused peer got through")
				}
			})
		}
	}

	// Another protocol version is refused with a reason too.
	b := newTransport(t, testConfig(t, 2))
	must(t, b.Start(newRecorder()))
	c, err := net.Dial("tcp", b.Addr())
	must(t, err)
	defer c.Close()
	future := appendHello(nil, hello{version: protocolVersion + 1, kind: kindStream, from: 1, to: 2, cluster: "test-cluster"})
	_, err = c.Write(future)
	must(t, err)
	if err := readReply(c); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("reply to a future version = %v", err)
	}
}

func TestMalformedFrameClosesConnection(t *testing.T) {
	checkLeaks(t)
	b := newTransport(t, testConfig(t, 2))
	rb := newRecorder()
	must(t, b.AddPeer(1, freeAddr(t)))
	must(t, b.Start(rb))

	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"garbage", []byte{0, 0, 0, 3, 0xff, 0xff, 0xff}},
		{"too large", []byte{0x7f, 0, 0, 0}},
		{"wrong sender", mustFrame(t, heartbeat(5, 2))},
		{"local message", mustFrame(t, &raftpb.Message{Type: raftpb.MsgHup.Enum(), From: new(uint64(1)), To: new(uint64(2))})},
		{"snapshot on stream", mustFrame(t, snapMsg(1, 2, 5, nil))},
		{"negative type", mustFrame(t, &raftpb.Message{Type: raftpb.MessageType(-128).Enum(), From: new(uint64(1)), To: new(uint64(2))})},
	} {
		before := b.Totals().ProtocolErrors
		c, err := net.Dial("tcp", b.Addr())
		must(t, err)
		_, err = c.Write(appendHello(nil, hello{version: protocolVersion, kind: kindStream, from: 1, to: 2, cluster: "test-cluster"}))
		must(t, err)
		must(t, readReply(c))
		_, err = c.Write(append(mustFrame(t, heartbeat(1, 2)), tc.frame...))
		must(t, err)
		// The acceptor closes the connection: the read ends.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: connection still open (read %d, %v)", tc.name, n, err)
		}
		_ = c.Close()
		waitFor(t, 5*time.Second, tc.name+" counted", func() bool { return b.Totals().ProtocolErrors == before+1 })
	}
	if n := rb.count(raftpb.MsgHeartbeat); n != 6 {
		t.Fatalf("valid heartbeats before the bad frames: %d, want 6", n)
	}
	if n := rb.total(); n != 6 {
		t.Fatalf("raft received %d messages, want only the 6 valid ones", n)
	}
}

func mustFrame(t testing.TB, m *raftpb.Message) []byte {
	t.Helper()
	b, err := appendFrame(nil, m, DefaultMaxFrameSize)
	must(t, err)
	return b
}

func TestSendNeverBlocksOnUnreachablePeer(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, 1)
	cfg.QueueLen = 64
	a := newTransport(t, cfg)
	ra := newRecorder()
	must(t, a.AddPeer(2, freeAddr(t)))
	must(t, a.Start(ra))

	batch := make([]*raftpb.Message, 1000)
	for i := range batch {
		batch[i] = heartbeat(1, 2)
	}
	start := time.Now()
	for range 20 {
		a.Send(batch)
	}
	if took := time.Since(start); took > 5*time.Second { // generous: see TestDeadPeerDoesNotBlockAndCatchesUp
		t.Fatalf("20k sends to an unreachable peer took %v", took)
	}
	if st := a.Stats()[2]; st.QueueDepth > 64 || st.MsgsSent != 0 {
		t.Fatalf("stats = %+v", st)
	}
	// Every message is dropped: by Send on a full queue, or by the writer
	// draining the queue while it backs off.
	waitFor(t, 5*time.Second, "all 20k messages dropped", func() bool {
		st := a.Stats()[2]
		return st.Dropped == 20000 && st.QueueDepth == 0
	})
	waitFor(t, 5*time.Second, "unreachable reports", func() bool {
		return ra.unreachableCount(2) > 1 && strings.Contains(a.Stats()[2].LastError, "refused")
	})
	// A refused connection is no timeout.
	if st := a.Stats()[2]; st.Timeouts != 0 || a.Totals().Timeouts != 0 {
		t.Fatalf("refusals counted as timeouts: %+v", st)
	}
}

// TestStalledPeerFillsQueueWithoutBlocking: a peer that completes the
// handshake and then never reads. The writer blocks in the socket, the
// queue fills, Send keeps returning at once and drops; the write timeout
// then breaks the connection and the writer reconnects.
func TestStalledPeerFillsQueueWithoutBlocking(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	stalled := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(stalled)
				return
			}
			if _, err := readHello(c); err == nil {
				_, _ = c.Write(appendReply(nil, statusOK, ""))
			}
			stalled <- c // never read again
		}
	}()
	defer func() {
		_ = ln.Close()
		for c := range stalled {
			_ = c.Close()
		}
	}()

	cfg := testConfig(t, 1)
	cfg.QueueLen = 8
	cfg.WriteTimeout = 300 * time.Millisecond
	a := newTransport(t, cfg)
	ra := newRecorder()
	must(t, a.AddPeer(2, ln.Addr().String()))
	must(t, a.Start(ra))

	big := bytes.Repeat([]byte("x"), 256<<10)
	waitFor(t, 10*time.Second, "the queue to fill", func() bool {
		a.Send([]*raftpb.Message{appendMsg(1, 2, 1, big)})
		return a.Stats()[2].QueueDepth == 8
	})
	// With the writer stuck in the socket and the queue full, Send drops
	// (the evidence that it did not wait: a waiting Send never drops).
	a.Send([]*raftpb.Message{appendMsg(1, 2, 1, big), appendMsg(1, 2, 1, big)})
	if st := a.Stats()[2]; st.Dropped < 2 {
		t.Fatalf("full queue did not drop: %+v", st)
	}
	waitFor(t, 10*time.Second, "the write timeout and a reconnect", func() bool {
		st := a.Stats()[2]
		return strings.Contains(st.LastError, "timeout") && st.Reconnects > 0 && ra.unreachableCount(2) > 0
	})
	if st, tot := a.Stats()[2], a.Totals(); st.Timeouts == 0 || tot.Timeouts < st.Timeouts {
		t.Fatalf("the write timeout is not counted: peer %d, totals %d", st.Timeouts, tot.Timeouts)
	}
}

// TestTimeoutsAreCounted: a peer that accepts connections and never
// answers the handshake times out every dial, and a dialer that never says
// hello times out on the acceptor, where no peer is known yet: both are
// counted apart from refusals.
func TestTimeoutsAreCounted(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	silent := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(silent)
				return
			}
			silent <- c // never answers the hello
		}
	}()
	defer func() {
		_ = ln.Close()
		for c := range silent {
			_ = c.Close()
		}
	}()

	cfg := testConfig(t, 1)
	cfg.DialTimeout = 100 * time.Millisecond
	a := newTransport(t, cfg)
	ra := newRecorder()
	must(t, a.AddPeer(2, ln.Addr().String()))
	must(t, a.Start(ra))
	waitFor(t, 10*time.Second, "two handshakes timed out", func() bool {
		return a.Stats()[2].Timeouts >= 2 && ra.unreachableCount(2) >= 2
	})
	if st, tot := a.Stats()[2], a.Totals(); st.Connected || tot.Timeouts < st.Timeouts || tot.HandshakesRefused != 0 {
		t.Fatalf("peer %+v, totals %+v", st, tot)
	}

	cfg = testConfig(t, 2)
	cfg.DialTimeout = 100 * time.Millisecond
	b := newTransport(t, cfg)
	must(t, b.Start(newRecorder()))
	c, err := net.Dial("tcp", b.Addr())
	must(t, err)
	defer c.Close()
	waitFor(t, 10*time.Second, "the silent dialer timed out", func() bool { return b.Totals().Timeouts == 1 })
	if tot := b.Totals(); tot.HandshakesRefused != 1 {
		t.Fatalf("totals %+v", tot)
	}
}

func TestSnapshotOnItsOwnConnection(t *testing.T) {
	checkLeaks(t)
	a, b, ra, rb := startPair(t, nil)

	// Establish the stream first.
	a.Send([]*raftpb.Message{heartbeat(1, 2)})
	waitFor(t, 5*time.Second, "the stream", func() bool { return rb.count(raftpb.MsgHeartbeat) == 1 })
	acceptedBefore := b.Totals().ConnsAccepted

	// Raft on b holds the snapshot while heartbeats keep flowing.
	entered, release := make(chan struct{}), make(chan struct{})
	rb.mu.Lock()
	rb.step = func(ctx context.Context, m *raftpb.Message) error {
		if m.GetType() == raftpb.MsgSnap {
			close(entered)
			<-release
		}
		return nil
	}
	rb.mu.Unlock()

	data := bytes.Repeat([]byte("snapshot!"), (4<<20)/9)
	msg := snapMsg(1, 2, 42, data)
	a.Send([]*raftpb.Message{msg})
	if got := len(msg.GetSnapshot().GetData()); got != len(data) {
		t.Fatal("Send modified the snapshot message")
	}
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("snapshot never reached raft")
	}
	for range 3 {
		a.Send([]*raftpb.Message{heartbeat(1, 2)})
	}
	waitFor(t, 5*time.Second, "heartbeats while the snapshot is held", func() bool { return rb.count(raftpb.MsgHeartbeat) == 4 })
	if got := ra.snapReports(); len(got) != 0 {
		t.Fatalf("snapshot reported before raft took it: %v", got)
	}
	if got := b.Totals().ConnsAccepted; got != acceptedBefore+1 {
		t.Fatalf("connections accepted for the snapshot: %d, want 1", got-acceptedBefore)
	}
	close(release)

	waitFor(t, 5*time.Second, "the snapshot report", func() bool { return len(ra.snapReports()) == 1 })
	if got := ra.snapReports()[0]; got != (snapReport{2, raft.SnapshotFinish}) {
		t.Fatalf("report = %+v", got)
	}
	var got *raftpb.Message
	rb.mu.Lock()
	for _, m := range rb.msgs {
		if m.GetType() == raftpb.MsgSnap {
			got = m
		}
	}
	rb.mu.Unlock()
	if got == nil || !bytes.Equal(got.GetSnapshot().GetData(), data) || got.GetSnapshot().GetMetadata().GetIndex() != 42 ||
		len(got.GetSnapshot().GetMetadata().GetConfState().GetVoters()) != 3 || got.GetFrom() != 1 {
		t.Fatalf("received snapshot differs: %v", got.GetSnapshot().GetMetadata())
	}
	if st := a.Stats()[2]; st.SnapshotsSent != 1 || st.SnapshotsFailed != 0 {
		t.Fatalf("sender stats %+v", st)
	}
	// The snapshot is not counted as a stream message.
	if st := b.Stats()[1]; st.SnapshotsReceived != 1 || st.MsgsRecv != 4 {
		t.Fatalf("receiver stats %+v", st)
	}
}

func TestSnapshotFailures(t *testing.T) {
	checkLeaks(t)
	a, b, ra, rb := startPair(t, func(c *Config) { c.MaxSnapshotSize = 1 << 20 })
	expect := func(what string, n int) {
		t.Helper()
		waitFor(t, 5*time.Second, what, func() bool { return len(ra.snapReports()) == n })
		if got := ra.snapReports()[n-1]; got != (snapReport{2, raft.SnapshotFailure}) {
			t.Fatalf("%s: report %+v", what, got)
		}
	}

	// Above the sender's limit: never sent.
	a.Send([]*raftpb.Message{snapMsg(1, 2, 1, make([]byte, 1<<20+1))})
	expect("an oversized snapshot", 1)

	// Raft on the receiver refuses it.
	rb.mu.Lock()
	rb.step = func(context.Context, *raftpb.Message) error { return errors.New("raft stopped") }
	rb.mu.Unlock()
	a.Send([]*raftpb.Message{snapMsg(1, 2, 2, []byte("data"))})
	expect("a refused snapshot", 2)
	if !strings.Contains(a.Stats()[2].LastError, "raft stopped") {
		t.Fatalf("LastError = %q", a.Stats()[2].LastError)
	}

	// The receiver is gone.
	must(t, b.Close())
	a.Send([]*raftpb.Message{snapMsg(1, 2, 3, []byte("data"))})
	expect("a snapshot to a dead peer", 3)
	if st := a.Stats()[2]; st.SnapshotsFailed != 3 || st.SnapshotsSent != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSnapshotReceiverLimit: a receiver with a smaller limit refuses the
// snapshot before reading it.
func TestSnapshotReceiverLimit(t *testing.T) {
	checkLeaks(t)
	ca, cb := testConfig(t, 1), testConfig(t, 2)
	cb.MaxSnapshotSize = 1 << 10
	a, b := newTransport(t, ca), newTransport(t, cb)
	ra, rb := newRecorder(), newRecorder()
	must(t, a.AddPeer(2, b.Addr()))
	must(t, b.AddPeer(1, a.Addr()))
	must(t, a.Start(ra))
	must(t, b.Start(rb))
	a.Send([]*raftpb.Message{snapMsg(1, 2, 1, make([]byte, 64<<10))})
	waitFor(t, 5*time.Second, "the failure report", func() bool { return len(ra.snapReports()) == 1 })
	if got := ra.snapReports()[0]; got.status != raft.SnapshotFailure {
		t.Fatalf("report %+v", got)
	}
	if rb.count(raftpb.MsgSnap) != 0 {
		t.Fatal("an oversized snapshot reached raft")
	}
}

// snapSource is a snapshot file of size bytes that is never in memory:
// a deterministic byte pattern generated as it is read.
type snapSource struct {
	left int64
	pos  uint64
}

func (s *snapSource) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.left)]
	for i := range p {
		p[i] = byte((s.pos + uint64(i)) * 2654435761 >> 13)
	}
	s.pos += uint64(len(p))
	s.left -= int64(len(p))
	return len(p), nil
}

func (s *snapSource) Close() error { return nil }

// streamRaft is a fake Raft whose snapshots are streams: the sender serves
// a generated file, the receiver checksums what arrives and drops it.
type streamRaft struct {
	*recorder
	size  int64
	short bool          // serve half of size, announcing size
	got   atomic.Int64  // bytes the last ReceiveSnapshot read
	crc   atomic.Uint32 // their CRC-32C
}

func (r *streamRaft) OpenSnapshotFile(*raftpb.Message) (io.ReadCloser, int64, error) {
	if r.short {
		return &snapSource{left: r.size / 2}, r.size, nil
	}
	return &snapSource{left: r.size}, r.size, nil
}

func (r *streamRaft) ReceiveSnapshot(ctx context.Context, m *raftpb.Message, data io.Reader, size int64) error {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, data)
	r.crc.Store(h.Sum32())
	r.got.Store(n)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("stream ended after %d of %d bytes", n, size)
	}
	return r.Step(ctx, m)
}

// TestSnapshotStreamsBeyondFrameSizeInBoundedMemory: a 64 MiB snapshot
// crosses transports whose frame limit is 4 KiB, byte for byte, while
// the process allocates a small fraction of its size.
func TestSnapshotStreamsBeyondFrameSizeInBoundedMemory(t *testing.T) {
	checkLeaks(t)
	const size = 64 << 20
	small := func(c *Config) { c.MaxFrameSize = MinFrameSize; c.Logger = zap.NewNop() }
	ca, cb := testConfig(t, 1), testConfig(t, 2)
	small(&ca)
	small(&cb)
	a, b := newTransport(t, ca), newTransport(t, cb)
	ra, rb := &streamRaft{recorder: newRecorder(), size: size}, &streamRaft{recorder: newRecorder()}
	must(t, a.AddPeer(2, b.Addr()))
	must(t, b.AddPeer(1, a.Addr()))
	must(t, a.Start(ra))
	must(t, b.Start(rb))

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a.Send([]*raftpb.Message{snapMsg(1, 2, 7, nil)})
	waitFor(t, 60*time.Second, "the snapshot report", func() bool { return len(ra.snapReports()) == 1 })
	runtime.ReadMemStats(&after)

	if got := ra.snapReports()[0]; got != (snapReport{2, raft.SnapshotFinish}) {
		t.Fatalf("report %+v (sender's last error %q)", got, a.Stats()[2].LastError)
	}
	want := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(want, &snapSource{left: size}); err != nil {
		t.Fatal(err)
	}
	if rb.got.Load() != size || rb.crc.Load() != want.Sum32() || rb.count(raftpb.MsgSnap) != 1 {
		t.Fatalf("received %d bytes, crc %08x (want %d, %08x), %d MsgSnap stepped", rb.got.Load(), rb.crc.Load(),
			size, want.Sum32(), rb.count(raftpb.MsgSnap))
	}
	// Both ends together: a few chunk buffers, nowhere near the snapshot.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Fatalf("streaming %d MiB allocated %d MiB", size>>20, alloc>>20)
	}
	t.Logf("streamed %d MiB; allocated %d KiB", size>>20, (after.TotalAlloc-before.TotalAlloc)>>10)
}

// TestSnapshotStreamCutShort: a sender whose file ends before the size it
// announced fails the snapshot, and the receiver takes nothing from the
// truncated stream.
func TestSnapshotStreamCutShort(t *testing.T) {
	checkLeaks(t)
	ca, cb := testConfig(t, 1), testConfig(t, 2)
	a, b := newTransport(t, ca), newTransport(t, cb)
	ra, rb := &streamRaft{recorder: newRecorder(), size: 4 << 20, short: true}, &streamRaft{recorder: newRecorder()}
	must(t, a.AddPeer(2, b.Addr()))
	must(t, b.AddPeer(1, a.Addr()))
	must(t, a.Start(ra))
	must(t, b.Start(rb))
	a.Send([]*raftpb.Message{snapMsg(1, 2, 3, nil)})
	waitFor(t, 10*time.Second, "the failure report", func() bool { return len(ra.snapReports()) == 1 })
	if got := ra.snapReports()[0]; got != (snapReport{2, raft.SnapshotFailure}) {
		t.Fatalf("report %+v", got)
	}
	waitFor(t, 10*time.Second, "the receiver to see the stream end", func() bool { return rb.got.Load() > 0 })
	if rb.count(raftpb.MsgSnap) != 0 || b.Stats()[1].SnapshotsReceived != 0 {
		t.Fatalf("a truncated snapshot reached raft: %d bytes read", rb.got.Load())
	}
}
