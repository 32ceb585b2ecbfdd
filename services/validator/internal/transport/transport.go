// Package transport carries raft messages between validators over TCP: the
// production implementation of consensus.Transport.
//
// Design (DESIGN.md has the reasoning at length):
//
//   - Send never blocks the Ready loop. Each peer has a bounded queue and one
//     writer goroutine that owns one long-lived outbound connection; a full
//     queue or an unreachable peer drops the message and reports the peer
//     unreachable to raft, which retransmits.
//   - Connections are one-way and open with a handshake (magic, version,
//     cluster id, sender and receiver ids) that the acceptor checks before
//     reading any message, so a node of another cluster or a mis-addressed
//     peer never reaches raft. With Credentials, mutual TLS comes first and
//     each side checks that the other's certificate names the node it is.
//   - Snapshots travel on their own short-lived connection, so a large
//     snapshot never delays heartbeats and appends; raft learns the outcome
//     through ReportSnapshot. Their data is streamed from the sender's
//     snapshot file into the receiver's in fixed chunks, so no side holds
//     a snapshot in memory and only MaxSnapshotSize (and the receiver's
//     disk) bounds it, not MaxFrameSize.
//   - Inbound frames are length-bounded before allocation and checked
//     against the handshake; a malformed one closes the connection.
//
// Lifecycle: New binds the listener; AddPeer may be called at any time; the
// consensus node is created with the transport and bound afterwards with
// Start, which begins accepting connections. Messages sent before Start are
// queued (up to QueueLen) and delivered; reports to raft before Start are
// skipped (raft retransmits regardless). Close stops everything.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// Raft is what the transport needs from the raft node; *consensus.Node
// implements it.
type Raft interface {
	// Step hands a received message to raft. It may block until ctx ends
	// (raft holds a forwarded proposal while it knows no leader). An error
	// with a Malformed() method that returns true means no correct peer
	// sends the message: the stream it came on is closed, as for a
	// malformed frame. Other errors drop the message only.
	Step(ctx context.Context, m *raftpb.Message) error
	// ReportUnreachable tells raft that a message to id was not delivered.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft whether a snapshot sent to id arrived.
	ReportSnapshot(id uint64, status raft.SnapshotStatus)
	// OpenSnapshotFile opens the data of a MsgSnap this node sends (raft's
	// message carries only the metadata): size bytes, streamed to the peer
	// as they are read. The reader fails rather than end early if the
	// data turns out corrupt.
	OpenSnapshotFile(m *raftpb.Message) (data io.ReadCloser, size int64, err error)
	// ReceiveSnapshot takes a MsgSnap received from a peer with its data,
	// size bytes read from r, which it must consume only as it stores it:
	// the transport never holds a snapshot in memory. Its errors are told
	// to the sender; one with Malformed() == true counts as a protocol
	// error, like Step's.
	ReceiveSnapshot(ctx context.Context, m *raftpb.Message, r io.Reader, size int64) error
}

// Errors of the Transport's methods.
var (
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("transport: closed")
	// ErrAlreadyStarted is returned by a second Start.
	ErrAlreadyStarted = errors.New("transport: already started")
	// ErrUnknownPeer is returned for an id that is not a peer.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrPeerExists is returned by AddPeer for a peer registered with
	// another address (use UpdatePeer).
	ErrPeerExists = errors.New("transport: peer already exists with another address")
	// ErrInvalidPeer is returned for a peer id of 0 or this node's own id,
	// or an address that is not host:port.
	ErrInvalidPeer = errors.New("transport: invalid peer")
)

// Buffer sizes of a stream's socket writer and reader: large enough to carry
// many heartbeats and responses per system call.
const (
	streamBufSize = 64 << 10
	// keepBufSize is the largest receive buffer a reader keeps between
	// frames; a larger one (an occasional big append) is released.
	keepBufSize = 1 << 20
)

// streamKey names the current inbound connection of one kind from one peer.
type streamKey struct {
	from uint64
	kind byte
}

// raftRef holds the bound Raft (atomic.Pointer needs a concrete type).
type raftRef struct{ r Raft }

// Transport is a raft peer transport over TCP. Its methods are safe for
// concurrent use.
type Transport struct {
	cfg       Config
	log       *zap.Logger
	ln        net.Listener
	serverTLS *tls.Config // nil without TLS

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the transport starts

	raft    atomic.Pointer[raftRef]
	started atomic.Bool

	mu      sync.RWMutex
	closed  bool
	peers   map[uint64]*peer
	conns   map[net.Conn]struct{}  // every open inbound connection
	streams map[streamKey]net.Conn // the newest inbound connection per peer and kind
	stats   totals
}

// New validates cfg and binds the listener (so that Addr is known and a
// taken port fails here), but accepts no connection until Start.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Credentials != nil {
		// Peers would refuse every connection of this node.
		if err := checkOwnCertificate(cfg.Credentials, cfg.NodeID); err != nil {
			return nil, err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", cfg.ListenAddr, err)
	}
	t := &Transport{
		cfg:     cfg,
		log:     cfg.Logger.With(zap.Uint64("raft_id", cfg.NodeID)),
		ln:      ln,
		peers:   map[uint64]*peer{},
		conns:   map[net.Conn]struct{}{},
		streams: map[streamKey]net.Conn{},
	}
	if cfg.Credentials != nil {
		t.serverTLS = serverTLS(cfg.Credentials)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// Addr returns the address the transport listens on (with the actual port
// when Config.ListenAddr had port 0).
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// Start binds the raft node and starts accepting peer connections. Call it
// once, right after consensus.Start returned the node that was given this
// transport.
func (t *Transport) Start(r Raft) error {
	if r == nil {
		return errors.New("transport: Start with a nil Raft")
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return ErrClosed
	}
	if !t.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	t.raft.Store(&raftRef{r})
	t.wg.Add(1)
	go t.acceptLoop()
	t.log.Info("raft transport started", zap.String("addr", t.Addr()), zap.Bool("tls", t.serverTLS != nil))
	return nil
}

func (t *Transport) reportUnreachable(id uint64) {
	if ref := t.raft.Load(); ref != nil {
		ref.r.ReportUnreachable(id)
	}
}

func (t *Transport) reportSnapshot(id uint64, status raft.SnapshotStatus) {
	if ref := t.raft.Load(); ref != nil {
		ref.r.ReportSnapshot(id, status)
	}
}

// AddPeer registers peer id at addr (host:port) and starts its writer,
// which connects in the background. Adding an existing peer with the same
// address is a no-op, so callers may re-add the members of every ConfState.
func (t *Transport) AddPeer(id uint64, addr string) error {
	if err := t.checkPeer(id, addr); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if p, ok := t.peers[id]; ok {
		if p.address() == addr {
			return nil
		}
		return fmt.Errorf("%w: peer %d is at %s", ErrPeerExists, id, p.address())
	}
	p := newPeer(t, id, addr)
	t.peers[id] = p
	t.wg.Add(1)
	go p.run()
	t.log.Info("raft peer added", zap.Uint64("peer", id), zap.String("addr", addr))
	return nil
}

func (t *Transport) checkPeer(id uint64, addr string) error {
	if id == 0 || id == t.cfg.NodeID {
		return fmt.Errorf("%w: id %d", ErrInvalidPeer, id)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrInvalidPeer, addr, err)
	}
	return nil
}

// UpdatePeer moves peer id to addr: its stream reconnects there at once.
func (t *Transport) UpdatePeer(id uint64, addr string) error {
	if err := t.checkPeer(id, addr); err != nil {
		return err
	}
	t.mu.RLock()
	p, ok := t.peers[id]
	closed := t.closed
	t.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case !ok:
		return fmt.Errorf("%w: %d", ErrUnknownPeer, id)
	}
	if p.setAddress(addr) {
		t.log.Info("raft peer address updated", zap.Uint64("peer", id), zap.String("addr", addr))
	}
	return nil
}

// RemovePeer stops sending to peer id, drops its queue, closes its inbound
// connections and refuses new ones. It waits for the peer's writer to exit.
func (t *Transport) RemovePeer(id uint64) error {
	t.mu.Lock()
	p, ok := t.peers[id]
	if !ok {
		closed := t.closed
		t.mu.Unlock()
		if closed {
			return ErrClosed
		}
		return fmt.Errorf("%w: %d", ErrUnknownPeer, id)
	}
	delete(t.peers, id)
	for k, c := range t.streams {
		if k.from == id {
			_ = c.Close()
		}
	}
	t.mu.Unlock()
	p.cancel()
	<-p.done
	t.log.Info("raft peer removed", zap.Uint64("peer", id))
	return nil
}

// Peers returns the registered peers and their addresses.
func (t *Transport) Peers() map[uint64]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[uint64]string, len(t.peers))
	for id, p := range t.peers {
		out[id] = p.address()
	}
	return out
}

func (t *Transport) peer(id uint64) *peer {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.peers[id]
}

// Send queues msgs for their peers and returns at once; it implements
// consensus.Transport. It never blocks on the network: a message for an
// unknown peer, or for a peer whose queue is full, is dropped, counted and
// reported to raft as unreachable (once per peer and call). A MsgSnap is
// sent on its own connection in the background. Send does not modify msgs
// but keeps references to them until they are written.
func (t *Transport) Send(msgs []*raftpb.Message) {
	var unreachable []uint64 // a handful at most: one per peer
	var snapFailed []uint64
	mark := func(id uint64) {
		for _, u := range unreachable {
			if u == id {
				return
			}
		}
		unreachable = append(unreachable, id)
	}

	t.mu.RLock()
	closed := t.closed
	for _, m := range msgs {
		if closed {
			t.stats.dropped.Add(1)
			continue
		}
		p := t.peers[m.GetTo()]
		if p == nil {
			t.stats.droppedUnknown.Add(1)
			mark(m.GetTo())
			if m.GetType() == raftpb.MsgSnap {
				snapFailed = append(snapFailed, m.GetTo())
			}
			continue
		}
		if m.GetType() == raftpb.MsgSnap {
			// Under the read lock, so Close (which takes the write lock
			// before waiting) cannot miss this goroutine.
			t.wg.Add(1)
			go p.sendSnapshot(m)
			continue
		}
		select {
		case p.queue <- m:
		default:
			p.drop(1)
			mark(p.id)
		}
	}
	t.mu.RUnlock()

	if closed {
		return
	}
	// Outside the lock: these are synchronous hand-offs to raft's goroutine.
	for _, id := range unreachable {
		t.reportUnreachable(id)
	}
	for _, id := range snapFailed {
		t.reportSnapshot(id, raft.SnapshotFailure)
	}
}

// Stats returns a view of every registered peer.
func (t *Transport) Stats() map[uint64]PeerStats {
	t.mu.RLock()
	peers := maps.Clone(t.peers)
	inbound := map[uint64]bool{}
	for k := range t.streams {
		if k.kind == kindStream {
			inbound[k.from] = true
		}
	}
	t.mu.RUnlock()
	out := make(map[uint64]PeerStats, len(peers))
	for id, p := range peers {
		st := p.stats()
		st.InboundConnected = inbound[id]
		out[id] = st
	}
	return out
}

// Totals returns the transport-wide counters.
func (t *Transport) Totals() Totals {
	t.mu.RLock()
	n := len(t.peers)
	t.mu.RUnlock()
	s := &t.stats
	return Totals{
		Peers:              n,
		DroppedUnknownPeer: s.droppedUnknown.Load(),
		ConnsAccepted:      s.connsAccepted.Load(),
		HandshakesRefused:  s.handshakesRefused.Load(),
		IdentityRefused:    s.identityRefused.Load(),
		ProtocolErrors:     s.protocolErrors.Load(),
		StepErrors:         s.stepErrors.Load(),
		MsgsSent:           s.msgsSent.Load(),
		MsgsRecv:           s.msgsRecv.Load(),
		Dropped:            s.dropped.Load(),
		Timeouts:           s.timeouts.Load(),
	}
}

// Close stops accepting, closes every connection, stops every goroutine
// and waits for them. Queued messages are dropped; a snapshot in flight is
// reported as failed. Send after Close drops everything. Close is
// idempotent; it returns the listener's close error, if any.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.cancel()
	err := t.ln.Close()
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	t.log.Info("raft transport closed")
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// backoff is a jittered exponential delay; not safe for concurrent use.
type backoff struct {
	min, max, cur time.Duration
}

// next returns the delay before the next attempt: the current step, doubled
// for the following call, with up to half of it replaced by random jitter
// so that the nodes of a cluster that lost a peer together do not redial in
// lockstep.
func (b *backoff) next(rnd func(int64) int64) time.Duration {
	if b.cur < b.min {
		b.cur = b.min
	}
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	if half := int64(d / 2); half > 0 {
		d = time.Duration(half + rnd(half+1))
	}
	return d
}

func (b *backoff) reset() { b.cur = 0 }
