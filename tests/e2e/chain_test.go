package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// networkChain is the part of /ops/v1/network this test reads.
type networkChain struct {
	Data struct {
		Chain struct {
			ChainID          uint64  `json:"chainId"`
			Head             *uint64 `json:"head"`
			HeadAgeMs        *int64  `json:"headAgeMs"`
			FinalizedBlock   *uint64 `json:"finalizedBlock"`
			WatcherLagBlocks *uint64 `json:"watcherLagBlocks"`
			SafeBlock        uint64  `json:"safeBlock"`
			Confirmations    uint64  `json:"confirmations"`
			CursorBlock      *uint64 `json:"cursorBlock"`
		} `json:"chain"`
		NATS struct {
			Streams []api.StreamState `json:"streams"`
		} `json:"nats"`
		Gaps []map[string]any `json:"gaps"`
	} `json:"data"`
}

// TestChainViewReachesOperators: on a chain where the watcher waits for 25
// confirmations, a paid proposal's transaction is OBSERVED (on chain, not
// yet confirmed) before it is CONFIRMED and then MATCHED by the committed
// proposal, and /ops/v1/network carries the chain's head, finalized block,
// the watcher's lag and the JetStream streams.
func TestChainViewReachesOperators(t *testing.T) {
	const confirmations = 25
	n := harness.Start(t, harness.Options{Confirmations: confirmations, BlockInterval: 150 * time.Millisecond, PaymentWait: time.Minute})

	// The watcher's status reaches the operators' view.
	var net networkChain
	harness.Eventually(t, 30*time.Second, func() bool {
		net = networkChain{}
		return getJSON(t, n.EdgeURL+"/ops/v1/network", &net) == http.StatusOK && net.Data.Chain.Head != nil &&
			net.Data.Chain.WatcherLagBlocks != nil && len(net.Data.NATS.Streams) == 2
	})
	c := net.Data.Chain
	head, err := n.Chain.Client().BlockNumber(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.ChainID != n.Chain.ChainID || *c.Head > head || head-*c.Head > 20 || c.HeadAgeMs == nil || *c.HeadAgeMs < 0 ||
		*c.HeadAgeMs > 60_000 || c.FinalizedBlock == nil || *c.FinalizedBlock > *c.Head || c.Confirmations != confirmations ||
		c.SafeBlock != *c.Head-confirmations || c.CursorBlock == nil || *c.CursorBlock > c.SafeBlock || *c.WatcherLagBlocks > 12 {
		t.Fatalf("chain %+v (chain head %d)", c, head)
	}
	names := []string{}
	for _, s := range net.Data.NATS.Streams {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"CHAIN_EVENTS", "LEDGER_EVENTS"}) || net.Data.NATS.Streams[0].Messages == 0 ||
		net.Data.NATS.Streams[0].LastSeq < net.Data.NATS.Streams[0].FirstSeq {
		t.Fatalf("streams %+v", net.Data.NATS.Streams)
	}
	for _, g := range net.Data.Gaps {
		t.Errorf("gap %v", g)
	}

	// Pay, submit at once, and follow the transaction: OBSERVED while it
	// waits for its confirmations (the submission is held meanwhile, ADR
	// 0030), then CONFIRMED (or straight MATCHED).
	key := devKey(t, 6)
	p := &ledgerclient.Proposal{ContentType: "page", Class: payment.Standard, Message: []byte(`{"title":"observed first"}`)}
	tx := pay(t, n, key, p)
	form, _, err := ledgerclient.Form(n.Config, key, p, tx)
	if err != nil {
		t.Fatal(err)
	}
	submitted := make(chan error, 1)
	go func() {
		_, err := n.Client.Submit(context.Background(), p.Action, form)
		submitted <- err
	}()
	var seen []string
	var observed api.Transaction
	summaryObserved := false
	harness.Eventually(t, 60*time.Second, func() bool {
		var got api.Transaction
		if getJSON(t, n.ValidatorURL+"/v1/transactions/"+tx.Hex(), &got) != http.StatusOK {
			return false
		}
		if len(seen) == 0 || seen[len(seen)-1] != got.State {
			seen = append(seen, got.State)
		}
		if got.State == api.TxObserved {
			if observed.TxHash == "" {
				observed = got // the first look, before its confirmations
			}
			var sum struct {
				Data api.TransactionSummary `json:"data"`
			}
			if getJSON(t, n.EdgeURL+"/ops/v1/transactions/summary", &sum) == http.StatusOK && sum.Data.ByState[api.TxObserved] >= 1 {
				summaryObserved = true
			}
		}
		return got.State == api.TxMatched
	})
	if err := <-submitted; err != nil {
		t.Fatalf("the submission held for its payment: %v", err)
	}
	if len(seen) < 2 || seen[0] != api.TxObserved || seen[len(seen)-1] != api.TxMatched {
		t.Fatalf("states seen %v", seen)
	}
	if len(observed.Payments) != 1 {
		t.Fatalf("observed transaction %+v", observed)
	}
	op := observed.Payments[0]
	if op.ProposalID != p.ID.Hex() || op.State != api.TxObserved || op.Confirmations >= confirmations ||
		op.Amount != payment.Standard.Price(payment.ETH).String() || op.Class != "STANDARD" ||
		!slices.Equal(states(op.History), []string{api.TxObserved}) || op.ProposalStatus != nil { // held, not replicated
		t.Fatalf("observed payment %+v", op)
	}
	if !summaryObserved {
		t.Error("the transaction summary never counted the transaction OBSERVED")
	}
	if s := final(t, n, p.ID); s.Status != api.StatusCommitted {
		t.Fatalf("proposal %+v", s)
	}
	var matched api.Transaction
	getJSON(t, n.ValidatorURL+"/v1/transactions/"+tx.Hex(), &matched)
	if h := states(matched.Payments[0].History); !slices.Equal(h, []string{api.TxObserved, api.TxConfirmed, api.TxMatched}) ||
		matched.Payments[0].Confirmations < confirmations {
		t.Fatalf("matched payment %+v", matched.Payments[0])
	}
}
