package state

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func acceptItem(item *ledgerpb.BatchItem) *ledgerpb.BatchItem {
	return &ledgerpb.BatchItem{Proposal: item.GetProposal(), Accept: true}
}

func TestAcceptThenDecide(t *testing.T) {
	m := newMachine(t)
	log := newLog(t)
	wallet := common.HexToAddress("0x1111111111111111111111111111111111111111")
	write := writeItem(1, wallet, "page/a", `{"title":"a"}`)
	write.Proposal.Digest = []byte("digest-1")

	mustApply(t, m, log.batch(1000, acceptItem(write)))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_PENDING {
		t.Fatalf("after accept: %v", rec.GetStatus())
	}
	if _, ok, _ := m.Node(path(wallet, "page/a")); ok {
		t.Fatal("an accepted proposal wrote content before its decision")
	}
	undecided, err := m.Undecided(10)
	if err != nil || len(undecided) != 1 || string(undecided[0].GetProposal().GetId()) != string(pid(1)) {
		t.Fatalf("undecided %v %v", undecided, err)
	}
	hashAfterAccept := m.StateHash()

	// A second acceptance of the id changes nothing but the index.
	mustApply(t, m, log.batch(1001, acceptItem(write)))
	// A decision for a different proposal under the id changes nothing.
	other := proto.Clone(write).(*ledgerpb.BatchItem)
	other.Proposal.Digest = []byte("digest-2")
	mustApply(t, m, log.batch(1002, other))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_PENDING {
		t.Fatalf("a decision for another digest moved the record to %v", rec.GetStatus())
	}

	mustApply(t, m, log.batch(1003, write))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || rec.GetCommittedAtMs() != 1003 {
		t.Fatalf("after decision: %v", rec)
	}
	mustNode(t, m, path(wallet, "page/a"))
	if undecided, _ := m.Undecided(10); len(undecided) != 0 {
		t.Fatalf("decided proposal still undecided: %v", undecided)
	}
	// A late second decision (a deposed leader's) is a no-op.
	rejected := proto.Clone(write).(*ledgerpb.BatchItem)
	rejected.Rejection = "payment_not_found"
	mustApply(t, m, log.batch(1004, rejected))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED {
		t.Fatalf("a second decision changed the record: %v", rec.GetStatus())
	}
	if m.StateHash() == hashAfterAccept {
		t.Fatal("the state hash did not move with the decision")
	}
}
