package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// loadPhase is when a submission's answer came, relative to the watcher's
// outage.
type loadPhase int32

const (
	watcherRunning loadPhase = iota
	watcherStopped
	watcherRestarted
	phases
)

// paidProposal is a proposal paid on chain and accepted (202, or 200 for
// an identical earlier submission).
type paidProposal struct {
	id     common.Hash
	tx     common.Hash
	wallet common.Address
}

// paidLoad is several payers paying for proposals one after another and
// submitting each while the next is paid, up to perPayer at once,
// resubmitting every retryable payment refusal after its Retry-After as
// ADR 0030 asks of a client, until it is accepted. A proposal once paid
// is never abandoned: stopping the load stops only new payments.
type paidLoad struct {
	n     *harness.Network
	phase atomic.Int32 // a loadPhase

	mu       sync.Mutex
	accepted []paidProposal
	// acceptedIn counts acceptances by phase; refused, retryable payment
	// refusals by phase and code.
	acceptedIn [phases]int
	refused    [phases]map[apierror.Code]int
	// failures are answers a paying client must never get: a refusal
	// that is not a retryable payment refusal, or a proposal still
	// refused when its retries ran out.
	failures []string
}

const (
	// perPayer bounds a payer's submissions under way, below the hold's
	// bound per wallet (HOLD_PER_WALLET, 16).
	perPayer = 6
	// retryFor bounds the resubmissions of one paid proposal: the outage,
	// the watcher's catching up and a few Retry-Afters.
	retryFor = 45 * time.Second
)

func (l *paidLoad) run(stop context.Context, key *ecdsa.PrivateKey, payer int) {
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	slots := make(chan struct{}, perPayer)
	var submitting sync.WaitGroup
	defer submitting.Wait()
	for seq := 0; ; seq++ {
		select {
		case slots <- struct{}{}:
		case <-stop.Done():
			return
		}
		if stop.Err() != nil {
			return
		}
		p := &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), ContentType: "page", Class: payment.Standard,
			Message: fmt.Appendf(nil, `{"payer":%d,"seq":%d}`, payer, seq)}
		tx, err := l.pay(key, p)
		if err != nil {
			l.fail("payer %d paying for %s: %v", payer, p.ID.Hex(), err)
			return
		}
		// Signed by the wallet that paid (ADR 0028).
		form, _, err := ledgerclient.Form(l.n.Config, key, p, tx)
		if err != nil {
			l.fail("payer %d signing %s: %v", payer, p.ID.Hex(), err)
			return
		}
		submitting.Go(func() {
			defer func() { <-slots }()
			if !l.submitUntilAccepted(p.ID, form) {
				return
			}
			l.mu.Lock()
			l.accepted = append(l.accepted, paidProposal{id: p.ID, tx: tx, wallet: wallet})
			l.acceptedIn[l.phase.Load()]++
			l.mu.Unlock()
		})
	}
}

func (l *paidLoad) pay(key *ecdsa.PrivateKey, p *ledgerclient.Proposal) (common.Hash, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	receipt, err := ledgerclient.Pay(ctx, l.n.Chain.Client(), key, l.n.Chain.ChainID, l.n.Chain.PaymentLedger, p.ID, p.Class)
	if err != nil {
		return common.Hash{}, err
	}
	return receipt.TxHash, nil
}

// submitUntilAccepted submits form until it is accepted (true), counting
// each retryable payment refusal; anything else is a failure (false).
func (l *paidLoad) submitUntilAccepted(id common.Hash, form url.Values) bool {
	until := time.Now().Add(retryFor)
	for {
		sub, err := l.n.Client.Submit(context.Background(), proposal.Write, form)
		if err == nil {
			if sub.HTTPStatus != http.StatusAccepted && sub.HTTPStatus != http.StatusOK {
				l.fail("%s answered %d", id.Hex(), sub.HTTPStatus)
				return false
			}
			return true
		}
		e := apierror.As(err)
		if e == nil || !e.Retryable || (e.Code != apierror.PaymentNotFound && e.Code != apierror.PaymentFeedStale) {
			l.fail("%s refused: %v", id.Hex(), err)
			return false
		}
		l.mu.Lock()
		phase := l.phase.Load()
		if l.refused[phase] == nil {
			l.refused[phase] = map[apierror.Code]int{}
		}
		l.refused[phase][e.Code]++
		l.mu.Unlock()
		if time.Now().After(until) {
			l.fail("%s still refused after %s: %v", id.Hex(), retryFor, err)
			return false
		}
		// The client's side of the protocol: resubmit after Retry-After.
		time.Sleep(max(e.RetryAfter, 500*time.Millisecond))
	}
}

func (l *paidLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
}

func (l *paidLoad) acceptedDuring(phase loadPhase) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acceptedIn[phase]
}

// TestAttackWatcherStoppedUnderLoad: the chain-watcher stops while paying
// clients submit, long enough that its status goes stale and several
// payment waits pass, then starts again from its checkpoint. Its outage
// must cost the clients retries only: submissions held during it are
// refused retryable (503 payment_feed_stale once the status is stale),
// nothing is rejected for good, and every paid proposal commits once the
// watcher is back (ADR 0030). Before the hold, a proposal accepted during
// the outage was REJECTED payment_not_found after PAYMENT_WAIT.
//
// Scaled down from a ten-minute outage: PAYMENT_WAIT 3 s, CHAIN_STATUS_STALE
// 2 s, the watcher stopped for 20 s.
func TestAttackWatcherStoppedUnderLoad(t *testing.T) {
	const (
		paymentWait = 3 * time.Second
		statusStale = 2 * time.Second
		outage      = 20 * time.Second
		payers      = 4
	)
	n := harness.Start(t, harness.Options{PaymentWait: paymentWait, ChainStatusStale: statusStale})
	load := &paidLoad{n: n}
	stop, stopLoad := context.WithCancel(context.Background())
	var clients sync.WaitGroup
	// Before the network's own cleanup, which runs later.
	t.Cleanup(func() {
		stopLoad()
		clients.Wait()
	})
	for i := range payers {
		key := devKey(t, 1+i)
		clients.Go(func() { load.run(stop, key, i) })
	}
	failed := func() bool {
		load.mu.Lock()
		defer load.mu.Unlock()
		return len(load.failures) > 0
	}
	// Fail at once rather than at a deadline when a client gave up.
	within := func(d time.Duration, cond func() bool) {
		t.Helper()
		harness.Eventually(t, d, func() bool { return failed() || cond() })
		if failed() {
			stopLoad()
			clients.Wait()
			t.Fatalf("paying clients failed: %s", strings.Join(load.failures, "; "))
		}
	}

	within(30*time.Second, func() bool { return load.acceptedDuring(watcherRunning) >= payers })

	// The watcher's lag is an operational event of each validator (ADR
	// 0039): a stream opened now shows the feed going stale and coming back.
	feed := feedEvents(t, n.ValidatorURL)
	load.phase.Store(int32(watcherStopped))
	n.StopWatcher(t)
	stoppedAt := time.Now()
	// The outage's length is the scenario's, not a state to wait for: the
	// load goes on meanwhile (and fails the test at once if a client
	// gets an answer it must never get).
	within(outage+time.Second, func() bool { return time.Since(stoppedAt) >= outage })

	load.phase.Store(int32(watcherRestarted))
	n.StartWatcher(t)
	within(30*time.Second, func() bool { return load.acceptedDuring(watcherRestarted) >= payers })
	stopLoad()
	clients.Wait() // every request answered: nothing is held for a client any more
	if len(load.failures) > 0 {
		t.Fatalf("paying clients failed: %s", strings.Join(load.failures, "; "))
	}

	var seen []string
	staleSeen := false
	harness.Eventually(t, 30*time.Second, func() bool {
		select {
		case ev, ok := <-feed:
			if !ok {
				t.Fatalf("the operational event stream ended; chain feed events %v", seen)
			}
			seen = append(seen, ev.Type+" "+ev.Attributes.Reason)
			staleSeen = staleSeen || (ev.Type == "chain.feed_stale" && ev.Attributes.Reason == "status_old")
			return staleSeen && ev.Type == "chain.feed_current"
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	t.Logf("chain feed events on /v1/ops/events/stream: %v", seen)

	load.mu.Lock()
	accepted, refused, acceptedIn := load.accepted, load.refused, load.acceptedIn
	load.mu.Unlock()
	t.Logf("accepted by phase (running, stopped, restarted) %v; retryable refusals by phase %v", acceptedIn, refused)
	if refused[watcherStopped][apierror.PaymentFeedStale] == 0 {
		t.Errorf("no 503 payment_feed_stale while the watcher was stopped: %v", refused[watcherStopped])
	}

	// Every paid proposal committed on its own payment, by its payer.
	wrong := map[string]int{} // by status and reason
	for _, p := range accepted {
		s := final(t, n, p.id)
		committed := s.Status == api.StatusCommitted || s.Status == api.StatusFinalized
		if committed && strings.EqualFold(s.Wallet, p.wallet.Hex()) && s.Payment != nil && s.Payment.TxHash == p.tx.Hex() {
			continue
		}
		if len(wrong) == 0 { // the first in full, the rest counted
			t.Errorf("paid proposal %s: status %+v, want committed by %s on %s", p.id.Hex(), s, p.wallet.Hex(), p.tx.Hex())
		}
		wrong[s.Status+" "+s.Reason]++
	}
	if len(wrong) > 0 {
		t.Errorf("of %d paid proposals, not committed as paid: %v", len(accepted), wrong)
	}

	// And the replicated counts agree: nothing rejected, nothing waiting.
	var counts api.ProposalCounts
	if code := getJSON(t, n.ValidatorURL+"/v1/proposals/counts", &counts); code != http.StatusOK {
		t.Fatalf("proposal counts: %d", code)
	}
	if counts.Rejected != 0 || len(counts.RejectedByReason) != 0 {
		t.Errorf("proposals rejected: %d %v", counts.Rejected, counts.RejectedByReason)
	}
	var queue api.QueueStats
	harness.Eventually(t, 10*time.Second, func() bool {
		return getJSON(t, n.ValidatorURL+"/v1/proposals/queue/stats", &queue) == http.StatusOK &&
			queue.QueuedProposals == 0 && queue.BackpressurePendingRawCount == 0 && queue.ProcessedCount >= uint64(len(accepted))
	})
	if queue.RejectedCount != 0 || queue.AwaitingPayment != 0 || queue.VerifiedCount != uint64(len(accepted)) ||
		queue.ProcessedCount != uint64(len(accepted)) {
		t.Errorf("queue statistics: %d verified, %d processed, %d rejected %v, %d awaiting payment; want %d verified and processed, "+
			"none rejected or awaiting payment", queue.VerifiedCount, queue.ProcessedCount, queue.RejectedCount, queue.RejectedByReason,
			queue.AwaitingPayment, len(accepted))
	}
}

// feedEvents follows the chain feed events of a validator's operational
// event stream from now on, until the test ends.
func feedEvents(t *testing.T, base string) <-chan api.OpsEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/ops/events/stream?types=chain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the operational event stream: %d", resp.StatusCode)
	}
	out := make(chan api.OpsEvent, 100)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var ev api.OpsEvent
			if ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Type != "" {
				out <- ev
			}
		}
	}()
	return out
}
