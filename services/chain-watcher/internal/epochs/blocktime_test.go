package epochs_test

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/epochs"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
	"github.com/contentledger/contentledger/tools/devchain"
)

const length = 4 // seconds per epoch in these tests

// pool is an RPC pool of one endpoint at url, as the watcher builds it.
func pool(t *testing.T, url string) *rpcpool.Pool {
	t.Helper()
	c, err := ethclient.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p, err := rpcpool.New([]rpcpool.Endpoint{{Name: "1:chain", URL: url, Client: c}}, rpcpool.Config{
		CallTimeout: 5 * time.Second, Attempts: 2,
		Retry:    backoff.Policy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		Cooldown: backoff.Policy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func header(t *testing.T, ctx context.Context, chain *devchain.Chain, number int64) *types.Header {
	t.Helper()
	h, err := chain.Client().HeaderByNumber(ctx, big.NewInt(number))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func commit(t *testing.T, chain *devchain.Chain, n int) {
	t.Helper()
	for range n {
		if _, err := chain.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBlockTimeFollowsFinalizedTag: the current epoch is the head block's
// timestamp / length and the finalized epoch follows the chain's
// finalized block. The simulated beacon under the dev chain finalizes
// every 32nd block (genesis, at time 0, before block 33), and a Commit in
// the same second as the last block is one second later than it, so
// mining moves the chain's time.
func TestBlockTimeFollowsFinalizedTag(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	src, err := epochs.NewBlockTime(pool(t, chain.URL), length*time.Second, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	read := func() payment.EpochUpdate {
		t.Helper()
		u, err := src.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	u := read()
	head := header(t, ctx, chain, int64(u.BlockNumber))
	if u.Current != head.Time/length || u.Finalized != 0 || u.Source != payment.EpochSourceBlockTime || u.BlockNumber < chain.DeployBlock {
		t.Fatalf("before block 32: %+v, head %d at %d", u, head.Number, head.Time)
	}

	commit(t, chain, 40)
	u = read()
	head = header(t, ctx, chain, int64(u.BlockNumber))
	final, err := chain.Client().HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil || final.Number.Uint64() != 32 {
		t.Fatalf("the dev chain's finalized block: %v, %v", final, err)
	}
	next := header(t, ctx, chain, 33)
	want := (final.Time+1)/length - 1 // the newest epoch that ends by block 32
	if u.BlockNumber != head.Number.Uint64() || u.BlockNumber < 42 || u.Current != head.Time/length || u.Finalized != want ||
		u.Source != payment.EpochSourceBlockTime {
		t.Fatalf("after block 32: %+v, want current %d finalized %d", u, head.Time/length, want)
	}
	// Block 33 is not final: its epoch is not, though block 32 may share it.
	if u.Finalized >= next.Time/length || u.Finalized+1 < final.Time/length {
		t.Fatalf("finalized epoch %d; block 32 at %d, block 33 at %d", u.Finalized, final.Time, next.Time)
	}
	if u.Current <= u.Finalized {
		t.Fatalf("current %d not after finalized %d", u.Current, u.Finalized)
	}
}

// TestBlockTimeWithoutFinalizedTag: an endpoint that answers the finalized
// tag with an error gets current - 2; once it has answered the tag, a
// reading without it keeps the last finalized epoch; an endpoint that
// does not answer at all fails the reading.
func TestBlockTimeWithoutFinalizedTag(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	proxy := testenv.NewRPCProxy(t, chain.URL)
	fault := testenv.Fault{Error: &testenv.RPCError{Code: -32000, Message: "finalized block not found"}}
	setFault := func(f testenv.Fault) {
		proxy.SetFault(func(c testenv.Call) testenv.Fault {
			var params []json.RawMessage
			if c.Method == "eth_getBlockByNumber" && json.Unmarshal(c.Params, &params) == nil && len(params) > 0 && string(params[0]) == `"finalized"` {
				return f
			}
			return testenv.Fault{}
		})
	}
	setFault(fault)
	src, err := epochs.NewBlockTime(pool(t, proxy.URL), length*time.Second, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, chain, 40)
	u, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head := header(t, ctx, chain, int64(u.BlockNumber))
	if u.Current != head.Time/length || u.Finalized != u.Current-payment.EpochFinalityLag || u.Source != payment.EpochSourceBlockTimeLag {
		t.Fatalf("without the tag: %+v, head time %d", u, head.Time)
	}

	setFault(testenv.Fault{})
	tagged, err := src.Read(ctx)
	if err != nil || tagged.Source != payment.EpochSourceBlockTime {
		t.Fatalf("with the tag: %+v, %v", tagged, err)
	}
	final := header(t, ctx, chain, 32)
	if tagged.Finalized != (final.Time+1)/length-1 {
		t.Fatalf("with the tag: finalized %d, block 32 at %d", tagged.Finalized, final.Time)
	}

	setFault(fault)
	commit(t, chain, 8) // current moves on, the last finalized epoch stays
	kept, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head = header(t, ctx, chain, int64(kept.BlockNumber))
	if kept.Current != head.Time/length || kept.Finalized != tagged.Finalized || kept.Source != payment.EpochSourceBlockTime {
		t.Fatalf("the tag lost again: %+v, want finalized %d", kept, tagged.Finalized)
	}

	setFault(testenv.Fault{Status: http.StatusBadGateway})
	if u, err := src.Read(ctx); err == nil {
		t.Fatalf("a reading without an answer for the finalized block: %+v", u)
	}
}

// someChain is a Chain that is never called.
type someChain struct{ epochs.Chain }

func TestNewBlockTimeRefusesFractionalLength(t *testing.T) {
	for _, l := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond} {
		if _, err := epochs.NewBlockTime(someChain{}, l, nil); err == nil {
			t.Errorf("length %s accepted", l)
		}
	}
	if _, err := epochs.NewBlockTime(someChain{}, 2*time.Second, nil); err != nil {
		t.Errorf("a length of 2s: %v", err)
	}
}
