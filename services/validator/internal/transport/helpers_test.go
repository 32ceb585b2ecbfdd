package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/peercert"
)

// checkLeaks fails the test if goroutines started by the transport outlive
// it. Call it first, so that its cleanup runs after every other one.
func checkLeaks(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := transportGoroutines()
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d transport goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func transportGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/transport.(*Transport)") || strings.Contains(g, "internal/transport.(*peer)") {
			out = append(out, g)
		}
	}
	return out
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

func testLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

// testConfig is a transport config with test-sized timeouts on a free
// loopback port.
func testConfig(t testing.TB, id uint64) Config {
	return Config{
		NodeID:       id,
		ClusterID:    "test-cluster",
		ListenAddr:   "127.0.0.1:0",
		DialTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
		BackoffMin:   5 * time.Millisecond,
		BackoffMax:   100 * time.Millisecond,
		Logger:       testLogger(t),
	}
}

func newTransport(t testing.TB, cfg Config) *Transport {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// startPair starts transports 1 and 2 that know each other, bound to
// recorders.
func startPair(t testing.TB, mod func(*Config)) (a, b *Transport, ra, rb *recorder) {
	t.Helper()
	ca, cb := testConfig(t, 1), testConfig(t, 2)
	if mod != nil {
		mod(&ca)
		mod(&cb)
	}
	a, b = newTransport(t, ca), newTransport(t, cb)
	ra, rb = newRecorder(), newRecorder()
	must(t, a.AddPeer(2, b.Addr()))
	must(t, b.AddPeer(1, a.Addr()))
	must(t, a.Start(ra))
	must(t, b.Start(rb))
	return a, b, ra, rb
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

type snapReport struct {
	id     uint64
	status raft.SnapshotStatus
}

// recorder is a fake Raft that records what the transport hands it.
type recorder struct {
	mu          sync.Mutex
	msgs        []*raftpb.Message
	unreachable map[uint64]int
	snaps       []snapReport
	// step, when set, runs before a message is recorded; its error is
	// returned from Step.
	step func(context.Context, *raftpb.Message) error
}

func newRecorder() *recorder { return &recorder{unreachable: map[uint64]int{}} }

func (r *recorder) Step(ctx context.Context, m *raftpb.Message) error {
	r.mu.Lock()
	step := r.step
	r.mu.Unlock()
	if step != nil {
		if err := step(ctx, m); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
	return nil
}

// OpenSnapshotFile serves the data a test put inline in the message, as
// the sender's snapshot file.
func (r *recorder) OpenSnapshotFile(m *raftpb.Message) (io.ReadCloser, int64, error) {
	data := m.GetSnapshot().GetData()
	return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
}

// ReceiveSnapshot reads the data back into the message and steps it.
func (r *recorder) ReceiveSnapshot(ctx context.Context, m *raftpb.Message, data io.Reader, size int64) error {
	b, err := io.ReadAll(data)
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return fmt.Errorf("snapshot stream ended after %d of %d bytes", len(b), size)
	}
	m.Snapshot.Data = b
	return r.Step(ctx, m)
}

func (r *recorder) ReportUnreachable(id uint64) {
	r.mu.Lock()
	r.unreachable[id]++
	r.mu.Unlock()
}

func (r *recorder) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	r.mu.Lock()
	r.snaps = append(r.snaps, snapReport{id, status})
	r.mu.Unlock()
}

func (r *recorder) count(typ raftpb.MessageType) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if m.GetType() == typ {
			n++
		}
	}
	return n
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) unreachableCount(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[id]
}

func (r *recorder) snapReports() []snapReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]snapReport(nil), r.snaps...)
}

func heartbeat(from, to uint64) *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(from), To: new(to), Term: new(uint64(1))}
}

func appendMsg(from, to, index uint64, payload []byte) *raftpb.Message {
	return &raftpb.Message{
		Type: raftpb.MsgApp.Enum(), From: new(from), To: new(to), Term: new(uint64(1)),
		Index: new(index), LogTerm: new(uint64(1)), Commit: new(index),
		Entries: []*raftpb.Entry{{Term: new(uint64(1)), Index: new(index + 1), Type: raftpb.EntryNormal.Enum(), Data: payload}},
	}
}

func snapMsg(from, to, index uint64, data []byte) *raftpb.Message {
	return &raftpb.Message{
		Type: raftpb.MsgSnap.Enum(), From: new(from), To: new(to), Term: new(uint64(1)),
		Snapshot: &raftpb.Snapshot{
			Data: data,
			Metadata: &raftpb.SnapshotMetadata{
				Index: new(index), Term: new(uint64(1)),
				ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}},
			},
		},
	}
}

// testPKI is a CA and node certificates it signs, generated per test.
type testPKI struct {
	t  testing.TB
	ca *peercert.CA
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	ca, err := peercert.NewCA("contentledger test CA", time.Hour)
	must(t, err)
	return &testPKI{t: t, ca: ca}
}

// node issues the certificate of node id.
func (p *testPKI) node(id uint64) tls.Certificate {
	p.t.Helper()
	n, err := p.ca.IssueNode(id, nil, time.Hour)
	must(p.t, err)
	cert, err := tls.X509KeyPair(n.CertPEM, n.KeyPEM)
	must(p.t, err)
	return cert
}

// creds are fixed credentials of node id.
func (p *testPKI) creds(id uint64) Credentials {
	cert := p.node(id)
	return staticCredentials{cert: &cert, pool: p.ca.Pool()}
}

// clientConfig is what a hand-made dialer presenting cert (none when nil)
// uses; it verifies the acceptor's chain only.
func (p *testPKI) clientConfig(cert *tls.Certificate) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: p.ca.Pool(), InsecureSkipVerify: true}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// rawHandshake dials addr (over TLS with cfg, plaintext when nil), sends h
// and returns the acceptor's raw reply bytes, or an error when the
// connection ended without one.
func rawHandshake(addr string, cfg *tls.Config, h hello) ([]byte, error) {
	raw, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(3 * time.Second))
	conn := raw
	if cfg != nil {
		tc := tls.Client(raw, cfg)
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		conn = tc
	}
	if _, err := conn.Write(appendHello(nil, h)); err != nil {
		return nil, err
	}
	var fixed [replyFixedLen]byte
	if _, err := io.ReadFull(conn, fixed[:]); err != nil {
		return nil, err
	}
	reason := make([]byte, fixed[5])
	if _, err := io.ReadFull(conn, reason); err != nil {
		return nil, err
	}
	return append(fixed[:], reason...), nil
}
