package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	watcher "github.com/contentledger/contentledger/services/chain-watcher/app"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/devnats"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// BenchmarkWatcherBackfill measures how fast the chain-watcher publishes
// the payments already on the chain: b.N ProposalPaid logs are paid on the
// dev chain first (not timed), then a watcher starts at the contract's
// deployment block, and the timer runs until a JetStream consumer has
// received every payment. Reports logs/s. Run with a fixed count, e.g.
// -benchtime 100000x. BENCH_PROFILE=dir writes a CPU profile of this
// process over the timed part (chain, NATS server, watcher and consumer all
// run in it) into dir.
func BenchmarkWatcherBackfill(b *testing.B) {
	// Blocks every 100 ms hold the payments in a few thousand blocks.
	// Shorter, the dev chain passes 90,000 blocks during the payments,
	// and go-ethereum's freezer then scans its whole in-memory database
	// on every pass: a third of the machine's CPU that measures the
	// simulated chain, not the watcher.
	w := startWatcherBench(b, 100*time.Millisecond)
	ids := make([]common.Hash, b.N)
	for i := range ids {
		ids[i] = ledgerclient.NewProposalID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	payProposals(ctx, b, w.chain, ids)
	stop := profileProcess(b, fmt.Sprintf("watcher-backfill-n=%d", b.N))
	b.ResetTimer()
	w.startWatcher(b)
	w.waitFor(b, ids)
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "logs/s")
}

// BenchmarkWatcherLag measures the delay from a block holding a payment to
// its message on NATS, with the watcher caught up: b.N payments are made
// one after the other, and each one's delay runs from when its receipt
// appears (the dev chain mines a block every 50 ms; receipts are polled
// every 10 ms, so the figure can be up to 10 ms short) to when the
// consumer receives it. With one confirmation the block must wait for the
// next before the watcher reads it. Reports p50-ms and p99-ms, for an HTTP
// endpoint polled every 50 ms and for a WebSocket endpoint whose new-head
// subscription wakes the watcher (polled every second only as a fallback).
func BenchmarkWatcherLag(b *testing.B) {
	b.Run("rpc=http", func(b *testing.B) { benchmarkWatcherLag(b, false) })
	b.Run("rpc=ws", func(b *testing.B) { benchmarkWatcherLag(b, true) })
}

func benchmarkWatcherLag(b *testing.B, ws bool) {
	w := startWatcherBench(b, 50*time.Millisecond)
	w.startWatcher(b, func(cfg *watcher.Config) {
		if ws {
			cfg.RPCURL, cfg.PollInterval = w.chain.WSURL, time.Second
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	payer := devchain.DevAccounts[0].MustKey()
	mined := make(map[common.Hash]time.Time, b.N)
	ids := make([]common.Hash, b.N)
	b.ResetTimer()
	for i := range ids {
		ids[i] = ledgerclient.NewProposalID()
		tx, err := w.chain.PayForProposal(ctx, payer, ids[i], payment.Standard)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.chain.WaitMined(ctx, tx); err != nil {
			b.Fatal(err)
		}
		mined[ids[i]] = time.Now()
	}
	arrived := w.waitFor(b, ids)
	b.StopTimer()
	lags := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		lags = append(lags, arrived[id].Sub(mined[id]))
	}
	slices.Sort(lags)
	b.ReportMetric(ms(lags[len(lags)/2]), "p50-ms")
	b.ReportMetric(ms(lags[min(len(lags)-1, len(lags)*99/100)]), "p99-ms")
}

// profileProcess starts a CPU profile of this process into BENCH_PROFILE's
// directory, named after name, when it is set; the returned function ends
// it.
func profileProcess(b *testing.B, name string) (stop func()) {
	dir := profileDir()
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		b.Fatalf("profile of the benchmark process: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// watcherBench is a dev chain, a NATS server and a consumer of the
// payments subject that records when each payment arrives.
type watcherBench struct {
	chain   *devchain.Chain
	natsURL string

	mu      sync.Mutex
	arrived map[common.Hash]time.Time
	changed chan struct{} // closed and replaced on every arrival
}

func startWatcherBench(b *testing.B, blockInterval time.Duration) *watcherBench {
	chain, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0", BlockInterval: blockInterval})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = chain.Close() })
	server, err := devnats.Start(devnats.Config{Port: -1, StoreDir: filepath.Join(b.TempDir(), "nats")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(server.Stop)
	return &watcherBench{chain: chain, natsURL: server.ClientURL(), arrived: map[common.Hash]time.Time{}, changed: make(chan struct{})}
}

// startWatcher runs a chain-watcher from the deployment block, and the
// consumer once the watcher has declared its stream.
func (w *watcherBench) startWatcher(b *testing.B, tune ...func(*watcher.Config)) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := harness.WatcherConfig(w.chain, w.natsURL, 1)
	for _, f := range tune {
		f(&cfg)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := watcher.Run(ctx, cfg, zap.NewNop()); err != nil && ctx.Err() == nil {
			b.Errorf("chain-watcher stopped: %v", err)
		}
	}()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	nc, err := nats.Connect(w.natsURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	var cons jetstream.Consumer
	deadline := time.Now().Add(30 * time.Second)
	for {
		cons, err = js.OrderedConsumer(ctx, cfg.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{payment.Subject(w.chain.ChainID)}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the watcher's stream: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the stream the watcher declares
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		at := time.Now()
		var p ledgerpb.Payment
		if err := proto.Unmarshal(msg.Data(), &p); err != nil || p.GetRemoved() {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, seen := w.arrived[common.BytesToHash(p.GetProposalId())]; !seen {
			w.arrived[common.BytesToHash(p.GetProposalId())] = at
		}
		close(w.changed)
		w.changed = make(chan struct{})
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cc.Stop)
}

// waitFor waits until every id has arrived and returns their arrival
// times. Only the benchmark pays on this chain, so until as many payments
// as ids have arrived there is nothing to check.
func (w *watcherBench) waitFor(b *testing.B, ids []common.Hash) map[common.Hash]time.Time {
	timeout := time.After(30 * time.Minute)
	for {
		w.mu.Lock()
		n, changed := len(w.arrived), w.changed
		if n >= len(ids) {
			out := make(map[common.Hash]time.Time, len(ids))
			for _, id := range ids {
				at, ok := w.arrived[id]
				if !ok {
					w.mu.Unlock()
					b.Fatalf("payment %s never arrived, %d others did", id.Hex(), n)
				}
				out[id] = at
			}
			w.mu.Unlock()
			return out
		}
		w.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			b.Fatalf("%d of %d payments published", n, len(ids))
		}
	}
}
