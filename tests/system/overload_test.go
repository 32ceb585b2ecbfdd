package system

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// TestOverloadAnswersFastAndDrains submits far more than the leader may
// hold (MAX_PENDING 8) from 48 clients at once for a few seconds: the
// excess is refused fast with retryable 429s, the leader's memory stays
// bounded, and once the load stops the backlog drains to zero with every
// accepted proposal committed.
func TestOverloadAnswersFastAndDrains(t *testing.T) {
	c := newCluster(t, 3, "MOCK", "SVC_VALIDATOR_MAX_PENDING=8", "SVC_VALIDATOR_RATE_PER_IP=0", "SVC_VALIDATOR_RATE_PER_WALLET=0")
	leader := c.waitLeader()
	client := c.client(leader)
	cfg, err := client.BlockchainConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rss0, err := harness.ProcMemory(leader.cmd.Process.Pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var accepted []common.Hash
	var refusals []time.Duration
	other := map[string]int{}
	peakRSS := rss0
	ctx, stop := context.WithTimeout(context.Background(), 4*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			key, _ := crypto.GenerateKey()
			for ctx.Err() == nil {
				p := &ledgerclient.Proposal{Message: []byte(`{"title":"overload"}`), ContentType: "page"}
				form, _, err := ledgerclient.Form(cfg, key, p, common.Hash{})
				if err != nil {
					t.Error(err)
					return
				}
				t0 := time.Now()
				sub, err := client.Submit(context.Background(), proposal.Write, form)
				d := time.Since(t0)
				mu.Lock()
				var e *apierror.Error
				switch {
				case err == nil && sub.HTTPStatus == http.StatusAccepted:
					accepted = append(accepted, p.ID)
				case errors.As(err, &e) && e.Retryable && (e.Code == apierror.Overloaded || e.Code == apierror.LeaderUnknown):
					refusals = append(refusals, d)
				default:
					other[fmt.Sprint(err)]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			if rss, err := harness.ProcMemory(leader.cmd.Process.Pid, "VmRSS"); err == nil {
				mu.Lock()
				peakRSS = max(peakRSS, rss)
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond) // sampling interval
		}
	})
	wg.Wait()

	if len(other) > 0 {
		t.Fatalf("answers that are neither 202 nor a retryable refusal: %v", other)
	}
	// Overload is the premise: with MAX_PENDING 8 the leader refuses a
	// large share. How large depends on how fast the clients sign on a
	// machine that also runs the servers (and, in make test, the race
	// detector), so the bound is loose.
	if len(refusals) < max(100, len(accepted)/4) {
		t.Fatalf("%d accepted and only %d refused: the load did not exceed the capacity", len(accepted), len(refusals))
	}
	slices.Sort(refusals)
	if p99 := refusals[len(refusals)*99/100]; p99 > time.Second {
		t.Fatalf("refusals are not fast: p99 %v", p99)
	}
	if grew := peakRSS - rss0; grew > 256<<20 {
		t.Fatalf("the leader's memory grew by %d MiB under overload", grew>>20)
	}
	harness.Eventually(t, 30*time.Second, func() bool {
		var pc api.PendingCount
		return get(leader.url()+"/v1/proposals/pending/count", &pc) == nil && pc.Pending == 0
	})
	for _, id := range accepted {
		s, err := client.Status(context.Background(), id, 0)
		if err != nil || !api.Committed(s.Status) {
			t.Fatalf("accepted proposal %s is %s: %v", id.Hex(), s.Status, err)
		}
	}
	t.Logf("%d accepted, %d refused (p50 %v, p99 %v), leader RSS %d -> peak %d MiB, drained to zero",
		len(accepted), len(refusals), refusals[len(refusals)/2], refusals[len(refusals)*99/100], rss0>>20, peakRSS>>20)
}
