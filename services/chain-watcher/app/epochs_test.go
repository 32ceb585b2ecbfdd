package app_test

import (
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

// lastEpoch reads the newest epoch update of the chain; ok is false while
// there is none.
func (h *harness) lastEpoch() (u payment.EpochUpdate, msgID string, ok bool) {
	h.t.Helper()
	s, err := h.js.Stream(h.ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return payment.EpochUpdate{}, "", false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(h.ctx, payment.EpochSubject(h.chain.ChainID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return payment.EpochUpdate{}, "", false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	if u, err = payment.DecodeEpochUpdate(m.Data); err != nil {
		h.t.Fatalf("epoch message %s: %v", m.Data, err)
	}
	return u, m.Header.Get(jetstream.MsgIDHeader), true
}

// firstEpochDelivered is the first epoch update a consumer configured as a
// validator's epoch consumer receives: the subject's last message.
func (h *harness) firstEpochDelivered() payment.EpochUpdate {
	h.t.Helper()
	cons, err := h.js.OrderedConsumer(h.ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{payment.EpochSubject(h.chain.ChainID)},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(wait))
	if err != nil {
		h.t.Fatal(err)
	}
	u, err := payment.DecodeEpochUpdate(msg.Data())
	if err != nil {
		h.t.Fatalf("epoch message %s: %v", msg.Data(), err)
	}
	return u
}

// TestPublishesEpochsFromBlockTime runs the watcher on the dev chain with
// 2-second epochs: the current epoch follows the head block's timestamp
// (mining a block within the same second moves the chain's time one
// second on), and the finalized epoch follows the chain's finalized block,
// which the dev chain moves every 32 blocks; /metrics and /health show the
// published figures.
func TestPublishesEpochsFromBlockTime(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(2)
	cfg.EpochLength, cfg.EpochInterval = 2*time.Second, 10*time.Millisecond
	w := h.start(cfg)

	// waitEpochs waits for the update of the current head.
	waitEpochs := func() payment.EpochUpdate {
		t.Helper()
		head := h.head()
		hdr, err := h.chain.Client().HeaderByNumber(h.ctx, new(big.Int).SetUint64(head))
		if err != nil {
			t.Fatal(err)
		}
		var u payment.EpochUpdate
		testenv.Eventually(t, wait, func() bool {
			var ok bool
			u, _, ok = h.lastEpoch()
			return ok && u.Current == hdr.Time/2
		}, "no epoch update for head %d at %d", head, hdr.Time)
		return u
	}
	first := waitEpochs()
	if first.ChainID != h.chain.ChainID || first.Finalized != 0 || first.Source != payment.EpochSourceBlockTime {
		t.Fatalf("first update %+v: the finalized block is genesis, at time 0", first)
	}

	h.commit(6) // six seconds of chain time: three epochs
	second := waitEpochs()
	if second.Current < first.Current+3 || second.Finalized != 0 {
		t.Fatalf("after six blocks: %+v, first %+v", second, first)
	}

	h.commit(40) // past block 32, the dev chain's first finalized block after genesis
	final, err := h.chain.Client().HeaderByNumber(h.ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil {
		t.Fatal(err)
	}
	want := (final.Time+1)/2 - 1
	var u payment.EpochUpdate
	var msgID string
	testenv.Eventually(t, wait, func() bool {
		var ok bool
		u, msgID, ok = h.lastEpoch()
		return ok && u.Finalized == want
	}, "finalized epoch never reached %d (block %d at %d)", want, final.Number, final.Time)
	if msgID != u.MsgID() || u.Current <= u.Finalized {
		t.Fatalf("update %+v with message id %q", u, msgID)
	}
	u = waitEpochs()
	if got := h.firstEpochDelivered(); got != u {
		t.Fatalf("a validator's epoch consumer starts at %+v, want the last update %+v", got, u)
	}
	testenv.Eventually(t, wait, func() bool {
		return w.metric(t, "chainwatcher_epoch_current") == float64(u.Current) &&
			w.metric(t, "chainwatcher_epoch_finalized") == float64(u.Finalized)
	}, "the epoch gauges do not show %d/%d", u.Current, u.Finalized)
	if got := w.metric(t, `chainwatcher_epoch_updates_published_total{result="stored"}`); got < 3 {
		t.Errorf("%v updates counted, want at least 3", got)
	}
	testenv.Eventually(t, wait, func() bool {
		_, body := getHealth(t, w.health)
		e, _ := body["epochs"].(map[string]any)
		return e["published"] == true && e["current"] == float64(u.Current) && e["finalized"] == float64(u.Finalized) &&
			e["source"] == payment.EpochSourceBlockTime
	}, "/health does not show the epochs")
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v on shutdown", err)
	}

	// A restarted watcher reads the same figures: the stream drops its
	// first update as a duplicate instead of storing it again.
	before := h.epochCount()
	again := h.start(cfg)
	testenv.Eventually(t, wait, func() bool {
		return again.metric(t, `chainwatcher_epoch_updates_published_total{result="duplicate"}`) == 1
	}, "the restarted watcher's first update is not a duplicate")
	if got := h.epochCount(); got != before {
		t.Fatalf("the stream holds %d epoch updates after the restart, %d before", got, before)
	}
}

// epochCount is the number of epoch updates in the stream.
func (h *harness) epochCount() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(h.ctx, stream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(h.ctx, jetstream.WithSubjectFilter(payment.EpochSubject(h.chain.ChainID)))
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Subjects[payment.EpochSubject(h.chain.ChainID)]
}

// TestPublishesEpochsFromBeacon: with BEACON_URL set the epochs come from
// the beacon API (head slot and finalized checkpoint, in the unix-time
// numbering of the block-time source); a beacon node
// that fails is retried and shown on /health, and payments go on.
func TestPublishesEpochsFromBeacon(t *testing.T) {
	h := newHarness(t)
	var slot, failing atomic.Int64
	slot.Store(3200)
	beacon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() != 0 {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		s := slot.Load()
		switch r.URL.Path {
		case "/eth/v1/beacon/genesis": // at unix time 0: slot n starts at 12n s
			fmt.Fprint(w, `{"data":{"genesis_time":"0"}}`)
		case "/eth/v1/config/spec":
			fmt.Fprint(w, `{"data":{"SECONDS_PER_SLOT":"12","SLOTS_PER_EPOCH":"32"}}`)
		case "/eth/v1/beacon/headers/head":
			fmt.Fprintf(w, `{"data":{"header":{"message":{"slot":"%d"}}}}`, s)
		case "/eth/v1/beacon/states/head/finality_checkpoints":
			fmt.Fprintf(w, `{"data":{"finalized":{"epoch":"%d","root":"0x00"}}}`, s/32-2)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(beacon.Close)
	cfg := h.config(0)
	cfg.BeaconURL, cfg.EpochInterval = beacon.URL, 10*time.Millisecond
	w := h.start(cfg)

	waitFor := func(current, finalized uint64) {
		t.Helper()
		testenv.Eventually(t, wait, func() bool {
			u, _, ok := h.lastEpoch()
			return ok && u.Current == current && u.Finalized == finalized && u.Source == payment.EpochSourceBeacon
		}, "no beacon update %d/%d", current, finalized)
	}
	// Slot 3200 starts at 38400 s, in epoch 100; the finalized checkpoint
	// (beacon epoch 98) is the block at 37632 s, which opens epoch 98, so
	// epoch 97 is the newest final one.
	waitFor(100, 97)

	failing.Store(1)
	testenv.Eventually(t, wait, func() bool {
		code, body := getHealth(t, w.health)
		e, _ := body["epochs"].(map[string]any)
		return code == http.StatusOK && e["lastError"] != nil && e["current"] == float64(100)
	}, "/health does not show the beacon's failure")
	txs := h.pay("paid-while-the-beacon-fails")
	h.commit(1)
	want := h.expected(txs)
	testenv.Eventually(t, wait, func() bool { return len(h.published()) == 1 }, "the payment was not published")
	h.checkStream(want, false)

	failing.Store(0)
	slot.Store(3232)
	waitFor(101, 98)
	testenv.Eventually(t, wait, func() bool {
		_, body := getHealth(t, w.health)
		e, _ := body["epochs"].(map[string]any)
		return e["lastError"] == nil && e["slot"] == float64(3232)
	}, "/health still shows the beacon's failure")
}
