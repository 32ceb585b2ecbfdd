package app_test

import (
	"testing"
	"time"
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
