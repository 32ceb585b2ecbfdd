package bench

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// BenchmarkPipeline measures the whole pipeline end to end: 3 validators in
// TESTNET mode (every payment verified against the dev chain through the
// chain-watcher and NATS), fsync on, real EIP-712 signatures, 1 KiB
// messages. Every proposal is paid on the chain and its payment observed
// by the leader before the timer starts. Two loads:
//
//	load=saturated  BENCH_PIPELINE_CLIENTS closed-loop clients (default 256): proposals/s
//	load=half       an open loop at half the saturated rate: p50/p99 latency at half load
//
// Both report the leader's peak RSS (VmHWM); the saturated run also reports
// where the CPU went, as BenchmarkCluster does (this process runs the dev
// chain, NATS and the chain-watcher besides the clients). BENCH_PROFILE
// profiles every validator during the saturated run (see BenchmarkCluster).
// Run with a fixed count, e.g. -bench BenchmarkPipeline -benchtime 20000x:
// every proposal is paid first. With -count N every sub-benchmark runs N
// times on the same cluster, so each run starts on the state the earlier
// ones wrote (a larger database, and a longer chain for the dev chain to
// extend), which is slower: compare runs with the same position.
// The benchmark's TESTNET validators run with their lanes guarded, as in
// production: the operator lane (which outside MOCK mode must be), and the
// submit lane, whose token every submission carries, so the token check is
// part of what is measured.
const (
	benchOperatorToken = "bench-operator-token-0123456789"
	benchSubmitToken   = "bench-submit-token-0123456789"
)

func BenchmarkPipeline(b *testing.B) {
	backing := harness.StartBacking(b, harness.Options{Quiet: true, Confirmations: 1, BlockInterval: 50 * time.Millisecond})
	chain := backing.Chain
	c, err := startLedger(b.Cleanup, b.TempDir(), append(backing.ValidatorNATSEnv(),
		"SVC_VALIDATOR_MODE=TESTNET", "SVC_VALIDATOR_PAYMENT_STREAM=CHAIN_EVENTS",
		"SVC_VALIDATOR_CHAIN_ID="+strconv.FormatUint(chain.ChainID, 10), "SVC_VALIDATOR_CONTRACT_ADDRESS="+chain.PaymentLedger.Hex(),
		"SVC_VALIDATOR_CONFIRMATIONS=1", "SVC_VALIDATOR_PAYMENT_WAIT=60s", "SVC_VALIDATOR_OPERATOR_TOKENS="+benchOperatorToken,
		"SVC_VALIDATOR_SUBMIT_TOKENS="+benchSubmitToken)...)
	if err != nil {
		b.Fatal(err)
	}
	clients := 256
	if s := os.Getenv("BENCH_PIPELINE_CLIENTS"); s != "" {
		if clients, err = strconv.Atoi(s); err != nil || clients <= 0 {
			b.Fatalf("BENCH_PIPELINE_CLIENTS=%q is not a positive integer", s)
		}
	}
	var saturated float64
	b.Run("load=saturated", func(b *testing.B) {
		forms := c.prepaid(b, chain, b.N)
		profiled := startProfile(b, c, clients)
		meter := startCPUMeter(c.servers())
		latencies, elapsed := c.drive(b, forms, clients, 0)
		profiled()
		saturated = float64(b.N) / elapsed.Seconds()
		c.report(b, latencies, elapsed)
		meter.report(b)
	})
	b.Run("load=half", func(b *testing.B) {
		if saturated == 0 {
			b.Skip("needs the saturated run first")
		}
		forms := c.prepaid(b, chain, b.N)
		latencies, elapsed := c.drive(b, forms, clients, saturated/2)
		c.report(b, latencies, elapsed)
		b.ReportMetric(saturated/2, "offered/s")
	})
}

// prepaid pays n proposals on the chain from the dev accounts, signs their
// forms with one author key and encodes them, and waits until the leader has
// observed every payment; none of it is timed.
func (c *ledgerCluster) prepaid(b *testing.B, chain *devchain.Chain, n int) []string {
	b.StopTimer()
	defer b.StartTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	before := c.paymentsIndexed(b)
	proposals := make([]*ledgerclient.Proposal, n)
	ids := make([]common.Hash, n)
	for i := range proposals {
		proposals[i] = &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), Message: c.message, ContentType: "bench", Class: payment.Standard}
		ids[i] = proposals[i].ID
	}
	txs, payers := payProposals(ctx, b, chain, ids)
	forms := make([]string, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				// Signed by the wallet that paid: a payment pays only for
				// its payer's proposals (ADR 0028).
				form, _, err := ledgerclient.Form(c.cfg, payers[i], proposals[i], txs[i])
				if err != nil {
					b.Error(err)
					return
				}
				forms[i] = form.Encode()
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	for c.paymentsIndexed(b) < before+n {
		if ctx.Err() != nil {
			b.Fatalf("the leader observed %d of %d payments", c.paymentsIndexed(b)-before, n)
		}
		time.Sleep(50 * time.Millisecond) // polling the leader's payment index
	}
	return forms
}

// payProposals pays for every proposal id at the standard class from the
// dev accounts and returns the transactions, once all are mined, and the
// key of each payer (the wallet that must sign the proposal). The pool
// holds a few thousand pending transactions: it pays in rounds, each mined
// before the next.
func payProposals(ctx context.Context, b *testing.B, chain *devchain.Chain, ids []common.Hash) ([]common.Hash, []*ecdsa.PrivateKey) {
	payers := make([]*ecdsa.PrivateKey, len(devchain.DevAccounts))
	for i, a := range devchain.DevAccounts {
		payers[i] = a.MustKey()
	}
	txs := make([]common.Hash, len(ids))
	paidBy := make([]*ecdsa.PrivateKey, len(ids))
	const round = 2000
	for lo := 0; lo < len(ids); lo += round {
		hi := min(len(ids), lo+round)
		var wg sync.WaitGroup
		for w, payer := range payers {
			wg.Go(func() {
				for i := lo + w; i < hi; i += len(payers) {
					tx, err := chain.PayForProposal(ctx, payer, ids[i], payment.Standard)
					if err != nil {
						b.Error(err)
						return
					}
					txs[i], paidBy[i] = tx, payer
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		for _, tx := range txs[lo:hi] {
			if _, err := chain.WaitMined(ctx, tx); err != nil {
				b.Fatal(err)
			}
		}
	}
	return txs, paidBy
}

// paymentsIndexed reads how many payment messages the leader has read
// from the stream. Not the payments its index holds: spent payments leave
// the index once final, so that figure falls between runs, and a run
// waiting for it to grow by n would wait for ever.
func (c *ledgerCluster) paymentsIndexed(b *testing.B) int {
	return int(c.leaderMetric(b, "validator_payment_messages_total"))
}

// drive submits every form and waits for each to commit: from clients
// closed-loop clients when rate is 0, else released at rate per second.
func (c *ledgerCluster) drive(b *testing.B, forms []string, clients int, rate float64) ([]time.Duration, time.Duration) {
	latencies := make([]time.Duration, len(forms))
	work := make(chan int, len(forms))
	b.ResetTimer()
	start := time.Now()
	if rate > 0 {
		// Open loop: proposal i is released at start + i/rate, whatever
		// the answers; enough clients to keep up with the pace.
		clients = max(clients, int(rate))
		go func() {
			defer close(work)
			for i := range forms {
				time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
				work <- i
			}
		}()
	} else {
		for i := range forms {
			work <- i
		}
		close(work)
	}
	var failed atomic.Bool
	var wg sync.WaitGroup
	// Idle connections are shared: the open loop's many clients need only
	// as many as are in flight at once.
	idle := make(chan *submitConn, clients)
	defer func() {
		for len(idle) > 0 {
			(<-idle).close()
		}
	}()
	addr := strings.TrimPrefix(c.leader.url, "http://")
	for range min(clients, len(forms)) {
		wg.Go(func() {
			for i := range work {
				if failed.Load() {
					continue
				}
				var conn *submitConn
				select {
				case conn = <-idle:
				default:
					conn = &submitConn{addr: addr}
				}
				t0 := time.Now()
				status, err := conn.submit("/v1/propose-write?wait=30s", forms[i])
				select {
				case idle <- conn:
				default:
					conn.close()
				}
				if err != nil || !api.Committed(status) {
					b.Errorf("proposal %d: %q %v", i, status, err)
					failed.Store(true)
					continue
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return latencies, elapsed
}

func (c *ledgerCluster) report(b *testing.B, latencies []time.Duration, elapsed time.Duration) {
	if b.Failed() {
		return
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	if hwm, err := harness.ProcMemory(c.leader.cmd.Process.Pid, "VmHWM"); err == nil {
		b.ReportMetric(float64(hwm)/(1<<20), "leader-peak-rss-MiB")
	}
}

// submitConn is one closed-loop client's keep-alive HTTP/1.1 connection to
// the leader. The clients share the machine's 2 cores with the validators,
// so they write prepared requests and parse the answers directly: net/http's
// client transport (two goroutines per connection, channels per request)
// cost about 80 us of CPU per proposal, a quarter of the servers' own.
type submitConn struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
	req  []byte
}

// submit posts the encoded form to route and returns the proposal's status
// in the answer (202 receipt or 200 existing status alike).
func (s *submitConn) submit(route, form string) (string, error) {
	if s.conn == nil {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			return "", err
		}
		s.conn, s.r = conn, bufio.NewReader(conn)
	}
	s.req = append(s.req[:0], "POST "...)
	s.req = append(s.req, route...)
	s.req = append(s.req, " HTTP/1.1\r\nHost: "...)
	s.req = append(s.req, s.addr...)
	s.req = append(s.req, "\r\nAuthorization: Bearer "+benchSubmitToken+"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: "...)
	s.req = strconv.AppendInt(s.req, int64(len(form)), 10)
	s.req = append(s.req, "\r\n\r\n"...)
	s.req = append(s.req, form...)
	if err := s.conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return "", err
	}
	status, err := s.exchange()
	if err != nil {
		s.close() // the next submission dials again
	}
	return status, err
}

func (s *submitConn) exchange() (string, error) {
	if _, err := s.conn.Write(s.req); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	var answer struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "", fmt.Errorf("answer %q: %w", body, err)
	}
	return answer.Status, nil
}

func (s *submitConn) close() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}
