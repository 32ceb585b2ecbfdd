package transport

// The inbound side: an accept loop and one goroutine per connection.
//
// Nothing is trusted before the handshake: an accepted connection gets
// DialTimeout to complete TLS and the hello, the hello is checked (the
// certificate names its sender, version, cluster, receiver, known sender)
// and refused; only an authenticated member hears the reason, which it
// logs. After it, each frame's length is checked before its buffer is
// allocated and each message is checked against the hello (decodeMessage);
// anything malformed closes the connection — the sender reconnects, and a
// broken peer shows up in ProtocolErrors and its LastError rather than in
// raft.
//
// Received messages go to Raft.Step one at a time in arrival order. A slow
// Step holds back only this connection's reads, which fills the sender's
// socket and then its queue, where it drops: backpressure ends at the
// sender's non-blocking Send, never at a Ready loop.
//
// A peer has at most one inbound connection of each kind: a newer one (the
// peer reconnected while its old connection was half-dead) replaces the
// older one, which is closed.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/peercert"
)

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration // after temporary accept errors, like net/http
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.log.Warn("accept failed; retrying", zap.Error(err), zap.Duration("in", delay))
			select {
			case <-time.After(delay):
				continue
			case <-t.ctx.Done():
				return
			}
		}
		delay = 0
		t.stats.connsAccepted.Add(1)
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serveConn(c)
	}
}

func (t *Transport) untrack(c net.Conn, key *streamKey) {
	t.mu.Lock()
	delete(t.conns, c)
	if key != nil && t.streams[*key] == c {
		delete(t.streams, *key)
	}
	t.mu.Unlock()
}

// refusedReason is all a dialer that is not an authenticated member learns
// of a refusal: not the cluster id, not which check failed. The acceptor's
// log has the details.
const refusedReason = "refused; the reason is in the receiving node's log"

// refuse counts and logs a refused handshake and, when reply is set, tells
// the dialer: why with status when it is authenticated, a generic
// statusRejected otherwise. (Nothing is written to a connection that
// failed TLS or does not speak the protocol: it could not read it.)
func (t *Transport) refuse(c net.Conn, remote string, reply, authenticated bool, status byte, err error) {
	t.stats.handshakesRefused.Add(1)
	if isTimeout(err) && t.ctx.Err() == nil {
		// Before the hello names the sender: no peer to count it on.
		t.stats.timeouts.Add(1)
	}
	if errors.Is(err, io.EOF) {
		// Closed before saying anything: a TCP health probe or a dialer
		// that gave up. Not worth a warning every probe period.
		t.log.Debug("raft peer connection closed before its handshake", zap.String("remote", remote), zap.Error(err))
		return
	}
	t.log.Warn("raft peer connection refused", zap.String("remote", remote), zap.Error(err))
	if !reply {
		return
	}
	reason := err.Error()
	if !authenticated && status != statusBadVersion {
		// (Another version hears only the versions: nothing of the cluster.)
		status, reason = statusRejected, refusedReason
	}
	_, _ = c.Write(appendReply(nil, status, reason))
}

func (t *Transport) serveConn(raw net.Conn) {
	defer t.wg.Done()
	var key *streamKey
	defer func() {
		t.untrack(raw, key)
		_ = raw.Close()
	}()
	remote := raw.RemoteAddr().String()

	_ = raw.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	conn := raw
	var certID uint64 // the node the client's certificate names; 0 without TLS
	if t.serverTLS != nil {
		tc := tls.Server(raw, t.serverTLS)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			t.refuse(raw, remote, false, false, 0, fmt.Errorf("tls handshake: %w", err))
			return
		}
		// Verified in the handshake (serverTLS): chained to the CA and
		// naming one node.
		certID, _ = peercert.NodeID(tc.ConnectionState().PeerCertificates[0])
		conn = tc
	}
	r := bufio.NewReaderSize(conn, streamBufSize)
	h, err := readHello(r)
	if err != nil {
		// Only a peer of another version understands a reply.
		t.refuse(conn, remote, errors.Is(err, ErrVersionMismatch), false, statusBadVersion, fmt.Errorf("handshake: %w", err))
		return
	}
	authenticated := certID != 0 && certID == h.from
	status, err := t.admit(h, certID)
	if err != nil {
		t.refuse(conn, remote, true, authenticated, status, err)
		return
	}
	key = &streamKey{from: h.from, kind: h.kind}
	p, ok := t.register(*key, raw)
	if !ok {
		return // closing, or the sender was just removed
	}
	if _, err := conn.Write(appendReply(nil, statusOK, "")); err != nil {
		return
	}
	_ = raw.SetDeadline(time.Time{})

	log := t.log.With(zap.Uint64("peer", h.from), zap.String("remote", remote))
	if h.kind == kindStream {
		err = t.readStream(r, h, p)
	} else {
		err = t.receiveSnapshot(conn, r, h, p, log)
	}
	switch {
	case err == nil, t.ctx.Err() != nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// The peer closed, was replaced or removed, or we are closing.
	case errors.Is(err, ErrProtocol), errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrSnapshotTooLarge):
		t.stats.protocolErrors.Add(1)
		p.setError(fmt.Errorf("inbound: %w", err))
		log.Warn("closing raft peer connection on a protocol error", zap.Error(err))
	default:
		// Only a snapshot's reads and acknowledgement have deadlines: a
		// stalled sender, or one that stopped reading.
		p.countTimeout(err)
		log.Debug("raft peer connection closed", zap.Error(err))
	}
}

// admit checks a hello: with TLS, that the client's certificate names its
// sender (certID); then cluster, receiver and a registered sender.
func (t *Transport) admit(h hello, certID uint64) (byte, error) {
	switch {
	case t.serverTLS != nil && certID != h.from:
		t.stats.identityRefused.Add(1)
		return statusRejected, fmt.Errorf("%w: the certificate names node %d, the handshake claims to come from %d",
			ErrPeerIdentity, certID, h.from)
	case h.cluster != t.cfg.ClusterID:
		return statusClusterMismatch, fmt.Errorf("%w: peer %d is in cluster %q, this node in %q",
			ErrClusterMismatch, h.from, h.cluster, t.cfg.ClusterID)
	case h.to != t.cfg.NodeID:
		return statusWrongReceiver, fmt.Errorf("%w: peer %d dialed node %d, this is node %d",
			ErrWrongReceiver, h.from, h.to, t.cfg.NodeID)
	case t.peer(h.from) == nil:
		return statusUnknownSender, fmt.Errorf("%w: %d is not a peer of node %d", ErrUnknownSender, h.from, t.cfg.NodeID)
	}
	return statusOK, nil
}

// register makes c the current connection of key, closing the one it
// replaces; false when the transport is closing or the sender was removed
// since admit (RemovePeer closes only the connections registered before).
func (t *Transport) register(key streamKey, c net.Conn) (*peer, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[key.from]
	if t.closed || p == nil {
		return nil, false
	}
	if old, ok := t.streams[key]; ok && old != c {
		_ = old.Close()
	}
	t.streams[key] = c
	return p, true
}

func (t *Transport) raftOrNil() Raft {
	if ref := t.raft.Load(); ref != nil {
		return ref.r
	}
	return nil
}

// readStream hands every frame of a stream to raft until an error.
func (t *Transport) readStream(r io.Reader, h hello, p *peer) error {
	rf := t.raftOrNil() // bound: connections are accepted only after Start
	var buf []byte
	for {
		body, err := readFrame(r, t.cfg.MaxFrameSize, &buf)
		if err != nil {
			return err
		}
		m, err := decodeMessage(body, h)
		if err != nil {
			return err
		}
		p.msgsRecv.Add(1)
		p.bytesRecv.Add(uint64(frameHdrLen + len(body)))
		t.stats.msgsRecv.Add(1)
		if cap(buf) > keepBufSize {
			buf = nil
		}
		ctx, cancel := context.WithTimeout(t.ctx, t.cfg.StepTimeout)
		err = rf.Step(ctx, m)
		cancel()
		if err != nil {
			if t.ctx.Err() != nil {
				return t.ctx.Err()
			}
			if isMalformed(err) {
				// No correct peer sends it: the sender is broken or
				// hostile, like one that sends a malformed frame.
				return fmt.Errorf("%w: refused by raft: %w", ErrProtocol, err)
			}
			// Dropped: raft retransmits what matters, and a refusal that
			// depends on this node's state (a stale message, a peer that
			// lost its data) is not a reason to close the connection.
			t.stats.stepErrors.Add(1)
		}
	}
}

// isMalformed reports whether a Step error says that no correct peer sends
// the message (consensus.ErrMalformedMessage has Malformed() == true), as
// opposed to a refusal that depends on the receiver's state or a timeout.
func isMalformed(err error) bool {
	var m interface{ Malformed() bool }
	return errors.As(err, &m) && m.Malformed()
}

// receiveSnapshot reads one snapshot, hands it to raft and acknowledges it.
func (t *Transport) receiveSnapshot(conn net.Conn, r *bufio.Reader, h hello, p *peer, log *zap.Logger) error {
	rf := t.raftOrNil()
	// Header and payload must keep arriving; a stalled sender is dropped
	// after WriteTimeout without progress.
	dr := &deadlineReader{conn: conn, r: r, timeout: t.cfg.WriteTimeout}
	var buf []byte
	body, err := readFrame(dr, t.cfg.MaxFrameSize, &buf)
	if err != nil {
		return err
	}
	m, err := decodeMessage(body, h)
	if err != nil {
		return err
	}
	size, err := readSnapshotSize(dr, t.cfg.MaxSnapshotSize)
	if err != nil {
		_, _ = conn.Write(appendReply(nil, statusRejected, err.Error()))
		return err
	}
	// The node stores the payload as it arrives (never whole in memory)
	// and checks it before raft sees the message. Every read must still
	// make progress within WriteTimeout.
	payload := &countReader{r: io.LimitReader(dr, size)}
	err = rf.ReceiveSnapshot(t.ctx, m, payload, size)
	p.bytesRecv.Add(uint64(frameHdrLen+len(body)+8) + uint64(payload.n))
	_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	if err != nil {
		if t.ctx.Err() != nil {
			return t.ctx.Err()
		}
		t.stats.stepErrors.Add(1)
		log.Warn("received snapshot not taken by raft", zap.Int64("bytes", size), zap.Error(err))
		_, _ = conn.Write(appendReply(nil, statusRejected, "raft: "+err.Error()))
		if isMalformed(err) {
			return fmt.Errorf("%w: refused by raft: %w", ErrProtocol, err)
		}
		return nil
	}
	// A snapshot raft would ignore is taken without its data; the rest is
	// read off so that the sender sees the acknowledgement, not a reset.
	if _, err := io.Copy(io.Discard, payload); err != nil {
		return err
	}
	p.snapsRecv.Add(1)
	log.Info("snapshot received", zap.Uint64("snapshot_index", m.GetSnapshot().GetMetadata().GetIndex()), zap.Int64("bytes", size))
	_, err = conn.Write(appendReply(nil, statusOK, ""))
	return err
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
