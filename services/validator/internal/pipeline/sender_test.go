package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
)

// TestSealWhen checks when a batch is due and how large it may be; which
// proposals go is the packer's (testdata/packer).
func TestSealWhen(t *testing.T) {
	p := &Pipeline{cfg: DefaultConfig()}
	p.cfg.MaxBatch, p.cfg.MaxBatchBytes, p.cfg.MaxPendingMessages = 3, 40, 100 // an item of n message bytes weighs n+7
	now := time.Unix(1_700_000_000, 0)
	p.cfg.Now = func() time.Time { return now }
	packed := func(msgBytes ...int) *packer {
		k := newPacker(64, 1<<20)
		for i, n := range msgBytes {
			k.add(&ledgerpb.BatchItem{Proposal: &ledgerpb.Proposal{Wallet: []byte{byte(i)}, Message: bytes.Repeat([]byte("m"), n)}}, now)
		}
		return k
	}
	for _, tc := range []struct {
		name              string
		queue             *packer
		batches, inflight int
		want              int
	}{
		{"nothing in flight: at once", packed(1), 0, 0, 1},
		{"a batch in flight and the queue not full: wait", packed(1, 1), 1, 3, 0},
		{"a batch in flight and a full batch queued: go", packed(1, 1, 1, 1), 1, 3, 3},
		{"a batch in flight and a batch's bytes queued: go", packed(20, 20), 1, 3, 1},
		{"at the in-flight ceiling: wait", packed(1), 0, 100, 0},
		{"room below the ceiling bounds the batch", packed(1, 1, 1), 0, 98, 2},
		{"bytes bound the batch", packed(10, 10, 10), 0, 0, 2},
		{"one larger proposal goes alone", packed(100), 0, 0, 1},
	} {
		left := tc.queue.figures().Items
		items := p.seal(tc.queue, tc.batches, tc.inflight)
		if len(items) != tc.want || tc.queue.figures().Items != left-tc.want {
			t.Errorf("%s: sealed %d, %d left; want %d", tc.name, len(items), tc.queue.figures().Items, tc.want)
		}
	}
}

// TestBatchBytesCountWholeProposals: a batch's byte bound counts each
// proposal's encoded size, not its message alone: proposals with long
// paths and short messages seal an entry within the bound (counting
// messages, this batch took all 64 proposals, 16 times the bound).
func TestBatchBytesCountWholeProposals(t *testing.T) {
	const maxBytes = 256 << 10
	now := time.Unix(1_700_000_000, 0)
	k := newPacker(64, 1<<30)
	for i := range 64 {
		k.add(&ledgerpb.BatchItem{Proposal: &ledgerpb.Proposal{Wallet: []byte{byte(i)}, Path: strings.Repeat("p", 60<<10), Message: []byte("m")}}, now)
	}
	items := k.take(64, maxBytes, now, 0)
	batch := &ledgerpb.ProposalBatch{Items: items}
	if len(items) == 0 || len(items) == 64 || proto.Size(batch) > maxBytes+len(items)*8 {
		t.Fatalf("sealed %d proposals, %d bytes; the bound %d", len(items), proto.Size(batch), maxBytes)
	}
}

// TestCompactsOnFinalizedEpochOverThreshold: the leader proposes a
// compaction on an epoch finalization only once the garbage reached
// GcSizeDelta, once per finalized epoch, and none with GcSizeDelta 0.
func TestCompactsOnFinalizedEpochOverThreshold(t *testing.T) {
	const threshold = 1000
	p, l, epochs := startCompactions(t, threshold)
	// Below the threshold: epochs become final, nothing is compacted.
	l.addGarbage(threshold - 1)
	epochs.finalized.Store(6)
	waitStats(t, p, "finality of epoch 6", func(Stats) bool { return l.FinalizedEpoch() == 6 })

	// At the threshold: one compaction, on the finalized epoch.
	l.addGarbage(1)
	waitStats(t, p, "a compaction", func(Stats) bool { return l.LastGcRun() != nil })
	if run := l.LastGcRun(); run.GetRun() != 1 || run.GetEpoch() != 6 || run.GetGarbageBytes() != threshold || run.GetAtMs() == 0 {
		t.Fatalf("run %v, want the first on epoch 6 at %d garbage bytes", run, threshold)
	}

	// More garbage in the same epoch: no second run until the next
	// finalization.
	l.addGarbage(5 * threshold)
	epochs.current.Store(9)
	epochs.finalized.Store(8)
	waitStats(t, p, "the next compaction", func(Stats) bool { return l.LastGcRun().GetRun() == 2 })
	if run := l.LastGcRun(); run.GetEpoch() != 8 || run.GetGarbageBytes() != 5*threshold {
		t.Fatalf("run %v, want the second on epoch 8 at %d garbage bytes", run, 5*threshold)
	}
	if n := l.proposed("GcCompact"); n != 2 {
		t.Fatalf("GcCompact proposed %d times, want once per run", n)
	}
}

// TestNoCompactionWithoutThreshold: GcSizeDelta 0 turns compaction off.
func TestNoCompactionWithoutThreshold(t *testing.T) {
	p, l, epochs := startCompactions(t, 0)
	l.addGarbage(1 << 40)
	// Two more finalizations: the loop looked at the garbage after the
	// first, and handed over anything it would propose before the last.
	for _, e := range []uint64{6, 7} {
		epochs.finalized.Store(e)
		waitStats(t, p, "finality", func(Stats) bool { return l.FinalizedEpoch() == e })
	}
	if n := l.proposed("GcCompact"); n != 0 || l.LastGcRun() != nil {
		t.Fatalf("GcCompact proposed %d times with GcSizeDelta 0", n)
	}
}

// TestCompactionOnTheMachine: on a real state machine, the leader's
// compaction is applied once the committed writes pass the threshold: the
// state moves to generation 1 on the finalized epoch, the live nodes
// rewritten, the garbage count reset.
func TestCompactionOnTheMachine(t *testing.T) {
	index := payments.NewIndex()
	p, l := startOnMachine(t, index, func(c *Config) { c.GcSizeDelta = 1 }) // the first segment is enough
	key := payerKey()
	ids := []common.Hash{common.HexToHash("0x61"), common.HexToHash("0x62")}
	for _, id := range ids {
		index.Observe(paidIn(id, id, 0x10))
		if _, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard)); err != nil {
			t.Fatal(err)
		}
		if s := final(t, p, id); s.Status != api.StatusCommitted && s.Status != api.StatusFinalized {
			t.Fatalf("proposal %s: %s %s", id.Hex(), s.Status, s.Reason)
		}
	}
	// Started, then driven through its steps to the end.
	waitStats(t, p, "a compaction run done", func(Stats) bool { return l.m.LastGcRun().GetDone() })
	run := l.m.LastGcRun()
	if run.GetRun() != 1 || run.GetEpoch() != fixedEpoch(7).Finalized() || run.GetGeneration() != 1 || run.GetLiveNodes() == 0 ||
		run.GetSteps() == 0 || run.GetGarbageBytes() == 0 || l.m.Generation() != 1 {
		t.Fatalf("run %v, generation %d", run, l.m.Generation())
	}
}
