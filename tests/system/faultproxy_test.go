package system

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contentledger/contentledger/tests/harness"
)

// faultProxy is a TCP proxy on loopback that forwards every accepted
// connection to one target. Each connection belongs to a link, named by
// classify from its first bytes (with no classify, every connection is on
// link ""), and each link can be switched at run time to blackhole: the
// proxy then cuts that link's connections and accepts new ones but passes
// nothing (it reads and discards what the client sends and never dials the
// target), which is what a peer behind a partition looks like to a dialer
// whose handshake never gets an answer. Switching a link back to
// pass-through cuts its blackholed connections, so their dialers redial at
// once.
//
// It is bounded (at most maxProxyConns client connections, a deadline on
// classify and on the dial), and Close stops the accept loop, closes every
// connection and waits for all of its goroutines.
type faultProxy struct {
	ln       net.Listener
	target   string
	classify func(r io.Reader) (link string, head []byte, err error)
	ctx      context.Context // cancelled by Close: interrupts dials
	cancel   context.CancelFunc

	mu         sync.Mutex
	blackholed map[string]bool
	gen        map[string]uint64        // bumped on each switch of a link: its connections of an older one are cut
	conns      map[net.Conn]*proxyEntry // open connections, client and target sides
	clients    int                      // client connections among conns
	closed     bool
	wg         sync.WaitGroup

	accepted, cut, refused atomic.Uint64
}

type proxyEntry struct {
	link       string
	classified bool // link is known (a client connection is tracked from accept)
	client     bool
}

const (
	maxProxyConns     = 64
	proxyDialTimeout  = time.Second
	proxyHelloTimeout = 2 * time.Second
)

// startFaultProxy listens on a free loopback port and forwards to target;
// classify may be nil.
func startFaultProxy(target string, classify func(io.Reader) (string, []byte, error)) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &faultProxy{ln: ln, target: target, classify: classify, ctx: ctx, cancel: cancel,
		blackholed: map[string]bool{}, gen: map[string]uint64{}, conns: map[net.Conn]*proxyEntry{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// newFaultProxy is startFaultProxy that fails t and closes the proxy when t
// ends.
func newFaultProxy(t testing.TB, target string, classify func(io.Reader) (string, []byte, error)) *faultProxy {
	t.Helper()
	p, err := startFaultProxy(target, classify)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr is where clients connect.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// SetBlackhole switches link between blackhole (true) and pass-through
// (false), cutting the link's open connections when the mode changes.
func (p *faultProxy) SetBlackhole(link string, on bool) {
	p.mu.Lock()
	if p.blackholed[link] == on || p.closed {
		p.mu.Unlock()
		return
	}
	p.blackholed[link] = on
	p.gen[link]++
	var victims []net.Conn
	for c, e := range p.conns {
		if e.classified && e.link == link {
			victims = append(victims, c)
			p.dropLocked(c, e)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		_ = c.Close()
	}
	p.cut.Add(uint64(len(victims)))
}

// Blackholed reports whether link is blackholed.
func (p *faultProxy) Blackholed(link string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackholed[link]
}

// Close stops the proxy and waits for its goroutines. It is idempotent.
func (p *faultProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	victims := make([]net.Conn, 0, len(p.conns))
	for c, e := range p.conns {
		victims = append(victims, c)
		p.dropLocked(c, e)
	}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for _, c := range victims {
		_ = c.Close()
	}
	p.wg.Wait()
	return err
}

func (p *faultProxy) dropLocked(c net.Conn, e *proxyEntry) {
	delete(p.conns, c)
	if e.client {
		p.clients--
	}
}

func (p *faultProxy) acceptLoop() {
	defer p.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error (out of descriptors): back off, as net/http does.
			select {
			case <-time.After(backoff):
			case <-p.ctx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		p.serve(c)
	}
}

// serve registers a client connection and starts its goroutine.
func (p *faultProxy) serve(client net.Conn) {
	p.mu.Lock()
	if p.closed || p.clients >= maxProxyConns {
		p.mu.Unlock()
		p.refused.Add(1)
		_ = client.Close()
		return
	}
	entry := &proxyEntry{client: true}
	p.conns[client] = entry
	p.clients++
	p.wg.Add(1)
	p.mu.Unlock()
	p.accepted.Add(1)

	go func() {
		defer p.wg.Done()
		defer p.forget(client)
		var link string
		var head []byte
		if p.classify != nil {
			_ = client.SetReadDeadline(time.Now().Add(proxyHelloTimeout))
			var err error
			if link, head, err = p.classify(client); err != nil {
				return
			}
			_ = client.SetReadDeadline(time.Time{})
		}
		p.mu.Lock()
		if _, ok := p.conns[client]; !ok { // closed meanwhile
			p.mu.Unlock()
			return
		}
		entry.link, entry.classified = link, true
		gen, blackhole := p.gen[link], p.blackholed[link]
		p.mu.Unlock()

		if blackhole {
			// Pass nothing: swallow the client's bytes until it gives up or
			// the connection is cut.
			_, _ = io.Copy(io.Discard, client)
			return
		}
		ctx, cancel := context.WithTimeout(p.ctx, proxyDialTimeout)
		target, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
		cancel()
		if err != nil {
			return
		}
		if !p.track(target, link, gen) {
			_ = target.Close()
			return
		}
		defer p.forget(target)
		if _, err := target.Write(head); err != nil {
			return
		}
		// Whichever direction ends first closes both, so the other ends too.
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = io.Copy(target, client)
			_ = target.Close()
			_ = client.Close()
		}()
		_, _ = io.Copy(client, target)
		_ = target.Close()
		_ = client.Close()
		<-done
	}()
}

// track registers the target side of a connection of link classified in
// generation gen; false if the link switched (or the proxy closed) since.
func (p *faultProxy) track(c net.Conn, link string, gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.gen[link] != gen {
		return false
	}
	p.conns[c] = &proxyEntry{link: link, classified: true}
	return true
}

// forget closes c and drops it from the set, if it is still there.
func (p *faultProxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	if e, ok := p.conns[c]; ok {
		p.dropLocked(c, e)
	}
	p.mu.Unlock()
}

func (p *faultProxy) String() string {
	p.mu.Lock()
	var cut []string
	for link, on := range p.blackholed {
		if on {
			cut = append(cut, strconv.Quote(link))
		}
	}
	p.mu.Unlock()
	return fmt.Sprintf("proxy %s→%s (blackholed links %v; %d accepted, %d cut, %d refused)", p.Addr(), p.target, cut,
		p.accepted.Load(), p.cut.Load(), p.refused.Load())
}

// raftLink classifies a raft transport connection by its sender: it reads
// the fixed start of the handshake (services/validator/internal/transport,
// wire.go: "CLRT", version, kind, from u64, to u64, all big-endian) and
// names the link by the sender's raft id. The bytes read are forwarded.
func raftLink(r io.Reader) (string, []byte, error) {
	head := make([]byte, 4+1+1+8+8)
	if _, err := io.ReadFull(r, head); err != nil {
		return "", nil, err
	}
	if string(head[:4]) != "CLRT" {
		return "", nil, fmt.Errorf("not a raft transport handshake: % x", head[:4])
	}
	return strconv.FormatUint(binary.BigEndian.Uint64(head[6:14]), 10), head, nil
}

// partitionableCluster is a cluster in which every raft connection to node
// j goes through j's faultProxy, which tells the senders apart by their
// handshake, so that each directed link i→j (the connections i dials to send
// to j) can be cut on its own.
//
// One proxy per receiver rather than one per link: since the address book
// is replicated (raft conf changes carry the members' addresses, bootstrap
// included), every validator must be given the same
// SVC_VALIDATOR_INITIAL_CLUSTER. Validators bootstrapped with different
// peer addresses each write their own address book at the same raft indexes
// and their state hashes never agree.
type partitionableCluster struct {
	*cluster
	proxies map[uint64]*faultProxy // by receiving node
}

// newPartitionableCluster starts size MOCK validators, speaking raft in
// plaintext, whose initial cluster names, as every member's peer address,
// that member's proxy. Only raft
// traffic goes through the proxies: the HTTP API (follower forwarding
// included) stays direct.
func newPartitionableCluster(t testing.TB, size int, extraEnv ...string) *partitionableCluster {
	t.Helper()
	pc := &partitionableCluster{proxies: map[uint64]*faultProxy{}}
	var initial string
	nodeEnv := func(_ *node, nodes []*node) []string {
		if initial == "" {
			var members []string
			for _, m := range nodes {
				p := newFaultProxy(t, m.peerAddr, raftLink)
				pc.proxies[m.id] = p
				members = append(members, fmt.Sprintf("%d=%s=%s", m.id, p.Addr(), m.url()))
			}
			initial = strings.Join(members, ",")
		}
		// The proxies tell links apart by the transport's hello, which
		// mutual TLS would hide: these MOCK validators speak raft in
		// plaintext (MOCK may; the peer identity tests are elsewhere).
		return []string{"SVC_VALIDATOR_INITIAL_CLUSTER=" + initial,
			"SVC_VALIDATOR_PEER_TLS_CERT=", "SVC_VALIDATOR_PEER_TLS_KEY=", "SVC_VALIDATOR_PEER_TLS_CA="}
	}
	pc.cluster = newClusterEnv(t, size, "MOCK", nodeEnv, extraEnv...)
	return pc
}

// setLink blackholes (cut true) or restores the link from→to.
func (pc *partitionableCluster) setLink(from, to *node, cut bool) {
	p := pc.proxies[to.id]
	if p == nil {
		pc.t.Fatalf("no proxy in front of validator %d", to.id)
	}
	p.SetBlackhole(strconv.FormatUint(from.id, 10), cut)
}

// cut blackholes both directions between a and b.
func (pc *partitionableCluster) cut(a, b *node) {
	pc.setLink(a, b, true)
	pc.setLink(b, a, true)
}

// isolate cuts n off from every other node, both directions.
func (pc *partitionableCluster) isolate(n *node) {
	for _, m := range pc.nodes {
		if m != n {
			pc.cut(n, m)
		}
	}
}

// heal lets every link pass again.
func (pc *partitionableCluster) heal() {
	for _, a := range pc.nodes {
		for _, b := range pc.nodes {
			if a != b {
				pc.setLink(a, b, false)
			}
		}
	}
}

// others returns the nodes but n.
func (c *cluster) others(n *node) []*node {
	var out []*node
	for _, m := range c.nodes {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}

// TestFaultProxy checks the proxy on its own against an echo server, with
// two links told apart by the first byte a client sends: pass-through,
// blackholing one link (its open connections cut, new ones get nothing, the
// other link unaffected), back to pass-through, and a Close that leaves no
// goroutine behind.
func TestFaultProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var echoWG sync.WaitGroup
	echoWG.Go(func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			echoWG.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	defer func() {
		echo.Close()
		echoWG.Wait()
	}()

	baseline := runtime.NumGoroutine()
	firstByte := func(r io.Reader) (string, []byte, error) {
		b := make([]byte, 1)
		_, err := io.ReadFull(r, b)
		return string(b), b, err
	}
	p, err := startFaultProxy(echo.Addr().String(), firstByte)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// open connects on link and names it.
	open := func(link string) net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, link); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// roundTrip writes send on c and reads want back within d.
	roundTrip := func(c net.Conn, send, want string, d time.Duration) error {
		_ = c.SetDeadline(time.Now().Add(d))
		if _, err := io.WriteString(c, send); err != nil {
			return err
		}
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != want {
			return fmt.Errorf("echo %q, want %q", buf, want)
		}
		return nil
	}
	// cutOff checks that c was closed by the proxy (not merely silent).
	cutOff := func(c net.Conn, what string) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("%s was not cut: %v", what, err)
		}
	}

	a1, b1 := open("a"), open("b")
	if err := roundTrip(a1, "hello", "ahello", 2*time.Second); err != nil {
		t.Fatalf("link a: %v", err)
	}
	if err := roundTrip(b1, "hello", "bhello", 2*time.Second); err != nil {
		t.Fatalf("link b: %v", err)
	}

	p.SetBlackhole("a", true)
	cutOff(a1, "a connection of link a open when it was blackholed")
	if err := roundTrip(b1, "still", "still", 2*time.Second); err != nil {
		t.Fatalf("link b while a is blackholed: %v", err)
	}
	a2 := open("a")
	if err := roundTrip(a2, "lost", "alost", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection on blackholed link a: %v, want a timeout", err)
	}
	if err := roundTrip(open("b"), "new", "bnew", 2*time.Second); err != nil {
		t.Fatalf("new connection on link b while a is blackholed: %v", err)
	}

	p.SetBlackhole("a", false)
	cutOff(a2, "a blackholed connection of link a when it passed again")
	a3 := open("a")
	if err := roundTrip(a3, "again", "aagain", 2*time.Second); err != nil {
		t.Fatalf("link a after healing: %v", err)
	}
	if err := roundTrip(b1, "b", "b", 2*time.Second); err != nil {
		t.Fatalf("link b after healing a: %v", err)
	}
	t.Log(p)

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
	cutOff(a3, "a connection open at Close")
	cutOff(b1, "a connection open at Close")
	p.mu.Lock()
	left := len(p.conns)
	p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d connections tracked after Close", left)
	}
	if err := p.Close(); err != nil { // a no-op the second time
		t.Fatal(err)
	}
	// Close waited for the proxy's goroutines; the echo server's end once
	// the proxy's connections to it are closed.
	harness.Eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= baseline })
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
