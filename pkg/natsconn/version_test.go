package natsconn_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/contentledger/contentledger/pkg/natsconn"
	"github.com/contentledger/contentledger/pkg/natsconn/natsconntest"
)

func TestCheckServerVersion(t *testing.T) {
	for _, v := range []string{"2.12.0", "2.12.1", "v2.12.0", "2.13.0-RC.1", "2.15.2", "2.12.0+build.7", "3.0.0", "10.0.0"} {
		if err := natsconn.CheckServerVersion(v); err != nil {
			t.Errorf("%s refused: %v", v, err)
		}
	}
	for _, v := range []string{"2.11.9", "2.11.99", "2.12.0-RC.3", "2.12.0-dev", "1.99.99", "0.0.0"} {
		err := natsconn.CheckServerVersion(v)
		if !errors.Is(err, natsconn.ErrServerVersion) || !strings.Contains(err.Error(), v) ||
			!strings.Contains(err.Error(), natsconn.MinServerVersion) {
			t.Errorf("%s: %v, want ErrServerVersion naming %s and %s", v, err, v, natsconn.MinServerVersion)
		}
	}
	for _, v := range []string{"", "2.12", "2.12.x", "2..0", "a.b.c", "2.12.0.1", "-1.12.0", "99999999999.0.0"} {
		if err := natsconn.CheckServerVersion(v); !errors.Is(err, natsconn.ErrServerVersion) {
			t.Errorf("unreadable %q: %v, want ErrServerVersion", v, err)
		}
	}
}

func FuzzCheckServerVersion(f *testing.F) {
	for _, v := range []string{"2.12.0", "2.11.9", "2.12.0-RC.1+x", "v3.0.0", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		// Whatever a server announces is accepted or refused, never a panic.
		if err := natsconn.CheckServerVersion(v); err != nil && !errors.Is(err, natsconn.ErrServerVersion) {
			t.Fatalf("%q: %v", v, err)
		}
	})
}

// TestVersionGuardRefusesOldServer: connected to a server that announces
// 2.11.9, Check refuses with both versions named, closes the connection,
// and the guard reports the refusal.
func TestVersionGuardRefusesOldServer(t *testing.T) {
	url := natsconntest.Server(t, "2.11.9")
	guard := natsconn.NewVersionGuard()
	nc, err := nats.Connect(url, nats.ConnectHandler(guard.Handler))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	err = guard.Check(nc)
	if !errors.Is(err, natsconn.ErrServerVersion) || !strings.Contains(err.Error(), "2.11.9") || !strings.Contains(err.Error(), "2.12.0") {
		t.Fatalf("Check: %v", err)
	}
	if !nc.IsClosed() {
		t.Fatal("the connection to the old server is still open")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if werr := guard.Wait(ctx); !errors.Is(werr, natsconn.ErrServerVersion) || !errors.Is(guard.Err(), natsconn.ErrServerVersion) {
		t.Fatalf("Wait: %v, Err: %v", werr, guard.Err())
	}
}

// TestVersionGuardRefusesLateServer: a connection that retries its first
// connect reaches the old server only after nats.Connect returned; its
// ConnectHandler refuses it and Wait reports it.
func TestVersionGuardRefusesLateServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	guard := natsconn.NewVersionGuard()
	nc, err := nats.Connect("nats://"+addr, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(10*time.Millisecond), nats.ConnectHandler(guard.Handler))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.IsConnected() || guard.Check(nc) != nil {
		t.Fatal("connected before the server listens")
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	natsconntest.Serve(t, l, "2.10.0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := guard.Wait(ctx); !errors.Is(err, natsconn.ErrServerVersion) || !strings.Contains(err.Error(), "2.10.0") {
		t.Fatalf("Wait: %v", err)
	}
	if !nc.IsClosed() {
		t.Fatal("the connection to the old server is still open")
	}
}

// TestVersionGuardAcceptsEmbeddedServer: the nats-server the tests embed
// passes, and the guard stays quiet.
func TestVersionGuardAcceptsEmbeddedServer(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	guard := natsconn.NewVersionGuard()
	nc, err := nats.Connect(ns.ClientURL(), nats.ConnectHandler(guard.Handler))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := guard.Check(nc); err != nil || guard.Err() != nil || nc.IsClosed() {
		t.Fatalf("Check: %v, Err: %v, closed: %t", err, guard.Err(), nc.IsClosed())
	}
}
