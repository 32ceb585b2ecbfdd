package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// TestStatusShowsOrphanedPayment: a record marked payment_orphaned renders
// the retracted log under paymentOrphaned; an unmarked one has no such
// field at all.
func TestStatusShowsOrphanedPayment(t *testing.T) {
	rec := &ledgerpb.ProposalRecord{
		Proposal: &ledgerpb.Proposal{Id: common.HexToHash("0x01").Bytes(), Action: ledgerpb.Action_ACTION_WRITE, AcceptedAtMs: 1},
		Status:   ledgerpb.Status_STATUS_COMMITTED,
		PaymentOrphaned: &ledgerpb.PaymentOrphan{BlockNumber: 42, BlockHash: common.HexToHash("0xb1").Bytes(), LogIndex: 3,
			TxHash: common.HexToHash("0x7a").Bytes(), AtMs: 1_700_000_000_000},
	}
	s := StatusFromRecord(rec)
	o := s.PaymentOrphaned
	if o == nil || o.BlockNumber != 42 || o.LogIndex != 3 || o.BlockHash != common.HexToHash("0xb1").Hex() ||
		o.TxHash != common.HexToHash("0x7a").Hex() || o.RecordedAt.UnixMilli() != 1_700_000_000_000 {
		t.Fatalf("paymentOrphaned %+v", o)
	}
	body, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"paymentOrphaned":{"txHash":"0x`) {
		t.Errorf("body %s", body)
	}
	rec.PaymentOrphaned = nil
	if body, _ := json.Marshal(StatusFromRecord(rec)); strings.Contains(string(body), "paymentOrphaned") {
		t.Errorf("an unmarked record shows paymentOrphaned: %s", body)
	}
}
