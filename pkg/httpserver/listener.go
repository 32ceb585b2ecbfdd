package httpserver

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// limitListener closes, as soon as it is accepted, a connection that would
// take the server over MaxConns, or its client key over MaxConnsPerClient.
// Closing at once (rather than leaving it in the backlog, as
// netutil.LimitListener does) keeps one client from making everyone else
// wait for the slots it holds.
type limitListener struct {
	net.Listener
	max, perClient int // negative: no cap
	exempt         func(netip.Addr) bool

	mu    sync.Mutex
	open  int
	byKey map[string]int

	refusedTotal, refusedClient atomic.Uint64
}

func newLimitListener(ln net.Listener, maxConns, perClient int, exempt func(netip.Addr) bool) *limitListener {
	return &limitListener{Listener: ln, max: maxConns, perClient: perClient, exempt: exempt, byKey: map[string]int{}}
}

// Accept returns the next connection within the caps.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, ok := l.admit(c.RemoteAddr())
		if !ok {
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(key) }}, nil
	}
}

// admit counts a new connection from addr, or refuses it. The key is ""
// for a connection that is not counted per client.
func (l *limitListener) admit(addr net.Addr) (key string, ok bool) {
	var a netip.Addr
	if tcp, isTCP := addr.(*net.TCPAddr); isTCP {
		a = tcp.AddrPort().Addr().Unmap()
	} else if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
		a = ap.Addr().Unmap()
	}
	if l.perClient >= 0 && a.IsValid() && !l.exempt(a) {
		key = ClientKey(a)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max >= 0 && l.open >= l.max {
		l.refusedTotal.Add(1)
		return "", false
	}
	if key != "" && l.byKey[key] >= l.perClient {
		l.refusedClient.Add(1)
		return "", false
	}
	l.open++
	if key != "" {
		l.byKey[key]++
	}
	return key, true
}

func (l *limitListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if key == "" {
		return
	}
	if l.byKey[key] <= 1 {
		delete(l.byKey, key)
		return
	}
	l.byKey[key]--
}

func (l *limitListener) openConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// countedConn gives its slot back when closed, once.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
