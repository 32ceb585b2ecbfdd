package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/natsconn"
	"github.com/contentledger/contentledger/pkg/natsconn/natsconntest"
	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/app"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
	"github.com/contentledger/contentledger/tools/devchain"
)

const (
	stream = "CHAIN_EVENTS"
	wait   = 10 * time.Second
)

type harness struct {
	t     *testing.T
	ctx   context.Context
	chain *devchain.Chain
	nats  *server.Server
	js    jetstream.JetStream
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ns := testenv.NATS(t)
	return &harness{t: t, ctx: testenv.Context(t), chain: testenv.Chain(t), nats: ns, js: testenv.JetStream(t, ns)}
}

func (h *harness) config(confirmations uint64) app.Config {
	return app.Config{
		RPCURL:          h.chain.URL,
		ContractAddress: h.chain.PaymentLedger.Hex(),
		NATSURL:         h.nats.ClientURL(),
		Confirmations:   confirmations,
		PollInterval:    10 * time.Millisecond,
		StartBlock:      h.chain.DeployBlock,
		MaxBlockRange:   2000,
		RangeGrowAfter:  4,
		RPCTimeout:      5 * time.Second,
		RPCAttempts:     3,
		RPCBackoff:      10 * time.Millisecond,
		RPCBackoffMax:   100 * time.Millisecond,
		RPCCooldown:     50 * time.Millisecond,
		RPCCooldownMax:  time.Second,
		Stream:          stream,
		DuplicateWindow: time.Hour,
		Bucket:          checkpoint.DefaultBucket,
		Replicas:        1,
	}
}

// watcher is one running app.Run.
type watcher struct {
	cancel context.CancelFunc
	done   chan error
	health string // base URL of /health
}

// start runs the watcher until stop (or the end of the test).
func (h *harness) start(cfg app.Config) *watcher {
	h.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	cfg.HTTPListener = ln
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan error, 1), health: "http://" + ln.Addr().String() + "/health"}
	log := zaptest.NewLogger(h.t)
	go func() { w.done <- app.Run(ctx, cfg, log) }()
	h.t.Cleanup(func() { _ = w.stop() })
	return w
}

// stop cancels Run and returns its result; later calls return nil.
func (w *watcher) stop() error {
	w.cancel()
	select {
	case err, ok := <-w.done:
		if !ok {
			return nil
		}
		close(w.done)
		return err
	case <-time.After(wait):
		return errors.New("Run did not return after cancel")
	}
}

func (h *harness) commit(n int) {
	h.t.Helper()
	for range n {
		if _, err := h.chain.Commit(); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) head() uint64 {
	h.t.Helper()
	n, err := h.chain.Client().BlockNumber(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// pay sends one payment per id, from rotating accounts and classes, every
// third one naming a preferred validator. It does not commit.
func (h *harness) pay(ids ...string) []common.Hash {
	h.t.Helper()
	ledger := paycontract.NewPaymentLedger()
	var txs []common.Hash
	for i, id := range ids {
		key := devchain.DevAccounts[1+i%4].MustKey()
		class := payment.Classes[i%len(payment.Classes)]
		pid := common.BytesToHash([]byte(id))
		var (
			tx  common.Hash
			err error
		)
		if i%3 == 2 {
			tx, err = h.chain.SendTx(h.ctx, key, h.chain.PaymentLedger, class.Price(payment.ETH),
				ledger.PackPayForProposalPreferring(pid, uint8(class), devchain.DevAccounts[9].Address))
		} else {
			tx, err = h.chain.PayForProposal(h.ctx, key, pid, class)
		}
		if err != nil {
			h.t.Fatalf("pay %s: %v", id, err)
		}
		txs = append(txs, tx)
	}
	return txs
}

// expected decodes the payments of mined txs as the chain has them, in
// chain order, with the block time to compare timestamps.
func (h *harness) expected(txs []common.Hash) []payment.ProposalPaid {
	h.t.Helper()
	dec := paycontract.Decoder{ChainID: h.chain.ChainID, Contract: h.chain.PaymentLedger}
	var out []payment.ProposalPaid
	for _, tx := range txs {
		r, err := h.chain.WaitMined(h.ctx, tx)
		if err != nil {
			h.t.Fatal(err)
		}
		hdr, err := h.chain.Client().HeaderByHash(h.ctx, r.BlockHash)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, l := range r.Logs {
			p, err := dec.ProposalPaid(*l)
			if err != nil {
				h.t.Fatal(err)
			}
			if p.Timestamp != hdr.Time {
				h.t.Fatalf("event timestamp %d, block time %d", p.Timestamp, hdr.Time)
			}
			out = append(out, p)
		}
	}
	sortChainOrder(out)
	return out
}

func sortChainOrder(ps []payment.ProposalPaid) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && before(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func before(a, b payment.ProposalPaid) bool {
	return a.BlockNumber < b.BlockNumber || a.BlockNumber == b.BlockNumber && a.LogIndex < b.LogIndex
}

// published is one stored message: a payment, or a debt payment when its
// subject is the debts subject.
type published struct {
	seq     uint64
	subject string
	msgID   string
	payment payment.ProposalPaid
	debt    *payment.DebtPaid
}

// published reads the payments of the stream in sequence order.
func (h *harness) published() []published {
	h.t.Helper()
	var out []published
	for _, m := range h.stored() {
		if m.debt == nil {
			out = append(out, m)
		}
	}
	return out
}

// stored reads the whole stream in sequence order, payments and debt
// payments; epoch updates are left out (epochs_test.go reads them).
func (h *harness) stored() []published {
	h.t.Helper()
	s, err := h.js.Stream(h.ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []published
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(h.ctx, seq)
		if err != nil {
			h.t.Fatalf("message %d: %v", seq, err)
		}
		msg := published{seq: seq, subject: m.Subject, msgID: m.Header.Get(jetstream.MsgIDHeader)}
		if m.Subject == payment.EpochSubject(h.chain.ChainID) {
			continue
		}
		if m.Subject == payment.DebtSubject(h.chain.ChainID) {
			var pb ledgerpb.DebtPayment
			if err := proto.Unmarshal(m.Data, &pb); err != nil {
				h.t.Fatalf("message %d: %v", seq, err)
			}
			d, err := payment.DebtPaidFromProto(&pb)
			if err != nil {
				h.t.Fatalf("message %d: %v", seq, err)
			}
			msg.debt = &d
		} else {
			var pb ledgerpb.Payment
			if err := proto.Unmarshal(m.Data, &pb); err != nil {
				h.t.Fatalf("message %d: %v", seq, err)
			}
			if msg.payment, err = payment.FromProto(&pb); err != nil {
				h.t.Fatalf("message %d: %v", seq, err)
			}
		}
		out = append(out, msg)
	}
	return out
}

// cursor reads the checkpoint; found is false before the first one.
func (h *harness) cursor() (watch.Cursor, bool) {
	h.t.Helper()
	kv, err := h.js.KeyValue(h.ctx, checkpoint.DefaultBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return watch.Cursor{}, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := kv.Get(h.ctx, checkpoint.Key(h.chain.ChainID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return watch.Cursor{}, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	var c struct {
		Block uint64      `json:"block"`
		Hash  common.Hash `json:"hash"`
	}
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		h.t.Fatal(err)
	}
	return watch.Cursor{Block: c.Block, Hash: c.Hash}, true
}

// waitCursor waits until the checkpoint is at block.
func (h *harness) waitCursor(block uint64) {
	h.t.Helper()
	testenv.Eventually(h.t, wait, func() bool {
		c, ok := h.cursor()
		return ok && c.Block == block
	}, "checkpoint did not reach block %d", block)
}

// checkStream asserts that the stream holds exactly want, in order, once
// each, with the subject and message ids of ADR 0023; confirmations are
// compared only when checkConfirmations is set.
func (h *harness) checkStream(want []payment.ProposalPaid, checkConfirmations bool) {
	h.t.Helper()
	got := h.published()
	if len(got) != len(want) {
		h.t.Fatalf("stream holds %d payments, want %d", len(got), len(want))
	}
	seen := map[string]bool{}
	for i, g := range got {
		w := want[i]
		if seen[g.msgID] {
			h.t.Errorf("message id %s stored twice", g.msgID)
		}
		seen[g.msgID] = true
		if g.subject != payment.Subject(h.chain.ChainID) {
			h.t.Errorf("message %d on %q", g.seq, g.subject)
		}
		if g.msgID != w.MsgID() || g.msgID != fmt.Sprintf("%d:%s:%d", w.ChainID, w.BlockHash.Hex(), w.LogIndex) {
			h.t.Errorf("message %d id %q, want %q", g.seq, g.msgID, w.MsgID())
		}
		p := g.payment
		if p.Amount.Cmp(w.Amount) != 0 {
			h.t.Errorf("message %d amount %v, want %v", g.seq, p.Amount, w.Amount)
		}
		if checkConfirmations && p.Confirmations < 2 {
			h.t.Errorf("message %d published with %d confirmations", g.seq, p.Confirmations)
		}
		p.Amount, w.Amount = nil, nil
		p.Confirmations, w.Confirmations = 0, 0
		if p != w {
			h.t.Errorf("message %d\n got  %+v\n want %+v", g.seq, p, w)
		}
	}
}

func getHealth(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestPublishesAfterConfirmationsOnly: payments of one block are published
// only when the block has 2 confirmations, then once each, with the fields
// of the chain.
func TestPublishesAfterConfirmationsOnly(t *testing.T) {
	h := newHarness(t)
	w := h.start(h.config(2))

	txs := h.pay("alpha", "beta", "gamma", "delta")
	h.commit(1)
	paid := h.head()
	want := h.expected(txs)
	if len(want) != 4 || want[0].BlockNumber != paid || want[3].BlockNumber != paid {
		t.Fatalf("payments not all in block %d: %+v", paid, want)
	}

	// The watcher has handled everything it may (head - 2) and not the
	// payment block: nothing published.
	h.waitCursor(paid - 2)
	if got := h.published(); len(got) != 0 {
		t.Fatalf("%d payments published with 0 confirmations", len(got))
	}
	// The health view follows the checkpoint: the relay saves it, then
	// reports its progress to the status (OnProgress).
	var code int
	var body map[string]any
	testenv.Eventually(t, wait, func() bool {
		code, body = getHealth(t, w.health)
		return body["cursorBlock"] == float64(paid-2)
	}, "health's cursor did not reach block %d", paid-2)
	if code != http.StatusOK || body["status"] != "ok" || body["chainId"] != float64(devchain.ChainID) {
		t.Errorf("health %d %v", code, body)
	}

	h.commit(1)
	h.waitCursor(paid - 1)
	if got := h.published(); len(got) != 0 {
		t.Fatalf("%d payments published with 1 confirmation", len(got))
	}

	h.commit(1)
	h.waitCursor(paid)
	for i := range want {
		want[i].Confirmations = 2
	}
	h.checkStream(want, true)
	for _, g := range h.published() {
		if g.payment.Confirmations != 2 {
			t.Errorf("message %d: %d confirmations, want 2", g.seq, g.payment.Confirmations)
		}
	}
	// The same progress on /metrics.
	for series, want := range map[string]float64{
		`chainwatcher_logs_published_total{event="proposal_paid",result="stored"}`: 4,
		"chainwatcher_cursor_block":                                      float64(paid),
		"chainwatcher_head_block":                                        float64(paid + 2),
		"chainwatcher_lag_blocks":                                        2,
		"chainwatcher_block_range_size":                                  2000,
		`chainwatcher_build_info{version="` + buildinfo.Version() + `"}`: 1,
	} {
		if got := w.metric(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := w.metric(t, "chainwatcher_blocks_read_total"); got < float64(paid-h.chain.DeployBlock) {
		t.Errorf("blocks read %v, want at least %d", got, paid-h.chain.DeployBlock)
	}
	if got := w.metric(t, `chainwatcher_rpc_endpoint_calls_total{endpoint="1:`+strings.TrimPrefix(h.chain.URL, "http://")+`"}`); got == 0 {
		t.Error("no RPC calls counted for the endpoint")
	}
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v on shutdown, want nil", err)
	}
}

// TestRestartResumesFromCheckpoint: stop the watcher, pay more, restart: the
// stream holds every payment once, in order, with no gap. Then lose the
// checkpoint's progress (as a crash between publishing and checkpointing
// would): the republished range is deduplicated by message id.
func TestRestartResumesFromCheckpoint(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(2)

	first := h.start(cfg)
	var txs []common.Hash
	txs = append(txs, h.pay("a1", "a2")...)
	h.commit(1)
	txs = append(txs, h.pay("a3")...)
	h.commit(3)
	h.waitCursor(h.head() - 2)
	h.checkStream(h.expected(txs), true)
	if err := first.stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}

	// While it is down: payments in several blocks, some confirmed, the
	// last one not yet.
	for i, batch := range [][]string{{"b1", "b2", "b3"}, {"b4"}, {"b5", "b6"}} {
		txs = append(txs, h.pay(batch...)...)
		h.commit(i + 1) // the b6 block gets 2 confirmations from the next two
	}
	txs = append(txs, h.pay("b7")...)
	h.commit(1)
	late := txs[len(txs)-1]

	second := h.start(cfg)
	h.waitCursor(h.head() - 2)
	want := h.expected(txs)
	h.checkStream(want[:len(want)-1], true) // b7 has 0 confirmations
	h.commit(2)
	h.waitCursor(h.head() - 2)
	h.checkStream(want, true)
	if want[len(want)-1].TxHash != late {
		t.Fatal("last payment is not b7")
	}
	if err := second.stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}

	// Rewind the checkpoint to the start by hand, with a zero hash (not
	// checked against the chain): the watcher re-reads and republishes
	// everything.
	kv, err := h.js.KeyValue(h.ctx, checkpoint.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	rewound, _ := json.Marshal(map[string]any{"block": h.chain.DeployBlock, "hash": common.Hash{}})
	if _, err := kv.Put(h.ctx, checkpoint.Key(h.chain.ChainID), rewound); err != nil {
		t.Fatal(err)
	}
	third := h.start(cfg)
	txs = append(txs, h.pay("c1")...)
	h.commit(3)
	h.waitCursor(h.head() - 2)
	h.checkStream(h.expected(txs), true)
	if err := third.stop(); err != nil {
		t.Fatalf("third run: %v", err)
	}
}

// TestRetractsReorgWhileStopped: the watcher publishes a payment and
// stops; while it is down a fork deeper than the confirmations drops the
// payment's block, and the new branch mines the payment again in another
// block. On restart the retraction is published (the hashes it needs were
// checkpointed), then the re-mined payment, once.
func TestRetractsReorgWhileStopped(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(1)
	first := h.start(cfg)
	tx := h.pay("reorg while down")[0]
	h.commit(2)
	r, err := h.chain.WaitMined(h.ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	h.waitCursor(h.head() - 1)
	if got := h.published(); len(got) != 1 || got[0].payment.BlockHash != r.BlockHash {
		t.Fatalf("before the fork: %+v", got)
	}
	if err := first.stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}

	parent, err := h.chain.Client().HeaderByNumber(h.ctx, new(big.Int).Sub(r.BlockNumber, big.NewInt(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.chain.Fork(parent.Hash()); err != nil {
		t.Fatal(err)
	}
	h.commit(3)
	again, err := h.chain.WaitMined(h.ctx, tx)
	if err != nil || again.BlockHash == r.BlockHash {
		t.Fatalf("not re-mined in another block: %v", err)
	}

	second := h.start(cfg)
	h.waitCursor(h.head() - 1)
	got := h.published()
	if len(got) != 3 {
		t.Fatalf("stream holds %d payments, want the original, its retraction and the re-mined one: %+v", len(got), got)
	}
	orig, retraction, remined := got[0], got[1], got[2]
	if retraction.msgID != orig.msgID+":removed" || !retraction.payment.Removed || retraction.payment.BlockHash != r.BlockHash ||
		retraction.payment.TxHash != tx {
		t.Errorf("retraction %+v", retraction)
	}
	if remined.payment.Removed || remined.payment.TxHash != tx || remined.payment.BlockHash != again.BlockHash || remined.msgID == orig.msgID {
		t.Errorf("re-mined payment %+v", remined)
	}
	if got := second.metric(t, `chainwatcher_retractions_published_total{event="proposal_paid",result="stored"}`); got != 1 {
		t.Errorf("retractions metric %v, want 1", got)
	}
	if err := second.stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}
}

// TestPublishesDebtPaymentsInChainOrder: a DebtPaid log between two
// payments of one block is published on the debts subject with its message
// id, between them in the stream; republishing after a rewound checkpoint
// stores nothing twice.
func TestPublishesDebtPaymentsInChainOrder(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(1)
	first := h.start(cfg)
	wallet := devchain.DevAccounts[8].Address
	txs := h.pay("before the debt")
	debtTx, err := h.chain.PayDebt(h.ctx, devchain.DevAccounts[6].MustKey(), wallet, payment.Standard.Price(payment.ETH))
	if err != nil {
		t.Fatal(err)
	}
	txs = append(txs, h.pay("after the debt")...) // the same account as the first: after it in the block
	h.commit(2)
	h.waitCursor(h.head() - 1)

	r, err := h.chain.WaitMined(h.ctx, debtTx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := paycontract.Decoder{ChainID: h.chain.ChainID, Contract: h.chain.PaymentLedger}.DebtPaid(*r.Logs[0])
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		got := h.stored()
		if len(got) != 3 || got[0].debt != nil || got[1].debt == nil || got[2].debt != nil {
			t.Fatalf("stream holds %+v, want payment, debt payment, payment", got)
		}
		g := got[1]
		if g.subject != "chain.1337.debts" || g.msgID != want.MsgID() {
			t.Errorf("debt payment on %q with id %q, want chain.1337.debts and %q", g.subject, g.msgID, want.MsgID())
		}
		d := *g.debt
		if d.Amount.Cmp(want.Amount) != 0 || d.Confirmations != 1 {
			t.Errorf("debt payment amount %v with %d confirmations", d.Amount, d.Confirmations)
		}
		w := want
		d.Amount, d.Confirmations, w.Amount = nil, 0, nil
		if d != w {
			t.Errorf("debt payment\n got  %+v\n want %+v", d, w)
		}
		h.checkStream(h.expected(txs), false)
	}
	check()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	kv, err := h.js.KeyValue(h.ctx, checkpoint.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	rewound, _ := json.Marshal(map[string]any{"block": h.chain.DeployBlock, "hash": common.Hash{}})
	if _, err := kv.Put(h.ctx, checkpoint.Key(h.chain.ChainID), rewound); err != nil {
		t.Fatal(err)
	}
	second := h.start(cfg)
	h.commit(1)
	h.waitCursor(h.head() - 1)
	check()
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRunStopsCleanlyWhileWaiting: cancelling during start-up retries (no
// NATS) or while polling returns nil; a bad configuration is an error.
func TestRunStopsCleanlyWhileWaiting(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(2)
	cfg.NATSURL = "nats://127.0.0.1:1" // nothing listens: Run keeps retrying
	w := h.start(cfg)
	testenv.Eventually(t, wait, func() bool {
		code, body := getHealth(t, w.health)
		return code == http.StatusServiceUnavailable && body["status"] == "starting"
	}, "health does not report starting")
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v when cancelled during start-up", err)
	}

	bad := h.config(2)
	bad.ContractAddress = "0x123"
	if err := app.Run(h.ctx, bad, zaptest.NewLogger(t)); !errors.Is(err, app.ErrInvalidConfig) {
		t.Errorf("Run with a bad address: %v, want ErrInvalidConfig", err)
	}
}

func TestLoadConfigFromEnvironment(t *testing.T) {
	t.Setenv("WATCHER_CONTRACT_ADDRESS", "0x5FbDB2315678afecb367f032d93F642f64180aa3")
	cfg, err := app.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := app.Config{
		RPCURL: "http://127.0.0.1:8545", ContractAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
		NATSURL: "nats://127.0.0.1:4222", Confirmations: 2, PollInterval: time.Second, StartBlock: 0,
		MaxBlockRange: 2000, Stream: "CHAIN_EVENTS", DuplicateWindow: 24 * time.Hour, Bucket: "CHAIN_WATCHER",
		Replicas: 1, HTTPAddr: "127.0.0.1:8091", ReorgDepth: 128,
		RangeGrowAfter: 4, RPCTimeout: 30 * time.Second, RPCAttempts: 3, RPCBackoff: 250 * time.Millisecond,
		RPCBackoffMax: 5 * time.Second, RPCCooldown: 5 * time.Second, RPCCooldownMax: 2 * time.Minute,
		EpochLength: 384 * time.Second, EpochInterval: 12 * time.Second, LogLevel: "info",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults\n got  %+v\n want %+v", cfg, want)
	}

	t.Setenv("WATCHER_CONFIRMATIONS", "12")
	t.Setenv("WATCHER_POLL_INTERVAL", "250ms")
	t.Setenv("WATCHER_START_BLOCK", "19000000")
	t.Setenv("WATCHER_FINALIZED", "true")
	t.Setenv("WATCHER_REORG_DEPTH", "64")
	if cfg, err = app.LoadConfig(); err != nil || cfg.Confirmations != 12 || cfg.PollInterval != 250*time.Millisecond || cfg.StartBlock != 19_000_000 ||
		!cfg.Finalized || cfg.ReorgDepth != 64 {
		t.Errorf("overrides: %+v, %v", cfg, err)
	}
	t.Setenv("WATCHER_REORG_DEPTH", "5000")
	if _, err := app.LoadConfig(); !errors.Is(err, app.ErrInvalidConfig) {
		t.Errorf("reorg depth beyond the bound: %v", err)
	}
	t.Setenv("WATCHER_REORG_DEPTH", "64")
	t.Setenv("WATCHER_STREAM", "bad.name")
	if _, err := app.LoadConfig(); !errors.Is(err, app.ErrInvalidConfig) {
		t.Errorf("stream with a dot: %v", err)
	}
	t.Setenv("WATCHER_STREAM", "CHAIN_EVENTS")

	// Several endpoints, comma separated, blanks ignored.
	t.Setenv("WATCHER_RPC_URL", " https://a.example/v3/KEY , ,wss://b.example:8546")
	cfg, err = app.LoadConfig()
	if err != nil || !slices.Equal(cfg.RPCURLs(), []string{"https://a.example/v3/KEY", "wss://b.example:8546"}) {
		t.Errorf("endpoint list: %q, %v", cfg.RPCURLs(), err)
	}
	for _, bad := range []string{"", " , ", "ftp://a.example", "https://", "http://a.example,/relative"} {
		t.Setenv("WATCHER_RPC_URL", bad)
		_, err := app.LoadConfig()
		if !errors.Is(err, app.ErrInvalidConfig) {
			t.Errorf("RPC_URL %q: %v", bad, err)
		}
	}
	t.Setenv("WATCHER_RPC_URL", "https://secret.example/v3/APIKEY,unix:///APIKEY2")
	if _, err := app.LoadConfig(); err == nil || strings.Contains(err.Error(), "APIKEY") {
		t.Errorf("a bad endpoint's error quotes its URL: %v", err)
	}
	t.Setenv("WATCHER_RPC_URL", "http://127.0.0.1:8545")
	for env, bad := range map[string]string{"WATCHER_RPC_ATTEMPTS": "0", "WATCHER_RPC_TIMEOUT": "0s", "WATCHER_RPC_BACKOFF_MAX": "1ms",
		"WATCHER_RPC_COOLDOWN": "10m", "WATCHER_RANGE_GROW_AFTER": "0", "WATCHER_EPOCH_LENGTH": "1500ms",
		"WATCHER_EPOCH_INTERVAL": "-1s", "WATCHER_BEACON_URL": "ftp://beacon.example"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, bad)
			if _, err := app.LoadConfig(); !errors.Is(err, app.ErrInvalidConfig) {
				t.Errorf("%s=%s: %v", env, bad, err)
			}
		})
	}
}

// TestRunRefusesOldNATSServer: a watcher whose NATS server announces
// 2.11.9 refuses to start, naming the version found and the one required;
// so does one that reaches such a server only after it started waiting.
func TestRunRefusesOldNATSServer(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(2)
	cfg.NATSURL = natsconntest.Server(t, "2.11.9")
	err := app.Run(h.ctx, cfg, zaptest.NewLogger(t))
	if !errors.Is(err, natsconn.ErrServerVersion) || !strings.Contains(err.Error(), "2.11.9") ||
		!strings.Contains(err.Error(), natsconn.MinServerVersion) {
		t.Fatalf("Run: %v, want a refusal naming 2.11.9 and %s", err, natsconn.MinServerVersion)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	late := h.config(2)
	late.NATSURL = "nats://" + addr
	w := h.start(late)
	testenv.Eventually(t, wait, func() bool {
		code, body := getHealth(t, w.health)
		return code == http.StatusServiceUnavailable && body["status"] == "starting"
	}, "health does not report starting")
	if l, err = net.Listen("tcp", addr); err != nil {
		t.Fatal(err)
	}
	natsconntest.Serve(t, l, "2.10.3")
	select {
	case err := <-w.done:
		close(w.done) // for the cleanup's stop
		if !errors.Is(err, natsconn.ErrServerVersion) || !strings.Contains(err.Error(), "2.10.3") {
			t.Fatalf("Run: %v, want a refusal naming 2.10.3", err)
		}
	case <-time.After(wait):
		t.Fatal("the watcher did not stop when it reached a 2.10.3 server")
	}
}
