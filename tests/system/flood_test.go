package system

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// The flood's shape: fresh keys, each behind its own forwarded address, a
// bounded number of submissions in flight, and messages large enough that
// the hold's byte bound is what stops them.
const (
	floodKeys         = 1000
	floodInFlight     = 200
	floodMessageBytes = 128 << 10
	floodHoldBytes    = 4 << 20
	floodPaid         = 60
)

// TestAttackUnpaidFlood: 1,000 fresh keys flood the leader with validly
// signed, never paid proposals (random transaction hashes) from distinct
// client addresses behind a trusted proxy, as a botnet would, while paid
// proposals are submitted. The hold (ADR 0030) must keep all of it off the
// cluster:
//
//   - every flood submission is refused 402 payment_not_found, retryable,
//     with Retry-After (or, its client back before that Retry-After while
//     the bound is still reached, 429 rate_limited, also retryable), and
//     no validator has a status for any flood id;
//   - a client refused at the bound that comes back at once is refused
//     without its form being decoded: a form that does not decode is
//     answered 429 rate_limited, where decoding it answers 400;
//   - every paid proposal commits, and every validator counts exactly the
//     paid ones committed and nothing rejected;
//   - the raft log carried nothing of the flood. Two pieces of evidence:
//     every flood message starts with a marker unique to this run, written
//     in characters the rest of the message never uses (so a compressed
//     block still holds its first occurrence literally), and no file in any
//     validator's data directory (raft log, WAL, state, segments) contains
//     it; and the bytes the leader sent its peers during the flood stay
//     within what the paid proposals and raft's own traffic explain, far
//     below one flood message per peer per proposal replicated;
//   - the leader's resident memory stays bounded: its peak (VmHWM) grows
//     from the baseline before the flood by at most what the bounds allow,
//     the held messages (HOLD_BYTES) and the request bodies in flight,
//     each counted a few times over for their decoded copies and the
//     garbage collector's headroom, plus a fixed allowance;
//   - validator_payment_hold_refused_total > 0: the byte bound was reached
//     (HOLD_BYTES holds 32 flood messages, 200 are in flight).
//
// Without the hold the leader accepts the unpaid proposals, replicates
// them as PENDING and rejects them later: flood ids have statuses, the
// rejected counts are not zero, and the marker is in every data directory.
func TestAttackUnpaidFlood(t *testing.T) {
	c := newCluster(t, 3, "TESTNET",
		"SVC_VALIDATOR_SUBMIT_TOKENS="+submitToken,
		"SVC_VALIDATOR_PAYMENT_WAIT=2s",
		"SVC_VALIDATOR_TRUSTED_PROXIES=127.0.0.1/32",
		"SVC_VALIDATOR_FORWARDED_HEADER=X-Forwarded-For",
		"SVC_VALIDATOR_HOLD_BYTES="+strconv.Itoa(floodHoldBytes),
	)
	leader := c.waitLeader()
	client := c.client(leader)
	client.Token = submitToken
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg, err := client.BlockchainConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The paid load is paid first, and submitted once the leader has
	// indexed every payment, so the paid submissions do not wait in the
	// hold beside the flood (a client that pays and submits at once would
	// wait its watcher's lag, and retry a refusal: PaymentRetry below).
	paid := payFor(ctx, t, c, floodPaid)
	harness.Eventually(t, time.Minute, func() bool {
		return nodeMetric(t, leader, "validator_payments_indexed") >= floodPaid
	})

	keys := make([]*ecdsa.PrivateKey, floodKeys)
	for i := range keys {
		if keys[i], err = crypto.GenerateKey(); err != nil {
			t.Fatal(err)
		}
	}
	marker := floodMarker(t)
	message := append([]byte(marker), bytes.Repeat([]byte("unpaid flood "), floodMessageBytes/13)...)

	rss0, err := harness.ProcMemory(leader.cmd.Process.Pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	sent0 := nodeMetric(t, leader, "validator_peer_sent_bytes_total")

	// The flood runs until the paid load is done, every key at least once.
	var (
		paidDone  atomic.Bool
		mu        sync.Mutex
		floodIDs  []common.Hash
		wrong     = map[string]int{}
		submitted atomic.Int64
	)
	var flood sync.WaitGroup
	next := make(chan int)
	go func() {
		defer close(next)
		for i := 0; i < floodKeys || !paidDone.Load(); i++ {
			select {
			case next <- i % floodKeys:
			case <-ctx.Done():
				return
			}
		}
	}()
	// Every flood connection is kept for reuse and no more are opened. With
	// Go's default of 100 idle connections in all, the client closed and
	// reopened connections beyond that. A new one can then meet the server's
	// per-client cap while the server still counts closed ones it has not
	// read to their end, and be closed at once: a transport error for the
	// submission, not an answer (seen now and then in `make test`).
	floodHTTP := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: floodInFlight, MaxIdleConnsPerHost: floodInFlight, MaxConnsPerHost: floodInFlight}}
	for range floodInFlight {
		flood.Go(func() {
			for k := range next {
				p := &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), Message: message, ContentType: "flood"}
				form, _, err := ledgerclient.Form(cfg, keys[k], p, randomHash(t))
				if err != nil {
					t.Error(err)
					return
				}
				verdict := floodSubmit(ctx, floodHTTP, leader.url(), form.Encode(), fmt.Sprintf("10.%d.%d.1", k/250, k%250))
				submitted.Add(1)
				mu.Lock()
				floodIDs = append(floodIDs, p.ID)
				if verdict != "" {
					wrong[verdict]++
				}
				mu.Unlock()
			}
		})
	}

	// The paid load: closed-loop submitters through the leader, started
	// once the flood has filled the hold.
	harness.Eventually(t, 30*time.Second, func() bool { return submitted.Load() >= floodInFlight })

	// An impatient client: refused at the bound, it comes back at once
	// with a form of the same size that does not decode.
	impatient, drained := 0, 0
	harness.Eventually(t, 30*time.Second, func() bool {
		impatient++
		client := fmt.Sprintf("10.251.%d.1", impatient)
		p := &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), Message: message, ContentType: "flood"}
		form, _, err := ledgerclient.Form(cfg, keys[0], p, randomHash(t))
		if err != nil {
			t.Fatal(err)
		}
		// Only the refusal at the bound marks the client: a submission the
		// hold took may also be refused quickly, once the watcher has
		// checked the block that was the head when it arrived.
		if code, answer, _ := post(ctx, floodHTTP, leader.url(), form.Encode(), client); code != http.StatusPaymentRequired || !strings.Contains(answer, "too many submissions are already waiting") {
			return false
		}
		// The impatient client is refused only while the bound is still
		// reached; the flood keeps it so nearly always, and a 400 here
		// (the hold had drained) is tried again with a fresh client.
		code, answer, retryAfter := post(ctx, floodHTTP, leader.url(), "proposalId=%zz&message="+strings.Repeat("z", len(message)), client)
		switch {
		case code == http.StatusTooManyRequests && strings.Contains(answer, `"rate_limited"`) && retryAfter != "":
			return true
		case code == http.StatusBadRequest:
			drained++
			return false
		default:
			t.Fatalf("a client back at once after a refusal at the bound, with a form that does not decode: %d %s", code, answer)
			return false
		}
	})
	if drained > 0 {
		t.Logf("the impatient client found the hold drained %d times before it was refused", drained)
	}
	paidClient := c.client(leader)
	paidClient.Token, paidClient.PaymentRetry = submitToken, time.Minute
	work := make(chan int, len(paid))
	for i := range paid {
		work <- i
	}
	close(work)
	var load sync.WaitGroup
	var failures []string
	for range 8 {
		load.Go(func() {
			for i := range work {
				form, _, err := ledgerclient.Form(cfg, paid[i].key, paid[i].proposal, paid[i].tx)
				if err == nil {
					var sub ledgerclient.Submitted
					if sub, err = paidClient.SubmitAndWait(ctx, proposal.Write, form, 30*time.Second); err == nil && !api.Committed(sub.Receipt.Status) && !api.Committed(sub.Existing.Status) {
						err = fmt.Errorf("answered %d, %q", sub.HTTPStatus, sub.Receipt.Status+sub.Existing.Status)
					}
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("paid proposal %d: %v", i, err))
					mu.Unlock()
				}
			}
		})
	}
	load.Wait()
	paidDone.Store(true)
	flood.Wait()
	hwm, err := harness.ProcMemory(leader.cmd.Process.Pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d paid proposals did not commit during the flood: %v", len(failures), len(paid), failures[:min(5, len(failures))])
	}
	if len(wrong) > 0 {
		t.Errorf("flood submissions answered otherwise than 402 payment_not_found, retryable: %v", wrong)
	}
	if len(floodIDs) < floodKeys {
		t.Fatalf("only %d flood submissions were sent", len(floodIDs))
	}

	// Replicated outcomes, on every validator once they agree.
	c.converged(c.nodes...)
	for _, n := range c.nodes {
		if got := nodeMetric(t, n, "validator_proposals_committed_total"); got != floodPaid {
			t.Errorf("validator %d: %v proposals committed, want the %d paid", n.id, got, floodPaid)
		}
		if got := nodeMetric(t, n, "validator_proposals_rejected_total"); got > 0 {
			t.Errorf("validator %d: %v proposals rejected, want none", n.id, got)
		}
	}
	for _, n := range c.nodes {
		nc := c.client(n)
		nc.Token = submitToken
		for _, i := range []int{0, len(floodIDs) / 2, len(floodIDs) - 1} {
			if s, err := nc.Status(ctx, floodIDs[i], 0); apierror.CodeOf(err) != apierror.NotFound {
				t.Errorf("validator %d has flood proposal %s: %q %v", n.id, floodIDs[i].Hex(), s.Status, err)
			}
		}
	}
	for _, n := range c.nodes {
		if file := fileContaining(t, n.dataDir, []byte(marker)); file != "" {
			t.Errorf("validator %d stored a flood message: %s", n.id, file)
		}
	}

	// Raft's bytes: everything the leader replicated went to its peers.
	// The paid proposals' forms, counted three times over (the entry's
	// encoding, and a resend after a dropped message), plus 2 MiB for
	// heartbeats, leader announcements and epoch changes, explain it; 16
	// flood messages to two peers would already pass that.
	var paidBytes float64
	for _, p := range paid {
		paidBytes += float64(len(p.proposal.Message) + 1024)
	}
	sent := nodeMetric(t, leader, "validator_peer_sent_bytes_total") - sent0
	if allowed := 2*3*paidBytes + 2<<20; sent > allowed {
		t.Errorf("the leader sent its peers %.0f bytes during the flood, more than the %.0f the paid load explains", sent, allowed)
	}

	// Memory: the bounds bound it, not the flood's size.
	allowance := int64(4*floodHoldBytes + 4*floodInFlight*floodMessageBytes + 64<<20)
	if grew := hwm - rss0; grew > allowance {
		t.Errorf("the leader's peak RSS grew by %d MiB under the flood, more than the %d MiB its bounds allow", grew>>20, allowance>>20)
	}
	refused := nodeMetric(t, leader, "validator_payment_hold_refused_total")
	if refused <= 0 {
		t.Errorf("validator_payment_hold_refused_total is %v: the flood never reached a bound", refused)
	}
	if got := nodeMetric(t, leader, "validator_payment_hold_refused_impatient_total"); got < 1 {
		t.Errorf("validator_payment_hold_refused_impatient_total is %v after a client came back early", got)
	}
	if w := nodeMetric(t, leader, "validator_payment_hold_waiting"); w != 0 {
		t.Errorf("%v submissions still held after the flood", w)
	}
	t.Logf("%d flood submissions (%d MiB) from %d keys refused, %v of them at a bound; %d paid committed; leader sent %.0f KiB to peers; leader RSS %d MiB before, peak %d MiB",
		len(floodIDs), len(floodIDs)*len(message)>>20, floodKeys, refused, len(paid), sent/1024, rss0>>20, hwm>>20)
}

// paidProposal is a proposal paid on chain by key, which signs it.
type paidProposal struct {
	key      *ecdsa.PrivateKey
	proposal *ledgerclient.Proposal
	tx       common.Hash
}

// payFor pays n proposals from the dev accounts and waits until they are
// mined.
func payFor(ctx context.Context, t *testing.T, c *cluster, n int) []paidProposal {
	t.Helper()
	out := make([]paidProposal, n)
	var wg sync.WaitGroup
	for w, account := range devchain.DevAccounts {
		key := account.MustKey()
		wg.Go(func() {
			for i := w; i < n; i += len(devchain.DevAccounts) {
				p := &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), Message: []byte(`{"title":"paid during a flood"}`), ContentType: "page", Class: payment.Standard}
				tx, err := c.net.Chain.PayForProposal(ctx, key, p.ID, p.Class)
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = paidProposal{key: key, proposal: p, tx: tx}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, p := range out {
		if _, err := c.net.Chain.WaitMined(ctx, p.tx); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// floodSubmit posts one flood form to the leader as a proxy forwarding
// client, and returns "" when the answer is what the hold must give an
// unpaid submission, else a description of the answer.
func floodSubmit(ctx context.Context, hc *http.Client, base, form, client string) string {
	code, raw, retryAfter := post(ctx, hc, base, form, client)
	var body apierror.Body
	if err := json.Unmarshal([]byte(raw), &body); err != nil || body.Error == nil {
		return fmt.Sprintf("%d, not an error: %.100s", code, raw)
	}
	e := body.Error
	refused := code == http.StatusPaymentRequired && e.Code == apierror.PaymentNotFound ||
		code == http.StatusTooManyRequests && e.Code == apierror.RateLimited
	if !refused || !e.Retryable || retryAfter == "" {
		return fmt.Sprintf("%d %s retryable=%v Retry-After=%q", code, e.Code, e.Retryable, retryAfter)
	}
	return ""
}

// post sends body to the leader's write route as a proxy forwarding
// client, and returns the answer's status, body and Retry-After (0 and the
// error when none came).
func post(ctx context.Context, hc *http.Client, base, body, client string) (code int, answer, retryAfter string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/propose-write", strings.NewReader(body))
	if err != nil {
		return 0, err.Error(), ""
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+submitToken)
	req.Header.Set("X-Forwarded-For", client)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "transport: " + err.Error(), ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header.Get("Retry-After")
}

// floodMarker is a string unique to this run, of upper-case letters only:
// the flood messages are otherwise lower case, so no four bytes of it
// occur in them elsewhere and a compressor keeps its first occurrence in
// a block literally.
func floodMarker(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'A' + b[i]%26
	}
	return "UNPAIDFLOOD" + string(b)
}

func randomHash(t *testing.T) common.Hash {
	var h common.Hash
	if _, err := rand.Read(h[:]); err != nil {
		t.Error(err)
	}
	return h
}

// fileContaining returns the first file under dir that contains needle,
// "" when none does.
func fileContaining(t *testing.T, dir string, needle []byte) string {
	t.Helper()
	var found string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a file removed while walking (a compaction)
			}
			return err
		}
		if d.IsDir() || found != "" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if bytes.Contains(b, needle) {
			found = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// nodeMetric sums every series of the family name on n's /metrics; 0 when
// it has none.
func nodeMetric(t *testing.T, n *node, name string) float64 {
	t.Helper()
	sum, err := harness.SumMetric(getBody(t, n.url()+"/metrics"), name)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}
