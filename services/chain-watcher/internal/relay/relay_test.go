package relay_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/relay"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
	"github.com/contentledger/contentledger/tools/devchain"
)

const stream = "CHAIN_EVENTS"

// env is a dev chain running the real contract, a JetStream server with
// the stream and the checkpoint bucket, and what a relay is built from.
type env struct {
	t     *testing.T
	ctx   context.Context
	chain *devchain.Chain
	js    jetstream.JetStream
	conf  uint64
}

func newEnv(t *testing.T, confirmations uint64) *env {
	t.Helper()
	e := &env{t: t, ctx: testenv.Context(t), chain: testenv.Chain(t), js: testenv.JetStream(t, testenv.NATS(t)), conf: confirmations}
	if _, err := publish.EnsureStream(e.ctx, e.js, publish.StreamConfig{Name: stream, DuplicateWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return e
}

// store opens the checkpoint store afresh, as a restarted process does.
func (e *env) store() *checkpoint.Store {
	e.t.Helper()
	s, err := checkpoint.Open(e.ctx, e.js, checkpoint.Config{}, e.chain.ChainID)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// relay builds a relay as app.Run does, over store (a fresh one when nil).
func (e *env) relay(store relay.Store) *relay.Relay {
	e.t.Helper()
	if store == nil {
		store = e.store()
	}
	w, err := watch.New(e.chain.Client(), watch.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger,
		Confirmations: e.conf, AnchorDepth: relay.DefaultDepth, Logger: zaptest.NewLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := relay.New(w, publish.NewPublisher(e.js, stream), store, relay.Config{
		StartBlock: e.chain.DeployBlock, PollInterval: 5 * time.Millisecond, Logger: zaptest.NewLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// drain steps r until it is caught up.
func (e *env) drain(r *relay.Relay) {
	e.t.Helper()
	for range 1000 {
		more, err := r.Step(e.ctx)
		if err != nil {
			e.t.Fatalf("step: %v", err)
		}
		if !more {
			return
		}
	}
	e.t.Fatal("the relay never caught up")
}

func (e *env) commit(n int) {
	e.t.Helper()
	for range n {
		if _, err := e.chain.Commit(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// payBlock pays for a proposal and a GC debt in one block and returns that
// block's number and the two transactions.
func (e *env) payBlock(id string) (block uint64, payTx, debtTx common.Hash) {
	e.t.Helper()
	payTx, err := e.chain.PayForProposal(e.ctx, devchain.DevAccounts[1].MustKey(), common.BytesToHash([]byte(id)), payment.Express)
	if err != nil {
		e.t.Fatal(err)
	}
	debtTx, err = e.chain.PayDebt(e.ctx, devchain.DevAccounts[2].MustKey(), devchain.DevAccounts[7].Address, big.NewInt(1_000_000_000_000))
	if err != nil {
		e.t.Fatal(err)
	}
	e.commit(1)
	r, err := e.chain.WaitMined(e.ctx, payTx)
	if err != nil {
		e.t.Fatal(err)
	}
	if d, err := e.chain.WaitMined(e.ctx, debtTx); err != nil || d.BlockHash != r.BlockHash {
		e.t.Fatalf("the debt payment is not in the payment's block (%v)", err)
	}
	return r.BlockNumber.Uint64(), payTx, debtTx
}

// fork drops block and everything above it: the chain continues from its
// parent, and mines the dropped transactions again.
func (e *env) fork(block uint64) { e.forkWith(block, e.chain.Fork) }

// forkDropping is fork, except that the new branch never mines the
// dropped transactions.
func (e *env) forkDropping(block uint64) { e.forkWith(block, e.chain.ForkDropping) }

func (e *env) forkWith(block uint64, fork func(common.Hash) error) {
	e.t.Helper()
	parent, err := e.chain.Client().HeaderByNumber(e.ctx, new(big.Int).SetUint64(block-1))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := fork(parent.Hash()); err != nil {
		e.t.Fatal(err)
	}
}

// msg is one message of the stream.
type msg struct {
	subject, id string
	removed     bool
	gen         uint32 // the generation its id names
	tx, block   common.Hash
	number      uint64
	index       uint
	wire        proto.Message
}

func (m msg) String() string {
	return fmt.Sprintf("%s %s", m.subject, m.id)
}

// stored returns every message of the stream, in order.
func (e *env) stored() []*jetstream.RawStreamMsg {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, stream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		raw, err := s.GetMsg(e.ctx, seq)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

// messages reads the whole stream in order.
func (e *env) messages() []msg {
	e.t.Helper()
	var out []msg
	for _, raw := range e.stored() {
		seq := raw.Sequence
		m := msg{subject: raw.Subject, id: raw.Header.Get(jetstream.MsgIDHeader)}
		if raw.Subject == payment.DebtSubject(e.chain.ChainID) {
			var w ledgerpb.DebtPayment
			if err := proto.Unmarshal(raw.Data, &w); err != nil {
				e.t.Fatal(err)
			}
			d, err := payment.DebtPaidFromProto(&w)
			if err != nil {
				e.t.Fatal(err)
			}
			m.removed, m.tx, m.block, m.number, m.index, m.wire = d.Removed, d.TxHash, d.BlockHash, d.BlockNumber, d.LogIndex, &w
			m.gen = idGeneration(m.id)
			if want := (publish.Log{Debt: &d, Generation: m.gen}).MsgID(); want != m.id {
				e.t.Errorf("message %d: id %s for debt payment %s", seq, m.id, want)
			}
		} else {
			var w ledgerpb.Payment
			if err := proto.Unmarshal(raw.Data, &w); err != nil {
				e.t.Fatal(err)
			}
			p, err := payment.FromProto(&w)
			if err != nil {
				e.t.Fatal(err)
			}
			m.removed, m.tx, m.block, m.number, m.index, m.wire = p.Removed, p.TxHash, p.BlockHash, p.BlockNumber, p.LogIndex, &w
			m.gen = idGeneration(m.id)
			if want := (publish.Log{Payment: &p, Generation: m.gen}).MsgID(); want != m.id {
				e.t.Errorf("message %d: id %s for payment %s", seq, m.id, want)
			}
		}
		out = append(out, m)
	}
	return out
}

// idGeneration reads the generation a message id names (":g<n>"), 0 when
// none.
func idGeneration(id string) uint32 {
	for part := range strings.SplitSeq(id, ":") {
		if g, err := strconv.ParseUint(strings.TrimPrefix(part, "g"), 10, 32); err == nil && strings.HasPrefix(part, "g") {
			return uint32(g)
		}
	}
	return 0
}

// canonical returns the hash of the canonical block at n.
func (e *env) canonical(n uint64) common.Hash {
	e.t.Helper()
	h, err := e.chain.Client().HeaderByNumber(e.ctx, new(big.Int).SetUint64(n))
	if err != nil {
		e.t.Fatal(err)
	}
	return h.Hash()
}

// checkReorgStream asserts the stream after a reorg that dropped block
// `old` (holding payTx and debtTx) and re-mined both in block `now`: the
// originals, their retractions with the same payload, then the re-mined
// ones, each exactly once.
func (e *env) checkReorgStream(old common.Hash, payTx, debtTx common.Hash, remined bool) {
	e.t.Helper()
	got := e.messages()
	want := 4
	if remined {
		want = 6
	}
	if len(got) != want {
		e.t.Fatalf("stream holds %d messages, want %d: %v", len(got), want, got)
	}
	pay, debt := got[0], got[1]
	if pay.tx != payTx || debt.tx != debtTx || pay.block != old || debt.block != old || pay.removed || debt.removed ||
		pay.subject != payment.Subject(e.chain.ChainID) || debt.subject != payment.DebtSubject(e.chain.ChainID) {
		e.t.Fatalf("originals %v, %v", pay, debt)
	}
	for i, orig := range []msg{pay, debt} {
		r := got[2+i]
		if !r.removed || r.id != orig.id+":removed" || r.subject != orig.subject {
			e.t.Fatalf("retraction %d: %v removed=%v, want %s:removed", i, r, r.removed, orig.id)
		}
		// The same payload, with removed set.
		same := proto.Clone(r.wire)
		switch w := same.(type) {
		case *ledgerpb.Payment:
			w.Removed = false
		case *ledgerpb.DebtPayment:
			w.Removed = false
		}
		if !proto.Equal(same, orig.wire) {
			e.t.Errorf("retraction %d: payload %v differs from the original %v", i, r.wire, orig.wire)
		}
	}
	if !remined {
		return
	}
	rp, rd := got[4], got[5]
	if rp.tx != payTx || rd.tx != debtTx || rp.removed || rd.removed || rp.block == old || rp.block != e.canonical(rp.number) || rd.block != rp.block {
		e.t.Fatalf("re-mined %v, %v", rp, rd)
	}
}

// TestReorgRetractsAndRepublishes: a fork drops the block holding a payment
// and a debt payment after the relay published them. Their retractions
// are published (same payload, removed, ":removed" ids), the cursor
// rewinds, and the same transactions, re-mined on the new branch in a
// block with another hash, are published once under new ids. With no
// confirmations the fork may be one block deep; with two it must drop
// three blocks to reach a published one.
func TestReorgRetractsAndRepublishes(t *testing.T) {
	for _, conf := range []uint64{0, 2} {
		t.Run(fmt.Sprintf("confirmations=%d", conf), func(t *testing.T) {
			e := newEnv(t, conf)
			r := e.relay(nil)
			e.drain(r)
			block, payTx, debtTx := e.payBlock("reorged")
			e.commit(int(conf))
			e.drain(r)
			if got := len(e.messages()); got != 2 {
				t.Fatalf("%d messages before the fork", got)
			}
			old := e.canonical(block)

			e.fork(block)
			e.commit(1 + int(conf)) // the transactions again, then the confirmations
			if e.canonical(block) == old {
				t.Fatal("the fork did not replace the block")
			}
			e.drain(r)
			e.checkReorgStream(old, payTx, debtTx, true)
			st := r.State()
			if st.Cursor.Hash != e.canonical(st.Cursor.Block) {
				t.Errorf("cursor %+v is not canonical", st.Cursor)
			}
			if _, found, err := e.store().Journal(e.ctx, block, old); found || err != nil {
				t.Errorf("the dropped block's journal is still there (%v)", err)
			}

			// Nothing more to say: the stream does not grow.
			e.commit(2)
			e.drain(r)
			e.checkReorgStream(old, payTx, debtTx, true)
		})
	}
}

// TestReorgDroppedForGood: the fork's branch does not carry the
// transactions again. Only the retractions follow the originals.
func TestReorgDroppedForGood(t *testing.T) {
	e := newEnv(t, 0)
	r := e.relay(nil)
	block, payTx, debtTx := e.payBlock("gone")
	e.drain(r)
	old := e.canonical(block)
	e.forkDropping(block)
	e.commit(3)
	e.drain(r)
	e.checkReorgStream(old, payTx, debtTx, false)
}

// failingStore fails the Save whose state fail picks, once, as a crash
// right before that write would.
type failingStore struct {
	*checkpoint.Store
	fail   func(checkpoint.State) bool
	failed bool
}

var errCrash = errors.New("crash")

func (s *failingStore) Save(ctx context.Context, st checkpoint.State) error {
	if !s.failed && s.fail(st) {
		s.failed = true
		return errCrash
	}
	return s.Store.Save(ctx, st)
}

// TestCrashBetweenRetractionAndCheckpoint: the process dies after the
// retractions are published and before the rewound state is saved. The
// restarted relay finds the same non-canonical cursor, publishes the same
// retractions (the stream drops them as duplicates), and the re-mined
// payment is published once.
func TestCrashBetweenRetractionAndCheckpoint(t *testing.T) {
	e := newEnv(t, 0)
	r := e.relay(nil)
	block, payTx, debtTx := e.payBlock("crash")
	e.drain(r)
	old := e.canonical(block)
	e.fork(block)
	e.commit(2)

	crashing := &failingStore{Store: e.store(), fail: func(st checkpoint.State) bool { return st.Cursor.Block < block }}
	first := e.relay(crashing)
	for !crashing.failed {
		if _, err := first.Step(e.ctx); err != nil && !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
	}
	if got := e.messages(); len(got) != 4 || !got[2].removed || !got[3].removed {
		t.Fatalf("before the crash the stream holds %v, want the originals and their retractions", got)
	}
	e.drain(e.relay(nil)) // the restart
	e.checkReorgStream(old, payTx, debtTx, true)
}

// TestCrashMidBatchThenReorg: the process dies while publishing a batch
// (the payment is in the stream, the checkpoint is not written), and a
// fork drops the block before it restarts. The journal written ahead lets
// the restarted relay retract the payment though its cursor never covered
// the block.
func TestCrashMidBatchThenReorg(t *testing.T) {
	e := newEnv(t, 0)
	e.drain(e.relay(nil))
	block, payTx, debtTx := e.payBlock("midbatch")
	old := e.canonical(block)

	// The payment is published, then the debt payment fails: a crash
	// between the two.
	w, err := watch.New(e.chain.Client(), watch.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger, AnchorDepth: relay.DefaultDepth})
	if err != nil {
		t.Fatal(err)
	}
	first, err := relay.New(w, &debtFailing{Publisher: publish.NewPublisher(e.js, stream)}, e.store(), relay.Config{StartBlock: e.chain.DeployBlock, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Step(e.ctx); !errors.Is(err, errCrash) {
		t.Fatalf("step: %v, want the crash", err)
	}
	if st := first.State(); st.Cursor.Block >= block || len(st.Inflight) != 1 || st.Inflight[0].Hash != old {
		t.Fatalf("state after the crash %+v, want the block in flight below the cursor", st)
	}

	e.fork(block)
	e.commit(2)
	e.drain(e.relay(nil)) // the restart
	got := e.messages()
	// The payment, the retractions of what the journal names (the debt
	// payment's too: the journal records what was about to be published,
	// and a retraction of a message never received changes nothing for a
	// consumer), then both re-mined.
	if len(got) != 5 || got[0].tx != payTx || got[0].removed || got[1].id != got[0].id+":removed" ||
		got[2].tx != debtTx || !got[2].removed || got[2].block != old ||
		got[3].tx != payTx || got[3].block == old || got[4].tx != debtTx || got[4].block != got[3].block || got[3].removed || got[4].removed {
		t.Fatalf("stream %v", got)
	}
}

// debtFailing fails every debt payment's publication.
type debtFailing struct{ relay.Publisher }

func (p *debtFailing) PublishDebt(context.Context, payment.DebtPaid) (publish.Result, error) {
	return publish.Result{}, errCrash
}

// TestRestartedRelayKeepsWatching: a relay over an existing state goes on
// from its cursor and publishes nothing twice.
func TestRestartedRelayKeepsWatching(t *testing.T) {
	e := newEnv(t, 1)
	e.payBlock("before")
	e.commit(1)
	e.drain(e.relay(nil))
	e.payBlock("after")
	e.commit(1)
	e.drain(e.relay(nil))
	got := e.messages()
	if len(got) != 4 || slices.ContainsFunc(got, func(m msg) bool { return m.removed }) {
		t.Fatalf("stream %v", got)
	}
}

// TestReorgTooDeep: when none of the recorded blocks is canonical any
// more, the relay stops with ErrReorgTooDeep rather than go on.
func TestReorgTooDeep(t *testing.T) {
	e := newEnv(t, 0)
	store := e.store()
	// A state whose only recorded block is not on this chain.
	if err := store.Save(e.ctx, checkpoint.State{Cursor: watch.Cursor{Block: e.chain.DeployBlock, Hash: common.HexToHash("0xdead")}}); err != nil {
		t.Fatal(err)
	}
	e.commit(1)
	r := e.relay(store)
	err := r.Run(e.ctx)
	if !errors.Is(err, relay.ErrReorgTooDeep) {
		t.Fatalf("Run = %v, want ErrReorgTooDeep", err)
	}
}

// mismatchOnce answers one parent mismatch though nothing changed, as a
// node behind a load balancer that lags might.
type mismatchOnce struct {
	relay.Reader
	done bool
}

func (m *mismatchOnce) Next(ctx context.Context, next uint64, parent common.Hash) (watch.Batch, bool, error) {
	if !m.done {
		m.done = true
		return watch.Batch{}, false, fmt.Errorf("%w: a lagging node", watch.ErrParentMismatch)
	}
	return m.Reader.Next(ctx, next, parent)
}

// TestParentMismatchWithCanonicalCursor: a parent mismatch while the
// cursor block is still canonical retracts nothing and rewinds nothing;
// the relay waits for the next poll and reads on.
func TestParentMismatchWithCanonicalCursor(t *testing.T) {
	e := newEnv(t, 0)
	e.payBlock("steady")
	e.drain(e.relay(nil))
	before := len(e.messages())
	w, err := watch.New(e.chain.Client(), watch.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger, AnchorDepth: relay.DefaultDepth})
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(&mismatchOnce{Reader: w}, publish.NewPublisher(e.js, stream), e.store(), relay.Config{StartBlock: e.chain.DeployBlock, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	more, err := r.Step(e.ctx)
	if err != nil || more {
		t.Fatalf("step on the mismatch: more=%v err=%v, want a quiet wait", more, err)
	}
	cursor := r.State().Cursor
	if cursor.Hash != e.canonical(cursor.Block) {
		t.Fatalf("cursor %+v moved off the chain", cursor)
	}
	e.payBlock("after")
	e.drain(r)
	if got := e.messages(); len(got) != before+2 || slices.ContainsFunc(got, func(m msg) bool { return m.removed }) {
		t.Fatalf("stream %v", got)
	}
}
