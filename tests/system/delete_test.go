package system

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// TestDeleteOnEveryValidator writes a node with nested children through one
// validator and deletes it through another: on every validator the whole
// subtree is gone, the wallet's GC account holds the same debt, and the
// state hashes agree.
func TestDeleteOnEveryValidator(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	// Writes go through followers: each must know the leader, or it
	// answers 503 leader_unknown (retryable) to the first submission.
	c.waitLeaderKnown(c.nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, second := c.client(c.nodes[0]), c.client(c.nodes[1])
	cfg, err := first.BlockchainConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := crypto.GenerateKey()
	wallet := crypto.PubkeyToAddress(key.PublicKey)

	p, form, path := signedWrite(t, cfg, key, "docs/guide", `{"title":"guide","chapter":{"one":{"text":"x"}}}`)
	if _, err := first.Submit(ctx, proposal.Write, form); err != nil {
		t.Fatal(err)
	}
	if s, err := first.WaitFinal(ctx, p.ID, nil); err != nil || !api.Committed(s.Status) {
		t.Fatalf("write: %v %v", s.Status, err)
	}
	del := &ledgerclient.Proposal{Action: proposal.Delete, ContentType: "page", Path: "docs/guide"}
	delForm, _, err := ledgerclient.Form(cfg, key, del, common.Hash{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Submit(ctx, proposal.Delete, delForm); err != nil {
		t.Fatal(err)
	}
	if s, err := second.WaitFinal(ctx, del.ID, nil); err != nil || !api.Committed(s.Status) {
		t.Fatalf("delete: %v %v", s.Status, err)
	}
	c.converged(c.nodes...)

	var want api.GcAccount
	for i, n := range c.nodes {
		for _, sub := range []string{path, path + "/chapter", path + "/chapter/one"} {
			resp, err := http.Get(n.url() + "/api/explore?path=" + url.QueryEscape(sub))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("validator %d still serves %s: %d", n.id, sub, resp.StatusCode)
			}
		}
		var acc api.GcAccount
		if err := get(n.url()+"/v1/gc/account/"+strings.ToLower(wallet.Hex()), &acc); err != nil {
			t.Fatal(err)
		}
		if acc.PendingDebtMicros+acc.ExecutedDebtMicros != 100_000 || acc.Deletes != 1 {
			t.Errorf("validator %d: account %+v, want 0.10 of debt from one delete", n.id, acc)
		}
		if i == 0 {
			want = acc
		} else if acc != want {
			t.Errorf("validator %d's account %+v differs from validator %d's %+v", n.id, acc, c.nodes[0].id, want)
		}
	}
}
