// Package natsconntest serves the opening of the NATS client protocol under
// a server version a test chooses. The embedded nats-server announces its
// own version, which cannot be changed; the version check of pkg/natsconn
// needs older ones to refuse.
package natsconntest

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
)

// Server listens on loopback and answers each NATS client as a server that
// announces version: INFO on connect, PONG to every PING; all else is read
// and dropped. It returns the URL to connect to; the test's cleanup stops
// it and closes its connections.
func Server(t testing.TB, version string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, l, version)
}

// Serve is Server on a listener of the test's (one opened on an address a
// client already retries, say); it owns l.
func Serve(t testing.TB, l net.Listener, version string) string {
	t.Helper()
	addr := l.Addr().(*net.TCPAddr)
	info, err := json.Marshal(map[string]any{
		"server_id": "NATSCONNTEST", "server_name": "natsconntest", "version": version, "proto": 1,
		"host": addr.IP.String(), "port": addr.Port, "headers": true, "max_payload": 1 << 20,
	})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		wg     sync.WaitGroup
		closed bool
	)
	serve := func(c net.Conn) {
		defer wg.Done()
		defer c.Close()
		if _, err := c.Write([]byte("INFO " + string(info) + "\r\n")); err != nil {
			return
		}
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(strings.ToUpper(line), "PING") {
				if _, err := c.Write([]byte("PONG\r\n")); err != nil {
					return
				}
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = struct{}{}
			wg.Add(1)
			mu.Unlock()
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		closed = true
		l.Close()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "nats://" + addr.String()
}
