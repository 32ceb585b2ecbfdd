package pipeline

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
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
