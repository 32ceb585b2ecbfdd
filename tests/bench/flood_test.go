package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// BenchmarkPaymentFlood measures what an unpaid flood costs paying users:
// the pipeline benchmark's cluster (3 TESTNET validators on the dev chain,
// fsync on, real signatures, every paid proposal paid and observed before
// the timer), in one run:
//
//	flood=off        BENCH_FLOOD_CLIENTS paid closed-loop clients (default 64)
//	flood=on         the same, while BENCH_FLOOD_KEYS fresh keys (default
//	                 1000) flood validly signed proposals that are never paid
//	                 (random transaction hashes) for the whole timed run
//	flood=off-again  the paid load alone again
//	flood=alone      the flood with no paid load, b.N flood submissions:
//	                 what each costs the leader, the servers and this process
//
// Each flooding key is its own client behind a trusted proxy (its own
// X-Forwarded-For), as a botnet behind a proxy would be, on its own
// keep-alive connection, and sends its proposal again BENCH_FLOOD_INTERVAL
// (default 1s) after the last answer began, ignoring the 2 s Retry-After it
// is given: up to 1,000 submissions/s offered. Flood messages are
// BENCH_FLOOD_MESSAGE_BYTES (default 1 KiB, the paid proposals' size), and
// the hold's byte bound is BENCH_FLOOD_HOLD_BYTES (HOLD_BYTES, default
// 256 KiB here), so the flood outgrows it: a quarter of the keys wait out
// PAYMENT_WAIT in the hold, the rest are refused at once, and then, back
// before their Retry-After, refused before their forms are read (ADR 0030).
// The validators run their defaults otherwise (PAYMENT_WAIT 60 s as in
// BenchmarkPipeline). With 128 KiB messages the flood is 128 MB/s of
// request bodies: on a 2-core machine that is a bandwidth flood, which
// costs whatever carries it (the kernel's loopback, the reads) before any
// validator logic. Every run reports where the CPU went (cpuMeter); the
// paid runs report the paid proposals/s, p50/p99 and the leader's peak RSS;
// flood=on adds the flood's submissions/s and refusals/s (402
// payment_not_found or 429 rate_limited) and the refusals at a hold bound;
// flood=off-again adds paid-%-of-noflood, flood=on's paid throughput as a
// percentage of the mean of the two runs without the flood around it (the
// state grows with every run and a shared machine drifts: a run after
// another is a few percent slower with no flood at all).
// Run with a fixed count, e.g. -bench BenchmarkPaymentFlood -benchtime
// 3000x: every paid proposal is paid first.
func BenchmarkPaymentFlood(b *testing.B) {
	backing := harness.StartBacking(b, harness.Options{Quiet: true, Confirmations: 1, BlockInterval: 50 * time.Millisecond})
	chain := backing.Chain
	c, err := startLedger(b.Cleanup, b.TempDir(), append(backing.ValidatorNATSEnv(),
		"SVC_VALIDATOR_MODE=TESTNET", "SVC_VALIDATOR_PAYMENT_STREAM=CHAIN_EVENTS",
		"SVC_VALIDATOR_CHAIN_ID="+strconv.FormatUint(chain.ChainID, 10), "SVC_VALIDATOR_CONTRACT_ADDRESS="+chain.PaymentLedger.Hex(),
		"SVC_VALIDATOR_CONFIRMATIONS=1", "SVC_VALIDATOR_PAYMENT_WAIT=60s", "SVC_VALIDATOR_OPERATOR_TOKENS="+benchOperatorToken,
		"SVC_VALIDATOR_SUBMIT_TOKENS="+benchSubmitToken,
		// The flood's clients are named by the proxy they come through.
		"SVC_VALIDATOR_TRUSTED_PROXIES=127.0.0.1/32", "SVC_VALIDATOR_FORWARDED_HEADER=X-Forwarded-For",
		"SVC_VALIDATOR_HOLD_BYTES="+strconv.Itoa(envInt(b, "BENCH_FLOOD_HOLD_BYTES", 256<<10)))...)
	if err != nil {
		b.Fatal(err)
	}
	clients := envInt(b, "BENCH_FLOOD_CLIENTS", 64)
	keys := envInt(b, "BENCH_FLOOD_KEYS", 1000)
	messageBytes := envInt(b, "BENCH_FLOOD_MESSAGE_BYTES", 1<<10)
	interval := time.Second
	if s := os.Getenv("BENCH_FLOOD_INTERVAL"); s != "" {
		if interval, err = time.ParseDuration(s); err != nil || interval < 0 {
			b.Fatalf("BENCH_FLOOD_INTERVAL=%q is not a duration", s)
		}
	}
	var noFlood, withFlood float64
	b.Run("flood=off", func(b *testing.B) {
		forms := c.prepaid(b, chain, b.N)
		meter := startCPUMeter(c.servers())
		latencies, elapsed := c.drive(b, forms, clients, 0)
		noFlood = float64(b.N) / elapsed.Seconds()
		c.report(b, latencies, elapsed)
		meter.report(b)
	})
	b.Run("flood=on", func(b *testing.B) {
		forms := c.prepaid(b, chain, b.N)
		f := c.startFlood(b, keys, messageBytes, interval)
		refusedAtBound0 := c.leaderMetric(b, "validator_payment_hold_refused_total")
		profiled := startProfile(b, c, clients)
		meter := startCPUMeter(c.servers())
		latencies, elapsed := c.drive(b, forms, clients, 0)
		profiled()
		sent, refused, other := f.stop()
		c.report(b, latencies, elapsed)
		meter.report(b)
		if other != "" {
			b.Errorf("flood submissions answered otherwise than 402 payment_not_found or 429 rate_limited: %s", other)
		}
		b.ReportMetric(float64(sent)/elapsed.Seconds(), "flood-submissions/s")
		b.ReportMetric(float64(refused)/elapsed.Seconds(), "flood-refusals/s")
		b.ReportMetric(c.leaderMetric(b, "validator_payment_hold_refused_total")-refusedAtBound0, "flood-refused-at-bound")
		withFlood = float64(b.N) / elapsed.Seconds()
	})
	// The same load without the flood again: the state grows with every
	// run and the machine drifts, so the flood's run is compared with the
	// mean of the runs on either side of it.
	b.Run("flood=off-again", func(b *testing.B) {
		forms := c.prepaid(b, chain, b.N)
		meter := startCPUMeter(c.servers())
		latencies, elapsed := c.drive(b, forms, clients, 0)
		c.report(b, latencies, elapsed)
		meter.report(b)
		if around := (noFlood + float64(b.N)/elapsed.Seconds()) / 2; withFlood > 0 {
			b.ReportMetric(100*withFlood/around, "paid-%-of-noflood")
		}
	})
	b.Run("flood=alone", func(b *testing.B) {
		f := c.startFlood(b, keys, messageBytes, interval)
		profiled := startProfile(b, c, 0)
		meter := startCPUMeter(c.servers())
		for f.sent.Load() < int64(b.N) {
			time.Sleep(10 * time.Millisecond) // the flood runs at its own pace; this only looks at it
		}
		profiled()
		_, _, other := f.stop()
		b.StopTimer()
		meter.report(b)
		if other != "" {
			b.Errorf("flood submissions answered otherwise than 402 payment_not_found or 429 rate_limited: %s", other)
		}
	})
}

// flood is the unpaid flood running against the leader.
type flood struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	sent    atomic.Int64
	refused atomic.Int64
	mu      sync.Mutex
	other   map[string]int
	conns   []*floodConn
}

// startFlood signs one unpaid proposal per fresh key (untimed) and starts
// a loop per key that submits it to the leader, at most once per interval,
// until stop. A refused submission leaves nothing behind, so sending the
// same one again costs the validators what a new one would.
func (c *ledgerCluster) startFlood(b *testing.B, keys, messageBytes int, interval time.Duration) *flood {
	b.StopTimer()
	defer b.StartTimer()
	message := []byte(strings.Repeat("unpaid flood ", messageBytes/13+1)[:messageBytes])
	forms := make([]string, keys)
	for i := range forms {
		key, err := crypto.GenerateKey()
		if err != nil {
			b.Fatal(err)
		}
		var tx common.Hash
		if _, err := rand.Read(tx[:]); err != nil {
			b.Fatal(err)
		}
		p := &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), Message: message, ContentType: "flood", Class: payment.Standard}
		form, _, err := ledgerclient.Form(c.cfg, key, p, tx)
		if err != nil {
			b.Fatal(err)
		}
		forms[i] = form.Encode()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &flood{cancel: cancel, other: map[string]int{}}
	addr := strings.TrimPrefix(c.leader.url, "http://")
	for i, form := range forms {
		fc := &floodConn{addr: addr, req: floodRequest(addr, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), form)}
		f.conns = append(f.conns, fc)
		f.wg.Go(func() {
			defer fc.close()
			for ctx.Err() == nil {
				next := time.Now().Add(interval)
				code, body, err := fc.submit()
				if ctx.Err() != nil {
					return
				}
				f.sent.Add(1)
				if err == nil && (code == http.StatusPaymentRequired && bytes.Contains(body, []byte(`"payment_not_found"`)) ||
					code == http.StatusTooManyRequests && bytes.Contains(body, []byte(`"rate_limited"`))) {
					f.refused.Add(1)
				} else {
					f.mu.Lock()
					f.other[fmt.Sprintf("%d %.60s %v", code, body, err)]++
					f.mu.Unlock()
				}
				select {
				case <-time.After(time.Until(next)):
				case <-ctx.Done():
				}
			}
		})
	}
	return f
}

// stop ends the flood and returns the submissions answered, the refusals
// among them (402 payment_not_found, or 429 rate_limited for a key back
// before its Retry-After), and a summary of other answers. Closing the
// connections ends the submissions still held.
func (f *flood) stop() (sent, refused int64, other string) {
	f.cancel()
	for _, fc := range f.conns {
		fc.interrupt()
	}
	f.wg.Wait()
	if len(f.other) > 0 {
		other = fmt.Sprint(f.other)
	}
	return f.sent.Load(), f.refused.Load(), other
}

// floodConn is one flooding key's keep-alive connection to the leader. Like
// the paid clients' submitConn, it writes its prepared request and reads
// the answer directly: the attacker's client shares the machine's 2 cores
// with the validators here, as it would not in an attack, and net/http's
// client transport would spend more of them than the refusals cost the
// leader.
type floodConn struct {
	addr string
	req  []byte
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
	// stopped is set by interrupt: no connection is dialled after it.
	stopped bool
}

// floodRequest is the request of one flood form posted by a proxy for
// client.
func floodRequest(addr, client, form string) []byte {
	return []byte("POST /v1/propose-write HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + benchSubmitToken +
		"\r\nContent-Type: application/x-www-form-urlencoded\r\nX-Forwarded-For: " + client +
		"\r\nContent-Length: " + strconv.Itoa(len(form)) + "\r\n\r\n" + form)
}

// submit sends the request and returns the answer's status and body; on
// an error the connection is closed and the next submit dials again.
func (fc *floodConn) submit() (int, []byte, error) {
	fc.mu.Lock()
	if fc.stopped {
		fc.mu.Unlock()
		return 0, nil, net.ErrClosed
	}
	if fc.conn == nil {
		conn, err := net.Dial("tcp", fc.addr)
		if err != nil {
			fc.mu.Unlock()
			return 0, nil, err
		}
		fc.conn, fc.r = conn, bufio.NewReader(conn)
	}
	conn, r := fc.conn, fc.r
	fc.mu.Unlock()
	code, body, err := floodExchange(conn, r, fc.req)
	if err != nil {
		fc.close()
	}
	return code, body, err
}

func floodExchange(conn net.Conn, r *bufio.Reader, req []byte) (int, []byte, error) {
	if _, err := conn.Write(req); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return resp.StatusCode, body, err
}

// interrupt closes the connection, ending a submission held by the leader,
// and keeps another from being dialled.
func (fc *floodConn) interrupt() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.stopped = true
	if fc.conn != nil {
		_ = fc.conn.Close()
	}
}

func (fc *floodConn) close() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.conn != nil {
		_ = fc.conn.Close()
		fc.conn = nil
	}
}

// leaderMetric sums the series of family name on the leader's /metrics.
func (c *ledgerCluster) leaderMetric(b *testing.B, name string) float64 {
	resp, err := c.http.Get(c.leader.url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	sum, err := harness.SumMetric(body, name)
	if err != nil {
		b.Fatal(err)
	}
	return sum
}

// envInt reads a positive integer setting, def when unset.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q is not a positive integer", name, s)
	}
	return n
}
