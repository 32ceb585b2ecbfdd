package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// TestTransactionStates follows payment transactions through the states of
// ADR 0007 on the validator's source routes: a payment spent by a
// committed proposal is MATCHED, one paid for a proposal never submitted
// stays CONFIRMED, and a reorg that drops the block makes the first
// ORPHANED.
func TestTransactionStates(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	key := devKey(t, 5)
	spent := &ledgerclient.Proposal{ContentType: "page", Class: payment.Standard, Message: []byte(`{"title":"spent"}`)}
	spentTx := pay(t, n, key, spent)
	if _, _, err := submit(t, n, key, spent, spentTx); err != nil {
		t.Fatal(err)
	}
	if s := final(t, n, spent.ID); s.Status != api.StatusCommitted {
		t.Fatalf("proposal %+v", s)
	}
	unspent := &ledgerclient.Proposal{ContentType: "page", Class: payment.Standard, Message: []byte(`{"title":"never sent"}`)}
	unspentTx := pay(t, n, key, unspent)

	var tx api.Transaction
	if code := getJSON(t, n.ValidatorURL+"/v1/transactions/"+spentTx.Hex(), &tx); code != http.StatusOK {
		t.Fatalf("spent transaction: %d %+v", code, tx)
	}
	if tx.ContractVersion != api.TransactionVersion || tx.TxHash != spentTx.Hex() || tx.State != api.TxMatched || len(tx.Payments) != 1 {
		t.Fatalf("spent transaction %+v", tx)
	}
	p := tx.Payments[0]
	if p.ProposalID != spent.ID.Hex() || p.State != api.TxMatched || p.ProposalStatus == nil || *p.ProposalStatus != api.StatusCommitted ||
		p.Amount != payment.Standard.Price(payment.ETH).String() || p.Token != "ETH" || !slices.Equal(states(p.History), []string{api.TxObserved, api.TxConfirmed, api.TxMatched}) {
		t.Fatalf("spent payment %+v", p)
	}

	// The same through the edge, in its envelope.
	var env struct {
		Data api.Transaction `json:"data"`
	}
	if code := getJSON(t, n.EdgeURL+"/ops/v1/transactions/"+spentTx.Hex(), &env); code != http.StatusOK ||
		env.Data.State != api.TxMatched || env.Data.TxHash != spentTx.Hex() {
		t.Fatalf("edge: %d %+v", code, env)
	}

	harness.Eventually(t, 30*time.Second, func() bool {
		tx = api.Transaction{}
		// OBSERVED first, while it waits for its confirmations.
		return getJSON(t, n.ValidatorURL+"/v1/transactions/"+unspentTx.Hex(), &tx) == http.StatusOK && tx.State != api.TxObserved
	})
	if tx.State != api.TxConfirmed || tx.Payments[0].ProposalStatus != nil || tx.Payments[0].ProposalID != unspent.ID.Hex() {
		t.Fatalf("unspent transaction %+v", tx)
	}
	var summary api.TransactionSummary
	harness.Eventually(t, 30*time.Second, func() bool {
		summary = api.TransactionSummary{}
		getJSON(t, n.ValidatorURL+"/v1/transactions/summary", &summary)
		return summary.ByState[api.TxMatched] >= 1 && summary.ByState[api.TxConfirmed] >= 1
	})
	if summary.ContractVersion != api.TransactionSummaryVersion || summary.Total != sum(summary.ByState) || len(summary.ByState) != 5 {
		t.Fatalf("summary %+v", summary)
	}

	var missing map[string]any
	if code := getJSON(t, n.ValidatorURL+"/v1/transactions/"+ledgerclient.NewProposalID().Hex(), &missing); code != http.StatusNotFound {
		t.Fatalf("unknown transaction: %d %v", code, missing)
	}
	if code := getJSON(t, n.ValidatorURL+"/v1/transactions/0x1234", &missing); code != http.StatusBadRequest {
		t.Fatalf("malformed transaction hash: %d %v", code, missing)
	}

	dropBlockOf(t, n, spentTx)
	harness.Eventually(t, 30*time.Second, func() bool {
		tx = api.Transaction{}
		getJSON(t, n.ValidatorURL+"/v1/transactions/"+spentTx.Hex(), &tx)
		return tx.State == api.TxOrphaned
	})
	if h := states(tx.Payments[0].History); h[len(h)-1] != api.TxOrphaned {
		t.Fatalf("orphaned payment history %v", h)
	}
}

func states(h []api.TransactionStateChange) []string {
	out := make([]string, len(h))
	for i, c := range h {
		out[i] = c.State
	}
	return out
}

func sum(m map[string]int) int {
	total := 0
	for _, v := range m {
		total += v
	}
	return total
}
