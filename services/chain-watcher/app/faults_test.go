package app_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

// payBlocks pays perBlock payments in each of n blocks (a payment the pool
// had not promoted yet goes into a later block) and mines them all.
func (h *harness) payBlocks(prefix string, n, perBlock int) []common.Hash {
	h.t.Helper()
	var txs []common.Hash
	for b := range n {
		ids := make([]string, perBlock)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%d-%d", prefix, b, i)
		}
		txs = append(txs, h.pay(ids...)...)
		h.commit(1)
	}
	for _, tx := range txs {
		for attempt := 0; ; attempt++ {
			if _, err := h.chain.Client().TransactionReceipt(h.ctx, tx); err == nil {
				break
			}
			if attempt == 100 {
				h.t.Fatalf("transaction %s never mined", tx.Hex())
			}
			h.commit(1)
		}
	}
	return txs
}

// metric returns the value of one series on the watcher's /metrics, 0 when
// absent.
func (w *watcher) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(w.health, "/health") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return v
		}
	}
	return 0
}

// exited waits for Run to return on its own (its context cancelled from
// elsewhere) and returns its result.
func (w *watcher) exited(timeout time.Duration) error {
	select {
	case err := <-w.done:
		close(w.done) // for stop, called at cleanup
		return err
	case <-time.After(timeout):
		return errors.New("Run did not return")
	}
}

// endpoints returns the endpoints of /health.
func endpoints(t *testing.T, url string) []map[string]any {
	t.Helper()
	_, body := getHealth(t, url)
	list, _ := body["endpoints"].([]any)
	var out []map[string]any
	for _, e := range list {
		out = append(out, e.(map[string]any))
	}
	return out
}

// rangeRefusals are the ways providers refuse an eth_getLogs range as too
// large, as the proxy answers them in turn.
var rangeRefusals = []testenv.Fault{
	{Error: &testenv.RPCError{Code: -32005, Message: "query returned more than 10000 results"}},
	{Error: &testenv.RPCError{Code: -32602, Message: "block range is too large"}},
	{Error: &testenv.RPCError{Code: -32000, Message: "exceed maximum block range: 6"}},
	{Status: http.StatusRequestEntityTooLarge},
	{Error: &testenv.RPCError{Code: -32602, Message: "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size"}},
	{Error: &testenv.RPCError{Code: -32000, Message: "response size exceeded"}},
}

// TestProviderFaultsThroughProxy: the watcher reads through a proxy that
// refuses eth_getLogs ranges over 6 blocks (in the wordings of several
// providers), lets some queries time out, answers the others with logs
// repeated and shuffled, and fails some head and header reads. The stream
// still holds every payment once, in chain order.
func TestProviderFaultsThroughProxy(t *testing.T) {
	h := newHarness(t)
	proxy := testenv.NewRPCProxy(t, h.chain.URL)
	const limit = 6
	var refused, served, hung, rewritten, failed atomic.Int64
	// The proxy calls Rewrite outside its lock, from a goroutine per request.
	var rndMu sync.Mutex
	rnd := rand.New(rand.NewPCG(1, 2))
	proxy.SetFault(func(c testenv.Call) testenv.Fault {
		switch c.Method {
		case "eth_getLogs":
			from, to, ok := c.LogRange()
			if !ok {
				return testenv.Fault{}
			}
			if to-from+1 > limit {
				n := refused.Add(1)
				return rangeRefusals[int(n)%len(rangeRefusals)]
			}
			if served.Add(1)%3 == 0 && hung.Load() < 3 {
				hung.Add(1)
				return testenv.Fault{Hang: true}
			}
			return testenv.Fault{Rewrite: func(result json.RawMessage) json.RawMessage {
				var logs []json.RawMessage
				if json.Unmarshal(result, &logs) != nil || len(logs) == 0 {
					return result
				}
				rndMu.Lock()
				defer rndMu.Unlock()
				for _, l := range logs {
					if rnd.IntN(2) == 0 {
						logs = append(logs, l)
					}
				}
				rnd.Shuffle(len(logs), func(i, j int) { logs[i], logs[j] = logs[j], logs[i] })
				rewritten.Add(1)
				out, _ := json.Marshal(logs)
				return out
			}}
		case "eth_blockNumber", "eth_getBlockByNumber":
			if c.N%9 == 0 {
				failed.Add(1)
				return testenv.Fault{Status: http.StatusServiceUnavailable}
			}
		}
		return testenv.Fault{}
	})

	txs := h.payBlocks("faults", 40, 2)
	h.commit(1)
	cfg := h.config(1)
	cfg.RPCURL = proxy.URL
	cfg.MaxBlockRange = 64
	cfg.RangeGrowAfter = 1 // grow after every pass: the limit is hit again and again
	cfg.RPCTimeout = 300 * time.Millisecond
	w := h.start(cfg)
	h.waitCursor(h.head() - 1)
	// And some more while it follows the head.
	txs = append(txs, h.payBlocks("live", 3, 2)...)
	h.commit(1)
	h.waitCursor(h.head() - 1)

	want := h.expected(txs)
	h.checkStream(want, false)
	// Each wording of a refusal at least once, and some of each other fault.
	if refused.Load() < int64(len(rangeRefusals)) || hung.Load() != 3 || rewritten.Load() == 0 || failed.Load() == 0 {
		t.Fatalf("faults injected: %d ranges refused, %d timeouts, %d answers rewritten, %d calls failed; want every kind",
			refused.Load(), hung.Load(), rewritten.Load(), failed.Load())
	}
	if got := w.metric(t, `chainwatcher_logs_published_total{event="proposal_paid",result="stored"}`); got != float64(len(want)) {
		t.Errorf("logs published metric %v, want %d", got, len(want))
	}
	if size := w.metric(t, "chainwatcher_block_range_size"); size < 1 || size > 2*limit {
		t.Errorf("block range size %v after refusals over %d blocks", size, limit)
	}
	t.Logf("%d payments; %d ranges refused, %d timeouts, %d answers with repeats and shuffled, %d head/header calls failed",
		len(want), refused.Load(), hung.Load(), rewritten.Load(), failed.Load())
}

// TestFailoverBetweenEndpoints: with two endpoints, the watcher goes on
// through the second while the first fails every call, back to the first
// once the second fails and the first has recovered, and /health and
// /metrics show which endpoint failed.
func TestFailoverBetweenEndpoints(t *testing.T) {
	h := newHarness(t)
	first, second := testenv.NewRPCProxy(t, h.chain.URL), testenv.NewRPCProxy(t, h.chain.URL)
	down := func(testenv.Call) testenv.Fault { return testenv.Fault{Status: http.StatusBadGateway} }
	cfg := h.config(1)
	cfg.RPCURL = first.URL + "," + second.URL
	w := h.start(cfg)

	txs := h.payBlocks("primary", 2, 2)
	h.commit(1)
	h.waitCursor(h.head() - 1)
	if eps := endpoints(t, w.health); len(eps) != 2 || eps[0]["current"] != true || second.Count("eth_getLogs") != 0 {
		t.Fatalf("with both up, calls went to %+v (second endpoint asked %d eth_getLogs)", eps, second.Count("eth_getLogs"))
	}

	first.SetFault(down)
	txs = append(txs, h.payBlocks("failover", 2, 2)...)
	h.commit(1)
	h.waitCursor(h.head() - 1)
	// A call to an endpoint sent before its fault may still succeed and,
	// by the scores, make it current for a moment: its next failure moves
	// the calls on again.
	var eps []map[string]any
	testenv.Eventually(t, 10*time.Second, func() bool {
		eps = endpoints(t, w.health)
		return eps[0]["errors"].(float64) > 0 && eps[0]["lastError"] != "" && eps[1]["current"] == true
	}, "after the first failed, the calls did not settle on the second endpoint with the first's errors counted")
	errSeries := fmt.Sprintf(`chainwatcher_rpc_endpoint_errors_total{endpoint=%q}`, eps[0]["name"])
	if w.metric(t, errSeries) == 0 {
		t.Errorf("%s is 0", errSeries)
	}

	first.SetFault(nil)
	second.SetFault(down)
	txs = append(txs, h.payBlocks("failback", 2, 2)...)
	h.commit(1)
	h.waitCursor(h.head() - 1)
	testenv.Eventually(t, 10*time.Second, func() bool {
		eps = endpoints(t, w.health)
		return eps[0]["current"] == true && eps[1]["errors"].(float64) > 0
	}, "after the second failed, the calls did not settle on the first endpoint with the second's errors counted")
	h.checkStream(h.expected(txs), false)
}

// TestKillAndRestartMidBackfill: 240 payments over 80 blocks, read 6
// blocks at a time. The watcher is killed twice in the middle: once at an
// arbitrary point (its context cancelled as the 60th payment reaches the
// stream), once after a batch is in the stream but with its checkpoint
// lost (the stored state rolled back to the batch's write-ahead state, as
// a crash between publishing and checkpointing leaves it). Restarted on
// the same NATS and bucket each time, it ends with every payment in the
// stream exactly once, in chain order: what it published again was dropped
// by the stream's Msg-Id deduplication.
func TestKillAndRestartMidBackfill(t *testing.T) {
	h := newHarness(t)
	txs := h.payBlocks("backfill", 80, 3)
	h.commit(1)
	last := h.head() - 1
	want := h.expected(txs)
	cfg := h.config(1)
	cfg.MaxBlockRange = 6

	nc, err := nats.Connect(h.nats.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// Kill 1: at an arbitrary point.
	w := h.start(cfg)
	var seen atomic.Int64
	sub, err := nc.Subscribe("chain.>", func(*nats.Msg) {
		if seen.Add(1) == 60 {
			w.cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.exited(30 * time.Second); err != nil {
		t.Fatalf("first run: %v", err)
	}
	_ = sub.Unsubscribe()
	c1, _ := h.cursor()
	stored1 := len(h.published())
	if c1.Block >= last || stored1 >= len(want) {
		t.Fatalf("the first kill came too late: checkpoint at %d of %d, %d payments stored", c1.Block, last, stored1)
	}

	// Kill 2: after a batch's messages are in the stream, before its
	// checkpoint.
	kv, err := h.js.KeyValue(h.ctx, checkpoint.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	updates, err := kv.Watch(h.ctx, checkpoint.Key(h.chain.ChainID), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = updates.Stop() }()
	w = h.start(cfg)
	var aheadState []byte
	var aheadOf uint64
	for e := range updates.Updates() {
		if e == nil {
			continue
		}
		var st struct {
			Block    uint64            `json:"block"`
			Inflight []json.RawMessage `json:"inflight"`
		}
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			t.Fatal(err)
		}
		if aheadState == nil {
			if len(st.Inflight) > 0 && st.Block > c1.Block+6 {
				aheadState, aheadOf = e.Value(), st.Block // the write-ahead save of a batch
			}
			continue
		}
		break // the batch's checkpoint: its messages are all in the stream
	}
	if err := w.stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if _, err := kv.Put(h.ctx, checkpoint.Key(h.chain.ChainID), aheadState); err != nil {
		t.Fatal(err)
	}
	beyond := 0
	for _, p := range h.published() {
		if p.payment.BlockNumber > aheadOf {
			beyond++
		}
	}
	if beyond == 0 || aheadOf >= last {
		t.Fatalf("nothing in the stream beyond the rolled-back checkpoint %d (of %d)", aheadOf, last)
	}

	// The restart completes the backfill.
	w = h.start(cfg)
	h.waitCursor(last)
	h.checkStream(want, false)
	dups := w.metric(t, `chainwatcher_logs_published_total{event="proposal_paid",result="duplicate"}`)
	if int(dups) < beyond {
		t.Errorf("%v payments acknowledged as duplicates on restart, want at least the %d stored beyond the checkpoint", dups, beyond)
	}
	if err := w.stop(); err != nil {
		t.Fatalf("last run: %v", err)
	}
	t.Logf("%d payments in %d blocks: first kill after %d stored (checkpoint %d); second rolled back to %d with %d stored beyond; %v republished as duplicates",
		len(want), last-h.chain.DeployBlock, stored1, c1.Block, aheadOf, beyond, dups)
}
