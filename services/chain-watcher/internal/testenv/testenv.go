// Package testenv starts the real dependencies of the watcher's tests: an
// embedded NATS server with JetStream on a temporary directory, and a dev
// chain with the payment contract. It is imported by tests only.
package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/tools/devchain"
)

// NATS starts a JetStream server on a random port, storing in a temporary
// directory with fsync on every write (as production must run), and stops
// it when the test ends.
func NATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// JetStream connects to s and closes the connection when the test ends.
func JetStream(t testing.TB, s *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// Chain starts a dev chain with manual blocks and its RPC on a random port.
func Chain(t testing.TB) *devchain.Chain {
	t.Helper()
	c, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("dev chain: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Context is a context bounded by the test's deadline, or 30 s.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every few milliseconds until it holds or the
// deadline passes, then fails the test with msg.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
