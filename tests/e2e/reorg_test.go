package e2e

import (
	"context"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// TestReorgAfterCommitIsSignalled: a write commits on a payment; then a
// fork drops the payment's block and the new branch never mines it. The
// chain-watcher retracts the payment, the leader records it on the
// committed proposal through raft, and the validator's status route shows
// the proposal's payment as orphaned, with the retracted block, and the
// edge raises the paymentOrphaned signal (critical). Then the
// chain flips back to the dropped block: the watcher publishes the payment
// again (its next generation of message ids), the mark goes, the proposal
// keeps the payment it committed on, and the signal is back to ok.
func TestReorgAfterCommitIsSignalled(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	key := devKey(t, 4)
	p := &ledgerclient.Proposal{ContentType: "page", Class: payment.Standard, Message: []byte(`{"title":"paid on a lost branch"}`)}
	tx := pay(t, n, key, p)
	if _, _, err := submit(t, n, key, p, tx); err != nil {
		t.Fatal(err)
	}
	s := final(t, n, p.ID)
	if s.Status != api.StatusCommitted || s.Payment == nil || s.PaymentOrphaned != nil {
		t.Fatalf("before the fork: %+v", s)
	}

	receipt := dropBlockOf(t, n, tx)

	harness.Eventually(t, 30*time.Second, func() bool {
		var got api.ProposalStatus
		if code := getJSON(t, n.ValidatorURL+"/v1/proposals/"+p.ID.Hex()+"/status", &got); code != http.StatusOK {
			return false
		}
		s = got
		return got.PaymentOrphaned != nil
	})
	o := s.PaymentOrphaned
	if s.Status != api.StatusCommitted || o.BlockHash != receipt.BlockHash.Hex() || o.TxHash != tx.Hex() ||
		o.BlockNumber != receipt.BlockNumber.Uint64() || common.HexToHash(s.Payment.BlockHash) != receipt.BlockHash {
		t.Fatalf("status after the reorg: %+v, orphaned %+v", s, o)
	}
	waitOrphanSignal(t, n, 1, "critical")

	if err := n.Chain.Fork(receipt.BlockHash); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func() bool {
		var got api.ProposalStatus
		if code := getJSON(t, n.ValidatorURL+"/v1/proposals/"+p.ID.Hex()+"/status", &got); code != http.StatusOK {
			return false
		}
		s = got
		return got.PaymentOrphaned == nil
	})
	if s.Status != api.StatusCommitted || s.Payment == nil || common.HexToHash(s.Payment.BlockHash) != receipt.BlockHash {
		t.Fatalf("status after the flip back: %+v", s)
	}
	waitOrphanSignal(t, n, 0, "ok")
}

// waitOrphanSignal waits until the edge's paymentOrphaned signal has value
// and severity.
func waitOrphanSignal(t *testing.T, n *harness.Network, value float64, severity string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() bool {
		var sigs struct {
			Data struct {
				Signals []struct {
					ID       string   `json:"id"`
					Value    *float64 `json:"value"`
					Severity string   `json:"severity"`
				} `json:"signals"`
			} `json:"data"`
		}
		if getJSON(t, n.EdgeURL+"/ops/v1/signals", &sigs) != http.StatusOK {
			return false
		}
		for _, s := range sigs.Data.Signals {
			if s.ID == "paymentOrphaned" {
				return s.Value != nil && *s.Value == value && s.Severity == severity
			}
		}
		return false
	})
}

// dropBlockOf reorganizes the chain from the parent of the block holding
// tx, leaving out the block's transactions, and returns tx's receipt from
// before the reorg.
func dropBlockOf(t *testing.T, n *harness.Network, tx common.Hash) *types.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	receipt, err := n.Chain.Client().TransactionReceipt(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	parent, err := n.Chain.Client().HeaderByNumber(ctx, new(big.Int).Sub(receipt.BlockNumber, big.NewInt(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Chain.ForkDropping(parent.Hash()); err != nil {
		t.Fatal(err)
	}
	return receipt
}
