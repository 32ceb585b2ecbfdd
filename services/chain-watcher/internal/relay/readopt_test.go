package relay_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/checkpoint"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/relay"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// flipTo makes the block hash, of a branch a fork left, the head of the
// chain again (its branch canonical up to it), then mines n blocks on it.
func (e *env) flipTo(hash common.Hash, n int) {
	e.t.Helper()
	if err := e.chain.Fork(hash); err != nil {
		e.t.Fatal(err)
	}
	e.commit(n)
	if e.canonical(e.number(hash)) != hash {
		e.t.Fatalf("block %s is not canonical after the flip", hash.Hex())
	}
}

// number returns the number of the block hash.
func (e *env) number(hash common.Hash) uint64 {
	e.t.Helper()
	h, err := e.chain.Client().HeaderByHash(e.ctx, hash)
	if err != nil {
		e.t.Fatal(err)
	}
	return h.Number.Uint64()
}

// published is what a pair of messages (the payment, then the debt
// payment, of one block) must be: their block, and the id's suffix after
// the log index.
type published struct {
	block  common.Hash
	suffix string
}

// checkPairs asserts that the stream holds exactly the pairs of messages
// want names, in that order: the payment payTx then the debt payment
// debtTx of the block, under <chainId>:<blockHash>:<logIndex><suffix>. So
// every id is in the stream once. A retraction (":removed") has the
// payload of the publication it retracts but for removed, and a log
// published again has the payload of its first publication (the
// confirmations counted when it was read aside).
func (e *env) checkPairs(payTx, debtTx common.Hash, want ...published) []msg {
	e.t.Helper()
	got := e.messages()
	if len(got) != 2*len(want) {
		e.t.Fatalf("stream holds %d messages, want %d: %v", len(got), 2*len(want), got)
	}
	publication := map[string]proto.Message{} // by block, transaction and generation
	first := map[string]proto.Message{}       // by block and transaction
	for i, m := range got {
		w := want[i/2]
		tx := []common.Hash{payTx, debtTx}[i%2]
		gen, removed := strings.CutSuffix(w.suffix, ":removed")
		id := fmt.Sprintf("%d:%s:%d%s", e.chain.ChainID, m.block.Hex(), m.index, w.suffix)
		if m.block != w.block || m.tx != tx || m.removed != removed || m.id != id {
			e.t.Fatalf("message %d is %v (block %s, tx %s, removed %v), want %s of tx %s in block %s (stream %v)",
				i+1, m, m.block.Hex(), m.tx.Hex(), m.removed, id, tx.Hex(), w.block.Hex(), got)
		}
		wire := proto.Clone(m.wire)
		switch p := wire.(type) {
		case *ledgerpb.Payment:
			p.Removed = false
		case *ledgerpb.DebtPayment:
			p.Removed = false
		}
		key := m.block.Hex() + tx.Hex()
		if removed {
			if pub, ok := publication[key+gen]; !ok || !proto.Equal(wire, pub) {
				e.t.Errorf("message %d %v: retraction payload %v, want that of the publication %v", i+1, m, m.wire, pub)
			}
			continue
		}
		publication[key+gen] = wire
		unread := proto.Clone(wire)
		switch p := unread.(type) {
		case *ledgerpb.Payment:
			p.Confirmations = 0
		case *ledgerpb.DebtPayment:
			p.Confirmations = 0
		}
		if orig, ok := first[key]; !ok {
			first[key] = unread
		} else if !proto.Equal(unread, orig) {
			e.t.Errorf("message %d %v: payload %v differs from the first publication's %v", i+1, m, m.wire, orig)
		}
	}
	return got
}

// TestReadoptedBlockIsPublishedAgain: a block published, dropped by a
// reorg (retracted), then canonical again (the chain flips back) is
// published again under new ids (":g1"), which the stream's deduplication
// of the first ones does not drop; its second retraction has an id of its
// own too (":g1:removed"), and the other branch's block, back in turn, is
// published in its generation 1.
func TestReadoptedBlockIsPublishedAgain(t *testing.T) {
	e := newEnv(t, 0)
	r := e.relay(nil)
	e.drain(r)
	block, payTx, debtTx := e.payBlock("flip")
	e.drain(r)
	a := e.canonical(block)

	e.fork(block)
	e.commit(2) // the transactions again, in block b
	b := e.canonical(block)
	if b == a {
		t.Fatal("the fork did not replace the block")
	}
	e.drain(r)
	e.checkPairs(payTx, debtTx, published{a, ""}, published{a, ":removed"}, published{b, ""})

	// The chain flips back to a: b is retracted, a published again.
	e.flipTo(a, 1)
	e.drain(r)
	e.checkPairs(payTx, debtTx, published{a, ""}, published{a, ":removed"}, published{b, ""}, published{b, ":removed"},
		published{a, ":g1"})
	if j, found, err := e.store().Journal(e.ctx, block, a); err != nil || !found || j.Generation != 1 {
		t.Fatalf("journal of the re-adopted block: %+v, found=%v, %v; want generation 1", j, found, err)
	}

	// And to b again: a's second retraction and b's second publication
	// are new ids as well.
	e.flipTo(b, 1)
	e.drain(r)
	want := []published{{a, ""}, {a, ":removed"}, {b, ""}, {b, ":removed"}, {a, ":g1"}, {a, ":g1:removed"}, {b, ":g1"}}
	e.checkPairs(payTx, debtTx, want...)
	st := r.State()
	if st.Cursor.Hash != e.canonical(st.Cursor.Block) {
		t.Errorf("cursor %+v is not canonical", st.Cursor)
	}
	wantRetracted := []checkpoint.Retracted{{Number: block, Hash: a, Count: 2}, {Number: block, Hash: b, Count: 1}}
	if !slices.ContainsFunc(st.Retracted, func(x checkpoint.Retracted) bool { return x == wantRetracted[0] }) ||
		!slices.ContainsFunc(st.Retracted, func(x checkpoint.Retracted) bool { return x == wantRetracted[1] }) || len(st.Retracted) != 2 {
		t.Errorf("retracted blocks %+v, want %+v", st.Retracted, wantRetracted)
	}

	// A restart reads the same state: nothing is published again.
	e.commit(2)
	e.drain(e.relay(nil))
	e.checkPairs(payTx, debtTx, want...)
}

// TestCrashBetweenRepublicationAndCheckpoint: the process dies after a
// re-adopted block's logs reached the stream (generation 1) and before the
// checkpoint. The restarted relay publishes them again in the same
// generation, which the stream acknowledges as duplicates.
func TestCrashBetweenRepublicationAndCheckpoint(t *testing.T) {
	e := newEnv(t, 0)
	r := e.relay(nil)
	e.drain(r)
	block, payTx, debtTx := e.payBlock("flip-crash")
	e.drain(r)
	a := e.canonical(block)
	e.fork(block)
	e.commit(2)
	b := e.canonical(block)
	e.drain(r)
	e.flipTo(a, 1)

	// Fail the save of the cursor past the re-adopted block.
	crashing := &failingStore{Store: e.store(), fail: func(st checkpoint.State) bool {
		return st.Cursor.Block >= block && slices.ContainsFunc(st.Recent, func(x checkpoint.Block) bool { return x.Number == block && x.Hash == a })
	}}
	first := e.relay(crashing)
	for !crashing.failed {
		if _, err := first.Step(e.ctx); err != nil && !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
	}
	want := []published{{a, ""}, {a, ":removed"}, {b, ""}, {b, ":removed"}, {a, ":g1"}}
	e.checkPairs(payTx, debtTx, want...)
	if st, _, err := e.store().Load(e.ctx); err != nil || st.Cursor.Block >= block ||
		!slices.ContainsFunc(st.Inflight, func(x checkpoint.Block) bool { return x.Number == block && x.Hash == a }) {
		t.Fatalf("stored state after the crash %+v (%v), want the re-adopted block in flight", st, err)
	}

	rec := e.recorder()
	restarted := e.batchRelay(nil, rec, 0, nil)
	e.drain(restarted)
	if rec.stored != 0 || rec.dupes != 2 {
		t.Errorf("the restart stored %d logs and found %d duplicates, want 0 and 2", rec.stored, rec.dupes)
	}
	e.checkPairs(payTx, debtTx, want...)
	if st := restarted.State(); st.Cursor.Hash != e.canonical(st.Cursor.Block) || st.Cursor.Block < block || len(st.Inflight) != 0 {
		t.Errorf("state after the restart %+v", st)
	}
}

// TestRetractedBlocksLeaveWithTheWindow: the state remembers a retracted
// block only while it is within Depth of the cursor; below, it could only
// come back with a reorg deeper than the window, which stops the relay.
func TestRetractedBlocksLeaveWithTheWindow(t *testing.T) {
	const depth = 4
	e := newEnv(t, 0)
	w, err := watch.New(e.chain.Client(), watch.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger, AnchorDepth: depth})
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(w, publish.NewPublisher(e.js, stream), e.store(), relay.Config{StartBlock: e.chain.DeployBlock, Depth: depth, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.drain(r)
	block, _, _ := e.payBlock("window")
	e.drain(r)
	a := e.canonical(block)
	e.forkDropping(block)
	e.commit(1)
	e.drain(r)
	if got := r.State().Retracted; len(got) != 1 || got[0] != (checkpoint.Retracted{Number: block, Hash: a, Count: 1}) {
		t.Fatalf("retracted blocks %+v, want block %d %s once", got, block, a.Hex())
	}
	for r.State().Cursor.Block < block+depth {
		e.commit(1)
		e.drain(r)
		if got := r.State().Retracted; len(got) != 1 {
			t.Fatalf("cursor %d: retracted blocks %+v, want block %d still", r.State().Cursor.Block, got, block)
		}
	}
	e.commit(1)
	e.drain(r)
	if st := r.State(); st.Cursor.Block != block+depth+1 || len(st.Retracted) != 0 {
		t.Fatalf("cursor %d: retracted blocks %+v, want none", st.Cursor.Block, st.Retracted)
	}
}
