package pipeline

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func TestOutcomes(t *testing.T) {
	o := newOutcomes(2)
	a, b, c := common.HexToHash("0xa"), common.HexToHash("0xb"), common.HexToHash("0xc")
	wa, _ := o.watch(a)
	wb, releaseB := o.watch(b)
	o.changed(a, &ledgerpb.ProposalRecord{Reason: "a"})
	select {
	case <-wa:
	default:
		t.Fatal("the waiter of a was not woken")
	}
	select {
	case <-wb:
		t.Fatal("the waiter of b was woken by a")
	default:
	}
	if r, ok := o.record(a); !ok || r.GetReason() != "a" {
		t.Fatalf("record of a: %v %v", r, ok)
	} else {
		r.Reason = "changed by a reader"
	}
	if r, _ := o.record(a); r.GetReason() != "a" {
		t.Fatalf("a reader's change reached the remembered record: %q", r.GetReason())
	}
	o.changed(a, &ledgerpb.ProposalRecord{Reason: "a", Status: ledgerpb.Status_STATUS_FINALIZED})
	if s, ok := o.status(a); !ok || s != ledgerpb.Status_STATUS_FINALIZED {
		t.Fatalf("status of a: %v %v", s, ok)
	}
	if _, ok := o.status(b); ok {
		t.Fatal("b has a status before any record")
	}
	o.changed(b, &ledgerpb.ProposalRecord{Reason: "b"})
	o.changed(c, &ledgerpb.ProposalRecord{Reason: "c"}) // capacity 2: a goes
	if _, ok := o.record(a); ok {
		t.Fatal("the oldest record was not evicted")
	}
	if r, ok := o.record(c); !ok || r.GetReason() != "c" {
		t.Fatal("the newest record is missing")
	}
	o.changed(c, &ledgerpb.ProposalRecord{Reason: "c2"}) // an update does not evict
	if _, ok := o.record(b); !ok {
		t.Fatal("an update of c evicted b")
	}
	releaseB()
	if len(o.waiters) != 0 {
		t.Fatalf("released and woken waiters are still held: %d", len(o.waiters))
	}
	w, _ := o.watch(a)
	o.reset()
	select {
	case <-w:
	default:
		t.Fatal("reset did not wake the waiters")
	}
	if _, ok := o.record(b); ok {
		t.Fatal("reset kept records")
	}
}

func TestWithoutMessage(t *testing.T) {
	rec := &ledgerpb.ProposalRecord{
		Proposal: &ledgerpb.Proposal{Id: []byte{1}, Path: "/p", Message: []byte("m"), Digest: []byte{2}, Epoch: 7},
		Status:   ledgerpb.Status_STATUS_COMMITTED, CommitIndex: 9, Payment: &ledgerpb.Payment{TxHash: []byte{3}},
	}
	got := withoutMessage(rec)
	if got.GetProposal().GetMessage() != nil || len(rec.GetProposal().GetMessage()) != 1 {
		t.Fatalf("message: kept %q, original %q", got.GetProposal().GetMessage(), rec.GetProposal().GetMessage())
	}
	want := proto.Clone(rec).(*ledgerpb.ProposalRecord)
	want.Proposal.Message = nil
	if !proto.Equal(got, want) {
		t.Fatalf("withoutMessage = %v, want %v", got, want)
	}
}
