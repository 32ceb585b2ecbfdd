package payments

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/payment"
)

func TestIndexObserveAndRetract(t *testing.T) {
	ix := NewIndex()
	id := common.HexToHash("0x01")
	paid := payment.ProposalPaid{ProposalID: id, BlockHash: common.HexToHash("0xb1"), LogIndex: 3}

	got := make(chan payment.ProposalPaid, 1)
	go func() {
		p, err := ix.Wait(context.Background(), id)
		if err == nil {
			got <- p
		}
	}()
	ix.Observe(paid)
	select {
	case p := <-got:
		if p.BlockHash != paid.BlockHash {
			t.Fatalf("waited for %+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Observe")
	}

	other := paid
	other.BlockHash, other.Removed = common.HexToHash("0xb2"), true
	ix.Observe(other) // a retraction of another log leaves this one
	if _, ok := ix.Lookup(id); !ok {
		t.Fatal("retraction of another block removed the payment")
	}
	retract := paid
	retract.Removed = true
	ix.Observe(retract)
	if _, ok := ix.Lookup(id); ok {
		t.Fatal("retracted payment still indexed")
	}
	if s := ix.Stats(); s.Observed != 3 || s.Indexed != 0 {
		t.Fatalf("stats %+v", s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := ix.Wait(ctx, common.HexToHash("0x02")); err == nil {
		t.Fatal("Wait for an unpaid id returned no error")
	}
}
