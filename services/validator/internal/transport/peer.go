package transport

// The outbound side: one writer goroutine per peer.
//
// The writer owns the peer's only stream connection, so frames need no lock
// and arrive in the order Send queued them. It loops: dial (TCP, TLS,
// handshake), then move messages from the queue into a buffered writer,
// flushing whenever the queue is momentarily empty — a burst of small
// messages leaves in one system call, a lone heartbeat leaves at once.
//
// A failure (dial, refusal, write error or write timeout) reports the peer
// unreachable to raft and waits a jittered exponential backoff before the
// next dial. While it waits, the writer keeps draining the queue and drops
// what it takes: those messages are stale by the time a connection exists
// (raft resends what still matters), and a drained queue keeps Send's
// non-blocking enqueue cheap. A message lost inside a broken connection is
// likewise left to raft's retransmission.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// errRedial ends a stream whose peer moved to another address.
var errRedial = errors.New("transport: peer address changed")

// snapshotChunk is the largest write of a snapshot payload; WriteTimeout
// applies per chunk, so a big snapshot on a slow link is fine as long as it
// keeps moving.
const snapshotChunk = 1 << 20

type peer struct {
	t      *Transport
	id     uint64
	log    *zap.Logger
	queue  chan *raftpb.Message
	redial chan struct{} // capacity 1: the address changed
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the writer has exited

	mu           sync.Mutex
	addr         string
	lastErr      string
	lastErrAt    time.Time
	snapInFlight bool

	connected   atomic.Bool
	msgsSent    atomic.Uint64
	bytesSent   atomic.Uint64
	msgsRecv    atomic.Uint64
	bytesRecv   atomic.Uint64
	dropped     atomic.Uint64
	reconnects  atomic.Uint64
	snapsSent   atomic.Uint64
	snapsFailed atomic.Uint64
	snapsRecv   atomic.Uint64
	timeouts    atomic.Uint64
}

func newPeer(t *Transport, id uint64, addr string) *peer {
	p := &peer{
		t:      t,
		id:     id,
		log:    t.log.With(zap.Uint64("peer", id)),
		queue:  make(chan *raftpb.Message, t.cfg.QueueLen),
		redial: make(chan struct{}, 1),
		done:   make(chan struct{}),
		addr:   addr,
	}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	return p
}

func (p *peer) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// setAddress changes the address and tells the writer; false if unchanged.
func (p *peer) setAddress(addr string) bool {
	p.mu.Lock()
	changed := p.addr != addr
	p.addr = addr
	p.mu.Unlock()
	if changed {
		select {
		case p.redial <- struct{}{}:
		default: // a redial is already pending
		}
	}
	return changed
}

func (p *peer) setError(err error) {
	p.mu.Lock()
	p.lastErr, p.lastErrAt = err.Error(), time.Now()
	p.mu.Unlock()
}

// countTimeout counts err when a deadline ended it. A stopping peer's
// connections are cut by deadlines set to now: those are no timeouts.
func (p *peer) countTimeout(err error) {
	if isTimeout(err) && p.ctx.Err() == nil {
		p.timeouts.Add(1)
		p.t.stats.timeouts.Add(1)
	}
}

func (p *peer) drop(n uint64) {
	p.dropped.Add(n)
	p.t.stats.dropped.Add(n)
}

func (p *peer) stats() PeerStats {
	p.mu.Lock()
	st := PeerStats{Addr: p.addr, LastError: p.lastErr, LastErrorAt: p.lastErrAt}
	p.mu.Unlock()
	st.Connected = p.connected.Load()
	st.MsgsSent = p.msgsSent.Load()
	st.BytesSent = p.bytesSent.Load()
	st.MsgsRecv = p.msgsRecv.Load()
	st.BytesRecv = p.bytesRecv.Load()
	st.Dropped = p.dropped.Load()
	st.QueueDepth = len(p.queue)
	st.Reconnects = p.reconnects.Load()
	st.SnapshotsSent = p.snapsSent.Load()
	st.SnapshotsFailed = p.snapsFailed.Load()
	st.SnapshotsReceived = p.snapsRecv.Load()
	st.Timeouts = p.timeouts.Load()
	return st
}

// run is the peer's writer goroutine.
func (p *peer) run() {
	defer p.t.wg.Done()
	defer close(p.done)
	b := backoff{min: p.t.cfg.BackoffMin, max: p.t.cfg.BackoffMax}
	everConnected := false
	failing := false // log the first failure of a series, not every retry
	for {
		addr := p.address()
		conn, err := p.t.dial(p.ctx, addr, kindStream, p.id)
		if err == nil {
			if everConnected {
				p.reconnects.Add(1)
			}
			everConnected, failing = true, false
			p.connected.Store(true)
			p.log.Info("raft peer connected", zap.String("addr", addr))
			since := time.Now()
			err = p.stream(conn)
			p.connected.Store(false)
			_ = conn.Close()
			// Start the backoff over only after a connection that held:
			// a peer that accepts and then breaks every connection at
			// once must not be redialed (and logged) at BackoffMin.
			if time.Since(since) >= p.t.cfg.BackoffMax {
				b.reset()
			}
		}
		if p.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRedial) {
			continue // the new address is tried at once
		}
		p.countTimeout(err)
		p.setError(err)
		if !failing {
			p.log.Warn("raft peer unreachable", zap.String("addr", addr), zap.Error(err))
			failing = true
		} else {
			p.log.Debug("raft peer still unreachable", zap.String("addr", addr), zap.Error(err))
		}
		p.t.reportUnreachable(p.id)
		if !p.wait(b.next(rand.Int64N)) {
			return
		}
	}
}

// wait sleeps d before the next dial, dropping whatever is queued in the
// meantime (run has just reported the peer unreachable, which covers
// these); false when the peer is stopping. An address change cuts it
// short.
func (p *peer) wait(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return false
		case <-p.redial:
			return true
		case <-timer.C:
			return true
		case <-p.queue:
			p.drop(1)
		}
	}
}

// stream writes queued messages to conn until an error, a stop or an
// address change.
func (p *peer) stream(conn net.Conn) error {
	// Closing the connection is what interrupts a blocked write on stop.
	stop := context.AfterFunc(p.ctx, func() { _ = conn.Close() })
	defer stop()
	w := bufio.NewWriterSize(&deadlineWriter{conn: conn, timeout: p.t.cfg.WriteTimeout}, streamBufSize)
	var buf []byte
	for {
		select {
		case <-p.ctx.Done():
			return p.ctx.Err()
		case <-p.redial:
			return errRedial
		case m := <-p.queue:
			var err error
			buf, err = appendFrame(buf[:0], m, p.t.cfg.MaxFrameSize)
			if err != nil {
				// Raft will resend it and it will fail again: this is a
				// configuration error (MaxFrameSize below raft's
				// MaxSizePerMsg, or one huge entry), worth an error line.
				p.drop(1)
				p.setError(err)
				p.log.Error("raft message dropped", zap.Error(err))
				continue
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			p.msgsSent.Add(1)
			p.t.stats.msgsSent.Add(1)
			p.bytesSent.Add(uint64(len(buf)))
			if len(p.queue) == 0 {
				if err := w.Flush(); err != nil {
					return err
				}
			}
			if cap(buf) > keepBufSize {
				buf = nil
			}
		}
	}
}

// deadlineWriter bounds every write with a fresh deadline: a peer that
// stops reading fails the write after timeout instead of blocking the
// writer forever (and with it, eventually, every message to that peer).
type deadlineWriter struct {
	conn    net.Conn
	timeout time.Duration
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return 0, err
	}
	return w.conn.Write(b)
}

// deadlineReader is deadlineWriter's counterpart for reading a snapshot
// payload: each read must make progress within timeout.
type deadlineReader struct {
	conn    net.Conn
	r       io.Reader
	timeout time.Duration
}

func (r *deadlineReader) Read(b []byte) (int, error) {
	if err := r.conn.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return 0, err
	}
	return r.r.Read(b)
}

// dial connects to addr and completes the handshake for a connection of
// kind to peer to, all within DialTimeout. The returned connection has no
// deadline set.
func (t *Transport) dial(ctx context.Context, addr string, kind byte, to uint64) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = raw.SetDeadline(deadline)
	// Close (or RemovePeer) during the handshake must not wait for the
	// deadline.
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Now()) })
	conn, err := t.handshake(ctx, raw, addr, kind, to)
	if !stop() && err == nil {
		err = ctx.Err() // the deadline may have been cut short; don't use it
	}
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}

func (t *Transport) handshake(ctx context.Context, raw net.Conn, addr string, kind byte, to uint64) (net.Conn, error) {
	conn := raw
	if t.cfg.Credentials != nil {
		tc := tls.Client(raw, clientTLS(t.cfg.Credentials, to))
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	h := hello{version: protocolVersion, kind: kind, from: t.cfg.NodeID, to: to, cluster: t.cfg.ClusterID}
	if _, err := conn.Write(appendHello(nil, h)); err != nil {
		return nil, fmt.Errorf("send handshake to %s: %w", addr, err)
	}
	// The reply is the only thing the acceptor ever writes before a
	// snapshot's acknowledgement, so reading it unbuffered consumes nothing
	// else.
	if err := readReply(conn); err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	return conn, nil
}

// sendSnapshot sends a MsgSnap on its own connection and reports the
// outcome to raft. It runs on its own goroutine (counted in t.wg by Send).
func (p *peer) sendSnapshot(m *raftpb.Message) {
	defer p.t.wg.Done()
	log := p.log.With(zap.Uint64("snapshot_index", m.GetSnapshot().GetMetadata().GetIndex()))

	p.mu.Lock()
	busy := p.snapInFlight
	p.snapInFlight = true
	p.mu.Unlock()
	if busy {
		// Raft sends one snapshot per follower and waits for its report;
		// a second one means it gave up on the first, and the first's
		// report will follow. Two concurrent copies would only compete.
		log.Warn("snapshot dropped: another one to this peer is in flight")
		p.snapsFailed.Add(1)
		p.t.reportSnapshot(p.id, raft.SnapshotFailure)
		return
	}
	defer func() {
		p.mu.Lock()
		p.snapInFlight = false
		p.mu.Unlock()
	}()

	start := time.Now()
	err := p.writeSnapshot(m)
	if err != nil {
		p.snapsFailed.Add(1)
		p.countTimeout(err)
		p.setError(fmt.Errorf("snapshot: %w", err))
		log.Warn("snapshot send failed", zap.Error(err))
		p.t.reportUnreachable(p.id)
		p.t.reportSnapshot(p.id, raft.SnapshotFailure)
		return
	}
	p.snapsSent.Add(1)
	log.Info("snapshot sent", zap.Duration("took", time.Since(start)))
	p.t.reportSnapshot(p.id, raft.SnapshotFinish)
}

func (p *peer) writeSnapshot(m *raftpb.Message) error {
	rf := p.t.raftOrNil()
	if rf == nil {
		return errors.New("no raft node bound yet")
	}
	data, size, err := rf.OpenSnapshotFile(m)
	if err != nil {
		return err
	}
	defer data.Close()
	if size > p.t.cfg.MaxSnapshotSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrSnapshotTooLarge, size, p.t.cfg.MaxSnapshotSize)
	}
	hdr, err := appendFrame(nil, snapshotHeader(m), p.t.cfg.MaxFrameSize)
	if err != nil {
		return err
	}
	hdr = appendSnapshotSize(hdr, size)

	conn, err := p.t.dial(p.ctx, p.address(), kindSnapshot, p.id)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(p.ctx, func() { _ = conn.Close() })
	defer stop()

	w := &deadlineWriter{conn: conn, timeout: p.t.cfg.WriteTimeout}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	// One chunk in memory at a time; WriteTimeout applies to each.
	if n, err := io.CopyBuffer(w, io.LimitReader(data, size), make([]byte, snapshotChunk)); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("the snapshot file ended after %d of %d bytes", n, size)
	}
	// The acknowledgement comes after the receiver has read everything and
	// raft has taken the message.
	if err := conn.SetReadDeadline(time.Now().Add(p.t.cfg.WriteTimeout + p.t.cfg.StepTimeout)); err != nil {
		return err
	}
	if err := readReply(conn); err != nil {
		if p.ctx.Err() != nil {
			return p.ctx.Err()
		}
		return err
	}
	p.bytesSent.Add(uint64(len(hdr)) + uint64(size))
	return nil
}
