package payments

import (
	"context"
	"encoding/binary"
	"math/big"
	"runtime"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/payment"
)

// BenchmarkFollowerCatchUp measures what a starting validator pays to
// rebuild its payment index from the stream (the index is rebuilt from the
// first message on every start): payments/s read into the index, and the
// index's heap per payment.
func BenchmarkFollowerCatchUp(b *testing.B) {
	const payments = 50_000
	js := embeddedJetStream(b)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CHAIN_EVENTS", Subjects: []string{"chain.>"}}); err != nil {
		b.Fatal(err)
	}
	contract, payer := common.HexToAddress("0x0c"), common.HexToAddress("0x01")
	for i := range payments {
		var id, tx, block common.Hash
		binary.BigEndian.PutUint64(id[24:], uint64(i+1))
		binary.BigEndian.PutUint64(tx[24:], uint64(i+1))
		binary.BigEndian.PutUint64(block[24:], uint64(i/10+1))
		p := payment.ProposalPaid{ChainID: 1337, Contract: contract, ProposalID: id, Payer: payer, Amount: big.NewInt(1_000_000_000_000_000),
			Class: payment.Standard, Token: payment.ETH, TxHash: tx, BlockHash: block, BlockNumber: uint64(i/10 + 1), LogIndex: uint(i % 10)}
		data, err := proto.Marshal(p.Proto())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishAsync(payment.Subject(1337), data); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishing the payments took over a minute")
	}

	var heapPerPayment float64
	for b.Loop() {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ix := NewIndex()
		f := &Follower{JS: js, Stream: "CHAIN_EVENTS", ChainID: 1337, Index: ix, Log: zap.NewNop()}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = f.Run(runCtx) }()
		for {
			changed := ix.Changed() // taken before the count, so no change is missed
			if ix.Stats().Indexed >= payments {
				break
			}
			<-changed
		}
		cancel()
		<-done
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		heapPerPayment = float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc)) / payments
		runtime.KeepAlive(ix)
	}
	b.ReportMetric(float64(payments*b.N)/b.Elapsed().Seconds(), "payments/s")
	b.ReportMetric(heapPerPayment, "heap-B/payment")
}
