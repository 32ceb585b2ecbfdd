package e2e

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// BenchmarkCommit measures signed 1 KiB writes from submission to COMMITTED
// through the HTTP API, one validator with fsync on, in MOCK mode (payments
// have their own cost, measured with the pipeline). It reports throughput
// and latency percentiles in Go's benchmark format for benchstat.
func BenchmarkCommit(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchCommit(b, clients) })
	}
}

func benchCommit(b *testing.B, clients int) {
	n := harness.Start(b, harness.Options{Mode: "MOCK", Quiet: true})
	key, err := crypto.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	message := make([]byte, 1024)
	for i := range message {
		message[i] = 'a' + byte(i%26)
	}
	// Forms are signed before the timer: the client's signing is not the
	// validator's cost.
	forms := make([]url.Values, b.N)
	for i := range forms {
		p := &ledgerclient.Proposal{Message: message, ContentType: "bench"}
		form, _, err := ledgerclient.Form(n.Config, key, p, common.Hash{})
		if err != nil {
			b.Fatal(err)
		}
		forms[i] = form
	}
	latencies := make([]time.Duration, b.N)
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= b.N {
					return
				}
				t0 := time.Now()
				sub, err := n.Client.SubmitAndWait(ctx, proposal.Write, forms[i], 30*time.Second)
				if err != nil || !api.Committed(sub.Receipt.Status) {
					b.Errorf("%s: %+v %v", sub.Receipt.ProposalID, sub, err)
					return
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
