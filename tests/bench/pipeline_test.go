package bench

import (
	"context"
	"crypto/ecdsa"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// BenchmarkPipeline measures the whole pipeline end to end: 3 validators in
// TESTNET mode (every payment verified against the dev chain through the
// chain-watcher and NATS), fsync on, real EIP-712 signatures, 1 KiB
// messages. Every proposal is paid on the chain and its payment observed
// by the leader before the timer starts. Two loads:
//
//	load=saturated  BENCH_PIPELINE_CLIENTS closed-loop clients (default 256): proposals/s
//	load=half       an open loop at half the saturated rate: p50/p99 latency at half load
//
// Both report the leader's peak RSS (VmHWM); the saturated run also reports
// where the CPU went, as BenchmarkCluster does (this process runs the dev
// chain, NATS and the chain-watcher besides the clients). BENCH_PROFILE
// profiles every validator during the saturated run (see BenchmarkCluster).
// Run with a fixed count, e.g. -bench BenchmarkPipeline -benchtime 20000x:
// every proposal is paid first.
func BenchmarkPipeline(b *testing.B) {
	backing := harness.StartBacking(b, harness.Options{Quiet: true, Confirmations: 1, BlockInterval: 50 * time.Millisecond})
	chain := backing.Chain
	c, err := startLedger(b.Cleanup, b.TempDir(),
		"SVC_VALIDATOR_MODE=TESTNET", "SVC_VALIDATOR_NATS_URL="+backing.NATSURL, "SVC_VALIDATOR_PAYMENT_STREAM=CHAIN_EVENTS",
		"SVC_VALIDATOR_CHAIN_ID="+strconv.FormatUint(chain.ChainID, 10), "SVC_VALIDATOR_CONTRACT_ADDRESS="+chain.PaymentLedger.Hex(),
		"SVC_VALIDATOR_CONFIRMATIONS=1", "SVC_VALIDATOR_PAYMENT_WAIT=60s")
	if err != nil {
		b.Fatal(err)
	}
	clients := 256
	if s := os.Getenv("BENCH_PIPELINE_CLIENTS"); s != "" {
		if clients, err = strconv.Atoi(s); err != nil || clients <= 0 {
			b.Fatalf("BENCH_PIPELINE_CLIENTS=%q is not a positive integer", s)
		}
	}
	var saturated float64
	b.Run("load=saturated", func(b *testing.B) {
		forms := c.prepaid(b, chain, b.N)
		profiled := startProfile(b, c, clients)
		meter := startCPUMeter(c.servers())
		latencies, elapsed := c.drive(b, forms, clients, 0)
		profiled()
		saturated = float64(b.N) / elapsed.Seconds()
		c.report(b, latencies, elapsed)
		meter.report(b)
	})
	b.Run("load=half", func(b *testing.B) {
		if saturated == 0 {
			b.Skip("needs the saturated run first")
		}
		forms := c.prepaid(b, chain, b.N)
		latencies, elapsed := c.drive(b, forms, clients, saturated/2)
		c.report(b, latencies, elapsed)
		b.ReportMetric(saturated/2, "offered/s")
	})
}

// prepaid pays n proposals on the chain from the dev accounts, signs their
// forms with one author key and encodes them, and waits until the leader has
// observed every payment; none of it is timed.
func (c *ledgerCluster) prepaid(b *testing.B, chain *devchain.Chain, n int) []string {
	b.StopTimer()
	defer b.StartTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	before := c.paymentsIndexed(b)
	payers := make([]*ecdsa.PrivateKey, len(devchain.DevAccounts))
	for i, a := range devchain.DevAccounts {
		payers[i] = a.MustKey()
	}
	forms := make([]string, n)
	// The pool holds a few thousand pending transactions: pay in rounds,
	// each mined before the next.
	const round = 2000
	for lo := 0; lo < n; lo += round {
		hi := min(n, lo+round)
		txs := make([]common.Hash, hi-lo)
		var wg sync.WaitGroup
		for w, payer := range payers {
			wg.Go(func() {
				for i := lo + w; i < hi; i += len(payers) {
					p := &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), Message: c.message, ContentType: "bench", Class: payment.Standard}
					tx, err := chain.PayForProposal(ctx, payer, p.ID, payment.Standard)
					if err != nil {
						b.Error(err)
						return
					}
					form, _, err := ledgerclient.Form(c.cfg, c.key, p, tx)
					if err != nil {
						b.Error(err)
						return
					}
					forms[i], txs[i-lo] = form.Encode(), tx
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		for _, tx := range txs {
			if _, err := chain.WaitMined(ctx, tx); err != nil {
				b.Fatal(err)
			}
		}
	}
	for c.paymentsIndexed(b) < before+n {
		if ctx.Err() != nil {
			b.Fatalf("the leader observed %d of %d payments", c.paymentsIndexed(b)-before, n)
		}
		time.Sleep(50 * time.Millisecond) // polling the leader's payment index
	}
	return forms
}

// paymentsIndexed reads how many payments the leader's index holds.
func (c *ledgerCluster) paymentsIndexed(b *testing.B) int {
	var h struct {
		Checks map[string]struct {
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if err := c.getJSON(c.leader.url+"/health", &h); err != nil {
		b.Fatal(err)
	}
	n, _, _ := strings.Cut(h.Checks["chain"].Detail, " ")
	v, err := strconv.Atoi(n)
	if err != nil {
		b.Fatalf("the leader's chain check says %q", h.Checks["chain"].Detail)
	}
	return v
}

// drive submits every form and waits for each to commit: from clients
// closed-loop clients when rate is 0, else released at rate per second.
func (c *ledgerCluster) drive(b *testing.B, forms []string, clients int, rate float64) ([]time.Duration, time.Duration) {
	latencies := make([]time.Duration, len(forms))
	work := make(chan int, len(forms))
	b.ResetTimer()
	start := time.Now()
	if rate > 0 {
		// Open loop: proposal i is released at start + i/rate, whatever
		// the answers; enough clients to keep up with the pace.
		clients = max(clients, int(rate))
		go func() {
			defer close(work)
			for i := range forms {
				time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
				work <- i
			}
		}()
	} else {
		for i := range forms {
			work <- i
		}
		close(work)
	}
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(clients, len(forms)) {
		wg.Go(func() {
			for i := range work {
				if failed.Load() {
					continue
				}
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				sub, err := c.client.SubmitEncodedAndWait(ctx, proposal.Write, forms[i], 30*time.Second)
				cancel()
				if err != nil || !api.Committed(sub.Receipt.Status) {
					b.Errorf("proposal %d: %v %+v", i, err, sub.Receipt)
					failed.Store(true)
					continue
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return latencies, elapsed
}

func (c *ledgerCluster) report(b *testing.B, latencies []time.Duration, elapsed time.Duration) {
	if b.Failed() {
		return
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	if hwm, err := harness.ProcMemory(c.leader.cmd.Process.Pid, "VmHWM"); err == nil {
		b.ReportMetric(float64(hwm)/(1<<20), "leader-peak-rss-MiB")
	}
}
