package epochs_test

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/epochs"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

// mainnetGenesis is the beacon chain's genesis time on Ethereum mainnet.
const mainnetGenesis = "1606824023"

// beaconNode answers the beacon API routes the source reads, in the
// standard API's shapes (integers as decimal strings), under prefix. Its
// fields are raw JSON values.
type beaconNode struct {
	mu             sync.Mutex
	genesis        string // genesis_time; "" answers 404
	secondsPerSlot string
	slotsPerEpoch  string
	slot           string // head slot
	finalized      string // finalized checkpoint's epoch
	status         int    // answered instead, when not 0
	paths          []string
}

func newBeaconNode() *beaconNode {
	return &beaconNode{genesis: `"` + mainnetGenesis + `"`, secondsPerSlot: `"12"`, slotsPerEpoch: `"32"`}
}

func (b *beaconNode) set(slot, finalized string, status int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slot, b.finalized, b.status = slot, finalized, status
}

func (b *beaconNode) setChain(genesis, secondsPerSlot, slotsPerEpoch string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.genesis, b.secondsPerSlot, b.slotsPerEpoch = genesis, secondsPerSlot, slotsPerEpoch
}

// asked returns the paths asked since the last call.
func (b *beaconNode) asked() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.paths
	b.paths = nil
	return p
}

func (b *beaconNode) serve(prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.paths = append(b.paths, strings.TrimPrefix(r.URL.Path, prefix))
		if b.status != 0 {
			http.Error(w, `{"code":503,"message":"node is syncing"}`, b.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case prefix + "/eth/v1/beacon/genesis":
			if b.genesis == "" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `{"data":{"genesis_time":%s,"genesis_validators_root":"0x%064x","genesis_fork_version":"0x00000000"}}`, b.genesis, 8)
		case prefix + "/eth/v1/config/spec":
			fmt.Fprintf(w, `{"data":{"CONFIG_NAME":"mainnet","SECONDS_PER_SLOT":%s,"SLOTS_PER_EPOCH":%s,"MAX_EFFECTIVE_BALANCE":"32000000000"}}`,
				b.secondsPerSlot, b.slotsPerEpoch)
		case prefix + "/eth/v1/beacon/headers/head":
			fmt.Fprintf(w, `{"execution_optimistic":false,"finalized":false,"data":{"root":"0x%064x","canonical":true,`+
				`"header":{"message":{"slot":%s,"proposer_index":"7","parent_root":"0x%064x","state_root":"0x%064x","body_root":"0x%064x"},`+
				`"signature":"0x00"}}}`, 1, b.slot, 2, 3, 4)
		case prefix + "/eth/v1/beacon/states/head/finality_checkpoints":
			fmt.Fprintf(w, `{"execution_optimistic":false,"finalized":false,"data":{`+
				`"previous_justified":{"epoch":"1","root":"0x%064x"},"current_justified":{"epoch":"2","root":"0x%064x"},`+
				`"finalized":{"epoch":%s,"root":"0x%064x"}}}`, 5, 6, b.finalized, 7)
		default:
			http.NotFound(w, r)
		}
	})
}

func startBeacon(t *testing.T, node *beaconNode, prefix string, opts ...epochs.BeaconOption) (*epochs.Beacon, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(node.serve(prefix))
	t.Cleanup(srv.Close)
	src, err := epochs.NewBeacon(srv.URL+prefix+"/", 5*time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return src, srv
}

// TestBeaconSource: the beacon's head slot and finalized checkpoint come
// out in the unix-time numbering (epoch = unix time / 384 s), from the
// node's genesis time and slot figures, which are read once.
func TestBeaconSource(t *testing.T) {
	ctx := testenv.Context(t)
	node := newBeaconNode()
	const prefix = "/api-key-123"
	src, srv := startBeacon(t, node, prefix)

	// Head slot 9,600,031 starts at 1606824023 + 12 × 9600031 =
	// 1722024395, in epoch 1722024395 / 384 = 4484438. The finalized
	// checkpoint 299,998 is the block of slot 9,599,936, at 1722023255, in
	// epoch 4484435; that epoch's later blocks are not final yet, so the
	// finalized epoch is 4484434.
	node.set(`"9600031"`, `"299998"`, 0)
	u, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := payment.EpochUpdate{Current: 4_484_438, Finalized: 4_484_434, Source: payment.EpochSourceBeacon, Slot: 9_600_031}
	if u != want {
		t.Fatalf("read %+v, want %+v", u, want)
	}
	if got := node.asked(); !slices.Equal(got, []string{"/eth/v1/beacon/genesis", "/eth/v1/config/spec",
		"/eth/v1/beacon/states/head/finality_checkpoints", "/eth/v1/beacon/headers/head"}) {
		t.Fatalf("asked %v: genesis and spec, then the checkpoints before the head", got)
	}

	// The genesis and the spec are not asked again; the next checkpoint
	// (slot 9,599,968, at 1722023639) closes epoch 4484435.
	node.set(`9600032`, `"299999"`, 0) // a bare number is taken too
	if u, err := src.Read(ctx); err != nil || u.Current != 4_484_438 || u.Finalized != 4_484_435 || u.Slot != 9_600_032 {
		t.Fatalf("read %+v, %v", u, err)
	}
	if got := node.asked(); !slices.Equal(got, []string{"/eth/v1/beacon/states/head/finality_checkpoints", "/eth/v1/beacon/headers/head"}) {
		t.Fatalf("asked %v", got)
	}

	for name, c := range map[string]struct {
		slot, finalized string
		status          int
	}{
		"finalized after the head": {`"64"`, `"3"`, 0},
		"negative slot":            {`"-1"`, `"0"`, 0},
		"slot not a number":        {`"0x20"`, `"0"`, 0},
		"slot beyond any time":     {`"18446744073709551615"`, `"0"`, 0},
		"no finalized epoch":       {`"64"`, `null`, 0},
		"node syncing":             {`"64"`, `"0"`, http.StatusServiceUnavailable},
	} {
		node.set(c.slot, c.finalized, c.status)
		u, err := src.Read(ctx)
		if err == nil {
			t.Errorf("%s: read %+v", name, u)
			continue
		}
		if strings.Contains(err.Error(), "api-key-123") {
			t.Errorf("%s: the error quotes the URL's path: %v", name, err)
		}
	}

	srv.Close()
	if _, err := src.Read(ctx); err == nil || strings.Contains(err.Error(), "api-key-123") {
		t.Fatalf("a closed node: %v", err)
	}

	for _, bad := range []string{"", "ftp://h/", "http:///x", "://"} {
		if _, err := epochs.NewBeacon(bad, time.Second); err == nil {
			t.Errorf("beacon URL %q accepted", bad)
		}
	}
	for _, bad := range []time.Duration{0, 1500 * time.Millisecond, -time.Second} {
		if _, err := epochs.NewBeacon("http://beacon.example", time.Second, epochs.WithEpochLength(bad)); err == nil {
			t.Errorf("epoch length %s accepted", bad)
		}
	}
}

// TestBeaconChainFigures: the genesis time and the slot figures are the
// node's (here a network with 5 s slots and 16-slot epochs), the epoch
// length is EPOCH_LENGTH's, and a node that does not answer them fails
// the reading until it does.
func TestBeaconChainFigures(t *testing.T) {
	ctx := testenv.Context(t)
	node := newBeaconNode()
	// Genesis at the start of unix epoch 1000 of 80 s: beacon epochs (16
	// × 5 s) line up with unix ones, beacon epoch e being unix epoch 1000
	// + e.
	node.setChain("", `"5"`, `"16"`)
	src, _ := startBeacon(t, node, "", epochs.WithEpochLength(80*time.Second))

	node.set(`"1615"`, `"98"`, 0) // slot 1615: the last of beacon epoch 100
	if _, err := src.Read(ctx); err == nil {
		t.Fatal("read without a genesis time")
	}
	for name, spec := range map[string][2]string{"no seconds per slot": {`null`, `"16"`}, "zero slots per epoch": {`"5"`, `"0"`}} {
		node.setChain(`"80000"`, spec[0], spec[1])
		if _, err := src.Read(ctx); err == nil {
			t.Errorf("%s: read", name)
		}
	}
	node.setChain(`"80000"`, `"5"`, `"16"`)
	// Beacon epoch 98's checkpoint block opens unix epoch 1098: its other
	// blocks are not final, so unix epoch 1097 is the newest final one.
	if u, err := src.Read(ctx); err != nil || u.Current != 1100 || u.Finalized != 1097 || u.Slot != 1615 {
		t.Fatalf("read %+v, %v", u, err)
	}
	node.set(`"1616"`, `"99"`, 0)
	if u, err := src.Read(ctx); err != nil || u.Current != 1101 || u.Finalized != 1098 {
		t.Fatalf("read %+v, %v", u, err)
	}
}

// timedChain is a chain whose head block and finalized block have the
// given timestamps: what an execution node shows of the beacon chain.
type timedChain struct{ head, finalized uint64 }

func (c timedChain) BlockNumber(context.Context) (uint64, error) { return 1000, nil }

func (c timedChain) HeaderByNumber(_ context.Context, n *big.Int) (*types.Header, error) {
	if n.Int64() == int64(rpc.FinalizedBlockNumber) {
		return &types.Header{Number: big.NewInt(900), Time: c.finalized}, nil
	}
	return &types.Header{Number: big.NewInt(1000), Time: c.head}, nil
}

// TestBeaconAgreesWithBlockTime: for the same chain state, the beacon
// source and the block-time source publish the same figures, so a
// deployment may switch between them: the head block's timestamp is its
// slot's start, and the execution chain's finalized block is the finalized
// checkpoint's block.
func TestBeaconAgreesWithBlockTime(t *testing.T) {
	ctx := testenv.Context(t)
	node := newBeaconNode()
	src, _ := startBeacon(t, node, "")
	const genesis, perSlot, perEpoch = 1606824023, 12, 32
	for _, c := range []struct{ slot, finalized uint64 }{
		{9_600_031, 299_998}, {9_600_032, 299_999}, {9_600_000, 299_998}, {32, 0}, {0, 0},
		{12_000_017, 374_998}, {12_000_063, 375_000}, {12_000_064, 375_000},
	} {
		node.set(fmt.Sprintf(`"%d"`, c.slot), fmt.Sprintf(`"%d"`, c.finalized), 0)
		b, err := src.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := epochs.NewBlockTime(timedChain{
			head:      genesis + c.slot*perSlot,
			finalized: genesis + c.finalized*perEpoch*perSlot,
		}, epochs.DefaultLength, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := bt.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.Current != want.Current || b.Finalized != want.Finalized {
			t.Errorf("slot %d, finalized checkpoint %d: beacon %d/%d, block time %d/%d",
				c.slot, c.finalized, b.Current, b.Finalized, want.Current, want.Finalized)
		}
	}
}
