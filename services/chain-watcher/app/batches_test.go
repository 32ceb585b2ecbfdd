package app_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
)

// TestBackfillInAtomicBatches: a backfill goes to the stream as atomic
// batches (their headers are on the stored messages), each payment once,
// in chain order, and every one counted as stored.
func TestBackfillInAtomicBatches(t *testing.T) {
	h := newHarness(t)
	txs := h.payBlocks("batched", 10, 3)
	h.commit(1)
	w := h.start(h.config(1))
	h.waitCursor(h.head() - 1)
	h.checkStream(h.expected(txs), false)
	s, err := h.js.Stream(h.ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if !s.CachedInfo().Config.AllowAtomicPublish {
		t.Error("the stream is declared without atomic publication")
	}
	for _, p := range h.published() {
		m, err := s.GetMsg(h.ctx, p.seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(publish.BatchIDHeader) == "" || m.Header.Get(jetstream.MsgIDHeader) != p.msgID {
			t.Fatalf("message %d (%s) was not published in an atomic batch: %v", p.seq, p.msgID, m.Header)
		}
	}
	if got := w.metric(t, `chainwatcher_logs_published_total{event="proposal_paid",result="stored"}`); got != float64(len(txs)) {
		t.Errorf("%v payments counted as stored, want %d", got, len(txs))
	}
	if got := w.metric(t, `chainwatcher_publish_delay_seconds_count{event="proposal_paid"}`); got != float64(len(txs)) {
		t.Errorf("a publication delay measured for %v payments, want %d", got, len(txs))
	}
}
