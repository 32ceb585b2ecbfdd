package app_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

// TestNewHeadsWakeTheRelay: with a WebSocket endpoint, a payment is
// published once its confirmations are mined although the poll interval is
// an hour: the new-head subscription wakes the relay. The stream is the
// one polling gives (checkStream).
func TestNewHeadsWakeTheRelay(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(1)
	cfg.RPCURL = h.chain.WSURL
	cfg.PollInterval = time.Hour
	w := h.start(cfg)
	// The first step reads up to the head at start; then the relay waits.
	h.waitCursor(h.head() - 1)

	txs := h.pay("alpha", "beta")
	h.commit(1)
	paid := h.head()
	want := h.expected(txs)
	h.commit(1) // the confirmation
	h.waitCursor(paid)
	h.checkStream(want, false)
	for _, g := range h.published() {
		if g.payment.Confirmations != 1 {
			t.Errorf("message %d: %d confirmations, want 1", g.seq, g.payment.Confirmations)
		}
	}
	if got := w.metric(t, "chainwatcher_new_heads_total"); got < 2 {
		t.Errorf("new heads counted %v, want at least 2", got)
	}
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v on shutdown, want nil", err)
	}
}

// TestWebSocketEndpointDownAtStart: a ws:// endpoint that does not answer
// at start neither stops the watcher nor holds publication up: the other
// endpoint serves meanwhile. Once the WebSocket endpoint answers, it is
// dialled and its new heads arrive.
func TestWebSocketEndpointDownAtStart(t *testing.T) {
	h := newHarness(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there yet
	cfg := h.config(1)
	cfg.RPCURL = "ws://" + addr + "," + h.chain.URL
	w := h.start(cfg)

	txs := h.pay("alpha", "beta")
	h.commit(1)
	paid := h.head()
	h.commit(1) // the confirmation
	h.waitCursor(paid)
	h.checkStream(h.expected(txs), false)
	if got := w.metric(t, "chainwatcher_new_heads_total"); got != 0 {
		t.Fatalf("%v new heads with the WebSocket endpoint down", got)
	}

	// The endpoint comes up: a TCP relay to the dev chain's.
	up, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	target := strings.TrimPrefix(h.chain.WSURL, "ws://")
	go func() {
		for {
			in, err := up.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	testenv.Eventually(t, 30*time.Second, func() bool {
		h.commit(1)
		return w.metric(t, "chainwatcher_new_heads_total") > 0
	}, "no new head from the WebSocket endpoint once it answered")
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v on shutdown, want nil", err)
	}
}
