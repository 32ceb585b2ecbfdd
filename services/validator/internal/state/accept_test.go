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

// TestRejectionLeavesTheIDFree: a REJECTED proposal does not spend its id
// (ADR 0028). A repeat of its own entries changes nothing; a different
// proposal's acceptance and decision take the id and commit; once
// committed, nothing replaces it.
func TestRejectionLeavesTheIDFree(t *testing.T) {
	m := newMachine(t)
	log := newLog(t)
	thief := common.HexToAddress("0x2222222222222222222222222222222222222222")
	owner := common.HexToAddress("0x1111111111111111111111111111111111111111")
	stolen := writeItem(1, thief, "page/a", `{"title":"stolen"}`)
	stolen.Proposal.Digest = []byte("digest-thief")
	mustApply(t, m, log.batch(1000, acceptItem(stolen)))
	rejected := proto.Clone(stolen).(*ledgerpb.BatchItem)
	rejected.Rejection = "payment_payer_mismatch"
	mustApply(t, m, log.batch(1001, rejected))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED {
		t.Fatalf("thief's proposal: %v", rec.GetStatus())
	}
	// Repeats of the rejected proposal's entries are no-ops.
	mustApply(t, m, log.batch(1002, acceptItem(stolen)))
	mustApply(t, m, log.batch(1003, stolen))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED || rec.GetReason() != "payment_payer_mismatch" {
		t.Fatalf("a repeat of the rejected proposal changed its record: %v %s", rec.GetStatus(), rec.GetReason())
	}

	own := writeItem(1, owner, "page/a", `{"title":"mine"}`)
	own.Proposal.Digest = []byte("digest-owner")
	mustApply(t, m, log.batch(1004, acceptItem(own)))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_PENDING || string(rec.GetProposal().GetDigest()) != "digest-owner" {
		t.Fatalf("owner's acceptance: %v", rec)
	}
	if undecided, _ := m.Undecided(10); len(undecided) != 1 {
		t.Fatalf("owner's proposal is not undecided: %v", undecided)
	}
	mustApply(t, m, log.batch(1005, own))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || string(rec.GetProposal().GetDigest()) != "digest-owner" {
		t.Fatalf("owner's decision: %v", rec)
	}
	mustNode(t, m, path(owner, "page/a"))
	if undecided, _ := m.Undecided(10); len(undecided) != 0 {
		t.Fatalf("decided proposal still undecided: %v", undecided)
	}
	// Committed: the id is spent, the thief's entries change nothing.
	mustApply(t, m, log.batch(1006, acceptItem(stolen)))
	mustApply(t, m, log.batch(1007, stolen))
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || string(rec.GetProposal().GetDigest()) != "digest-owner" {
		t.Fatalf("after the commit: %v", rec)
	}

	// A decision made at intake (no acceptance) replaces a REJECTED record too.
	late := writeItem(2, thief, "page/b", `{"title":"x"}`)
	late.Proposal.Digest = []byte("digest-late")
	late.Rejection = "payment_tx_mismatch"
	mustApply(t, m, log.batch(1008, late))
	direct := writeItem(2, owner, "page/b", `{"title":"b"}`)
	direct.Proposal.Digest = []byte("digest-direct")
	mustApply(t, m, log.batch(1009, direct))
	if rec := mustRecord(t, m, 2); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || string(rec.GetProposal().GetDigest()) != "digest-direct" {
		t.Fatalf("intake decision over a rejection: %v", rec)
	}
}
