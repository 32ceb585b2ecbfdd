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

	"github.com/contentledger/contentledger/pkg/ledgerpb"
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

// derivedState is applied state in which proposal n (paidAt's numbering)
// is COMMITTED on paidAt(n, block(n)) when n <= spent: it computes records
// rather than holding them, so that the benchmarks measure the index's heap
// alone.
type derivedState struct {
	spent uint64
	block func(n uint64) uint64
}

func (s derivedState) Record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	n := binary.BigEndian.Uint64(id[24:])
	if n == 0 || n > s.spent {
		return nil, false, nil
	}
	return &ledgerpb.ProposalRecord{Status: ledgerpb.Status_STATUS_COMMITTED, Payment: paidAt(n, s.block(n)).Proto()}, true, nil
}

func (derivedState) DebtTxSpent([32]byte, uint32) (bool, error) { return false, nil }

// BenchmarkIndexHeapPerSpentPayment measures the payment index's heap once
// 100,000 payments are observed, spent by committed proposals and final:
// "kept" is the index without pruning (as before ADR 0031), "pruned" after
// the Keeper's passes. B/payment is the heap per payment observed.
func BenchmarkIndexHeapPerSpentPayment(b *testing.B) {
	const payments = 100_000
	blockOf := func(n uint64) uint64 { return n/10 + 1 }
	st := derivedState{spent: payments, block: blockOf}
	for _, prune := range []bool{false, true} {
		name := map[bool]string{false: "kept", true: "pruned"}[prune]
		b.Run(name, func(b *testing.B) {
			var perPayment float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				ix := NewIndex()
				for n := uint64(1); n <= payments; n++ {
					ix.Observe(paidAt(n, blockOf(n)))
				}
				for prune {
					s, err := ix.Prune(blockOf(payments), st, DefaultPruneBatch)
					if err != nil {
						b.Fatal(err)
					}
					if s.Swept {
						break
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPayment = float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc)) / payments
				if prune && ix.Stats().Indexed != 0 {
					b.Fatalf("pruning left %d payments", ix.Stats().Indexed)
				}
				runtime.KeepAlive(ix)
			}
			b.ReportMetric(perPayment, "B/payment")
		})
	}
}

// BenchmarkValidatorStart measures how long a starting validator takes to
// have its payment index ready (consumed through the stream's last
// message) with startPayments payments on the stream: "replay" reads the
// whole stream (as before ADR 0031), "checkpoint" restores the checkpoint
// of an index whose payments are all spent and final but the newest
// unspentAtStart, and reads nothing after it. The stream is built once per
// run, which takes a while: run it with -benchtime=1x.
func BenchmarkValidatorStart(b *testing.B) {
	const startPayments, unspentAtStart = 1_000_000, 1_000
	js := embeddedJetStream(b)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CHAIN_EVENTS", Subjects: []string{"chain.>"}})
	if err != nil {
		b.Fatal(err)
	}
	blockOf := func(n uint64) uint64 { return n/10 + 1 }
	for n := uint64(1); n <= startPayments; n++ {
		data, err := proto.Marshal(paidAt(n, blockOf(n)).Proto())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishAsync(payment.Subject(1337), data); err != nil {
			b.Fatal(err)
		}
		if n%50_000 == 0 { // bound the acks in flight
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publishing 50,000 payments took over a minute")
			}
		}
	}
	<-js.PublishAsyncComplete()
	info, err := stream.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	last := info.State.LastSeq
	// The checkpoint a Keeper writes of that stream: what is not spent.
	store := &memStore{}
	{
		ix := NewIndex()
		for n := uint64(startPayments - unspentAtStart + 1); n <= startPayments; n++ {
			ix.Observe(paidAt(n, blockOf(n)))
		}
		ix.consumedThrough(last, info.Created)
		k, err := NewKeeper(KeeperConfig{Index: ix, State: derivedState{}, Chain: fakeChain{}, Checkpoints: store})
		if err != nil {
			b.Fatal(err)
		}
		if err := k.Checkpoint(); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"replay", "checkpoint"} {
		b.Run(name, func(b *testing.B) {
			var heap float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				ix := NewIndex()
				f := &Follower{JS: js, Stream: "CHAIN_EVENTS", ChainID: 1337, Index: ix, Log: zap.NewNop()}
				if name == "checkpoint" {
					f.Checkpoints = store
				}
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); _ = f.Run(runCtx) }()
				for {
					changed := ix.Changed()
					if ix.Stats().Consumed >= last {
						break
					}
					<-changed
				}
				cancel()
				<-done
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = float64(after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc))
				if want := map[string]int{"replay": startPayments, "checkpoint": unspentAtStart}[name]; ix.Stats().Indexed != want {
					b.Fatalf("%s: %d payments indexed, want %d", name, ix.Stats().Indexed, want)
				}
				runtime.KeepAlive(ix)
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s-to-ready")
			b.ReportMetric(heap/(1<<20), "index-MiB")
		})
	}
}
