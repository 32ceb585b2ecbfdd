package state

import (
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// BenchmarkApply applies entries of 100 write proposals with 1 KiB JSON
// messages each (every proposal a new path) and reports proposals/s: all
// of one wallet, and of 16 wallets interleaved or grouped by wallet (as the
// pipeline's packer releases them).
func BenchmarkApply(b *testing.B) {
	wallets := make([]common.Address, 16)
	for i := range wallets {
		wallets[i] = common.BigToAddress(big.NewInt(int64(0x1000 + i)))
	}
	b.Run("wallets=1", func(b *testing.B) { benchmarkApply(b, func(int) common.Address { return alice }) })
	b.Run("wallets=16/interleaved", func(b *testing.B) {
		benchmarkApply(b, func(j int) common.Address { return wallets[j%len(wallets)] })
	})
	b.Run("wallets=16/grouped", func(b *testing.B) {
		benchmarkApply(b, func(j int) common.Address { return wallets[j*len(wallets)/applyBatch] })
	})
}

const applyBatch = 100

// benchmarkApply applies batches whose j-th proposal is of walletOf(j).
func benchmarkApply(b *testing.B, walletOf func(j int) common.Address) {
	m := newMachine(b)
	l := newLog(b)
	msg := func(i int) string {
		// A flat object of 1 KiB: 16 properties of ~56 bytes.
		var sb strings.Builder
		sb.WriteString("{")
		for k := range 16 {
			if k > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"p%02d":"%s"`, k, strings.Repeat(string(rune('a'+(i+k)%26)), 55))
		}
		sb.WriteString("}")
		return sb.String()
	}
	if n := len(msg(0)); n < 1000 || n > 1100 {
		b.Fatalf("message is %d bytes, want about 1 KiB", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		items := make([]*ledgerpb.BatchItem, applyBatch)
		for j := range items {
			n := i*applyBatch + j
			items[j] = writeItem(n, walletOf(j), fmt.Sprintf("bench/%d/%d", i, j), msg(n))
			items[j].Proposal.Id[29] = byte(n >> 16)
		}
		e := l.batch(int64(i), items...)
		b.StartTimer()
		if err := m.Apply([]Entry{*e}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*applyBatch)/b.Elapsed().Seconds(), "proposals/s")
	if testing.Verbose() {
		mt := m.db.Pebble().Metrics()
		b.Logf("block cache %+v, L0 tables %d, filter %+v", mt.BlockCache, mt.Levels[0].TablesCount, mt.Filter)
	}
}
