package pipeline

import (
	"bytes"
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// BenchmarkSender is the sender's hot path, decided proposals to applied
// records: packing, sealing, marshalling a batch, proposing it and waiting
// for its records, on the test ledger (which applies an entry as it is
// proposed, and unmarshals it to do so). Intake and the verifiers are left
// out: decided proposals go straight into the sender's queue. 1 KiB
// messages, 16 wallets.
//
//	queued=1      one proposal at a time, each waiting for the previous one's
//	              apply: the latency path, a batch per proposal
//	queued=burst  b.N proposals queued at once: group commit and full
//	              batches pipelined under the in-flight ceiling
func BenchmarkSender(b *testing.B) {
	b.Run("queued=1", func(b *testing.B) {
		p, applied := benchSender(b)
		items := benchItems(b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for _, it := range items {
			p.decided <- it
			<-applied
		}
	})
	b.Run("queued=burst", func(b *testing.B) {
		p, applied := benchSender(b)
		items := benchItems(b.N)
		b.ReportAllocs()
		b.ResetTimer()
		go func() {
			for _, it := range items {
				p.decided <- it
			}
		}()
		for n := 0; n < len(items); {
			n += <-applied
		}
	})
}

// benchSender runs a pipeline on the test ledger; applied receives the
// number of records each apply wrote.
func benchSender(b *testing.B) (*Pipeline, <-chan int) {
	cfg := DefaultConfig()
	cfg.VerifyPayments = false
	cfg.FinalizeInterval = time.Hour // the leader's own entries stay out of the figures
	l := newLedger()
	p, err := New(cfg, zap.NewNop(), l, l, nil, fixedEpoch(7))
	if err != nil {
		b.Fatal(err)
	}
	applied := make(chan int, cfg.MaxPending)
	l.observer = func(recs []*ledgerpb.ProposalRecord) {
		p.RecordsApplied(recs)
		applied <- len(recs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return p, applied
}

// benchItems are n decided proposals of 16 wallets, 1 KiB messages.
func benchItems(n int) []*ledgerpb.BatchItem {
	msg := bytes.Repeat([]byte("m"), 1024)
	items := make([]*ledgerpb.BatchItem, n)
	for i := range items {
		id := common.BigToHash(big.NewInt(int64(i + 1)))
		items[i] = &ledgerpb.BatchItem{Proposal: &ledgerpb.Proposal{
			Id: id.Bytes(), Wallet: common.BigToAddress(big.NewInt(int64(i%16 + 1))).Bytes(), Organization: "default",
			Path: "bench/" + id.Hex()[2:18], Message: msg, Tier: ledgerpb.Tier_TIER_STANDARD, Epoch: 7, Digest: id.Bytes(),
		}}
	}
	return items
}
