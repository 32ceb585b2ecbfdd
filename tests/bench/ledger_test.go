package bench

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/peercert"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// The validator binary is built on first use, not in TestMain, so that
// `go test` without -bench costs nothing here.
var (
	buildOnce    sync.Once
	buildDir     string
	validatorBin string
	buildErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildValidator builds the validator, or returns $BENCH_VALIDATOR_BIN when
// set (another build to compare, or one instrumented for profiling).
func buildValidator() (string, error) {
	if bin := os.Getenv("BENCH_VALIDATOR_BIN"); bin != "" {
		return bin, nil
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "contentledger-bench-")
		if buildErr != nil {
			return
		}
		validatorBin = filepath.Join(buildDir, "validator")
		out, err := exec.Command("go", "build", "-o", validatorBin,
			"github.com/contentledger/contentledger/services/validator/cmd/validator").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building the validator: %v\n%s", err, out)
		}
	})
	return validatorBin, buildErr
}

// validatorSettings are the settings of every validator besides its
// identity and addresses. They are the defaults, written out so the figures
// say what they were measured with; BENCH_VALIDATOR_ENV (space-separated
// KEY=VALUE) overrides them for experiments.
func validatorSettings() []string {
	env := []string{
		"SVC_VALIDATOR_MODE=MOCK",           // signatures are checked, payments are not
		"SVC_VALIDATOR_NO_SYNC=false",       // fsync on
		"SVC_VALIDATOR_TICK_INTERVAL=100ms", // raft tick; etcd's heartbeat is 100 ms too
		"SVC_VALIDATOR_MAX_BATCH=512",       // proposals per raft entry
		"SVC_VALIDATOR_MAX_PENDING=10000",   // proposals in flight before 429
		"SVC_VALIDATOR_PAYMENT_WAIT=10s",
		// Every client is one address and one wallet here: the limits
		// would measure themselves, not the cluster.
		"SVC_VALIDATOR_RATE_PER_IP=0",
		"SVC_VALIDATOR_RATE_PER_WALLET=0",
		// The open loop holds a connection per client in flight, far
		// more than one address may hold by default.
		"SVC_VALIDATOR_HTTP_MAX_CONNS_PER_CLIENT=-1",
		"SVC_VALIDATOR_HTTP_MAX_CONNS=-1",
	}
	return append(env, strings.Fields(os.Getenv("BENCH_VALIDATOR_ENV"))...)
}

// ledgerCluster is three validator processes on loopback. Clients submit to
// the leader and follow the status there.
type ledgerCluster struct {
	nodes   []*ledgerNode
	leader  *ledgerNode
	http    *http.Client
	client  *ledgerclient.Client
	cfg     api.BlockchainConfig
	key     *ecdsa.PrivateKey
	message []byte
}

type ledgerNode struct {
	*proc
	url   string
	debug string // host:port of /debug/pprof, when BENCH_PROFILE is set
}

// startLedger starts the cluster; extraEnv (KEY=VALUE) overrides the
// settings of every validator.
func startLedger(cleanup func(func()), dir string, extraEnv ...string) (*ledgerCluster, error) {
	bin, err := buildValidator()
	if err != nil {
		return nil, err
	}
	c := &ledgerCluster{
		// One keep-alive connection per client: the default transport keeps
		// only two idle connections per host and would redial under load.
		http: &http.Client{Timeout: 60 * time.Second, Transport: &countingTransport{next: &http.Transport{
			MaxIdleConns: 2048, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
		}}},
		message: message1KiB(),
	}
	cleanup(c.http.CloseIdleConnections)
	type addrs struct{ http, peer string }
	var as []addrs
	var initial []string
	for i := 1; i <= 3; i++ {
		h, err1 := harness.FreeAddr()
		p, err2 := harness.FreeAddr()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("free ports: %v %v", err1, err2)
		}
		as = append(as, addrs{h, p})
		initial = append(initial, fmt.Sprintf("%d=%s=http://%s", i, p, h))
	}
	// Peer mTLS as in production: the benchmarks measure its cost.
	certs, err := peercert.Provision(filepath.Join(dir, "pki"), []uint64{1, 2, 3})
	if err != nil {
		return nil, err
	}
	for i, a := range as {
		id := strconv.Itoa(i + 1)
		env := append(append(append(validatorSettings(), certs[uint64(i+1)].Env()...), extraEnv...),
			"SVC_VALIDATOR_NODE_ID="+id,
			"SVC_VALIDATOR_DATA_DIR="+filepath.Join(dir, "v"+id),
			"SVC_VALIDATOR_HTTP_ADDR="+a.http,
			"SVC_VALIDATOR_PEER_ADDR="+a.peer,
			"SVC_VALIDATOR_INITIAL_CLUSTER="+strings.Join(initial, ","),
		)
		var debug string
		if profileDir() != "" {
			if debug, err = harness.FreeAddr(); err != nil {
				return nil, err
			}
			env = append(env, "SVC_VALIDATOR_DEBUG_ADDR="+debug)
		}
		p, err := startProc(cleanup, "validator "+id, bin, nil, env, filepath.Join(dir, "v"+id+".log"))
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, &ledgerNode{proc: p, url: "http://" + a.http, debug: debug})
	}
	deadline := time.Now().Add(60 * time.Second)
	for c.leader == nil {
		for _, n := range c.nodes {
			if err := n.alive(); err != nil {
				return nil, err
			}
			var st api.ConsensusStatus
			if c.getJSON(n.url+"/v1/consensus/status", &st) == nil && st.Role == api.RoleLeader {
				c.leader = n
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no validator became leader in 60s (logs in %s)", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The submit lane's token: required where the lane is guarded
	// (BenchmarkPipeline), ignored where it is open.
	c.client = &ledgerclient.Client{BaseURL: c.leader.url, HTTP: c.http, Token: benchSubmitToken}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.cfg, err = c.client.BlockchainConfig(ctx); err != nil {
		return nil, err
	}
	if c.key, err = crypto.GenerateKey(); err != nil {
		return nil, err
	}
	return c, nil
}

// countingTransport counts the HTTP requests of the clients: submit and
// status long-polls per proposal are the client protocol's cost.
type countingTransport struct {
	next     *http.Transport
	requests atomic.Uint64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	return t.next.RoundTrip(r)
}

func (t *countingTransport) CloseIdleConnections() { t.next.CloseIdleConnections() }

func (c *ledgerCluster) requests() uint64 {
	return c.http.Transport.(*countingTransport).requests.Load()
}

func (c *ledgerCluster) getJSON(u string, out any) error {
	return harness.GetJSON(c.http, 5*time.Second, u, out)
}

// prepare signs n forms, in parallel, before the timer: the client's
// signing is not the cluster's cost.
func (c *ledgerCluster) prepare(b *testing.B, n int) func(ctx context.Context, i int) error {
	forms := make([]url.Values, n)
	ids := make([]common.Hash, n)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				p := &ledgerclient.Proposal{Message: c.message, ContentType: "bench"}
				form, _, err := ledgerclient.Form(c.cfg, c.key, p, common.Hash{})
				if err != nil {
					b.Error(err)
					return
				}
				forms[i], ids[i] = form, p.ID
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return func(ctx context.Context, i int) error {
		// One request: the validator answers once the proposal is decided.
		sub, err := c.client.SubmitAndWait(ctx, proposal.Write, forms[i], 30*time.Second)
		if err != nil {
			return fmt.Errorf("submit %s: %w", ids[i].Hex(), err)
		}
		if !api.Committed(sub.Receipt.Status) {
			return fmt.Errorf("proposal %s is %s, not COMMITTED", ids[i].Hex(), sub.Receipt.Status)
		}
		return nil
	}
}

func (c *ledgerCluster) commitIndex(context.Context) (uint64, error) {
	var st api.ConsensusStatus
	err := c.getJSON(c.leader.url+"/v1/consensus/status", &st)
	return st.CommitIndex, err
}

// profile captures a CPU profile of every validator for d, in parallel,
// into files named prefix-leader.pprof and prefix-follower-<id>.pprof.
func (c *ledgerCluster) profile(ctx context.Context, d time.Duration, prefix string) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		file := fmt.Sprintf("%s-follower-%d.pprof", prefix, i+1)
		if n == c.leader {
			file = prefix + "-leader.pprof"
		}
		wg.Go(func() { errs[i] = n.profile(ctx, "profile", d, file) })
	}
	// Where the leader waits rather than computes, which a CPU profile
	// cannot show: its scheduler, blocking and syscall events.
	var traceErr error
	if os.Getenv("BENCH_PROFILE_TRACE") != "" {
		wg.Go(func() { traceErr = c.leader.profile(ctx, "trace", d, prefix+"-leader.trace") })
	}
	wg.Wait()
	// What the leader's Go heap holds at the end of the window: the
	// garbage collector's work grows with it.
	heapErr := c.leader.profile(ctx, "heap", 0, prefix+"-leader-heap.pprof")
	return errors.Join(append(errs, traceErr, heapErr)...)
}

// profile fetches /debug/pprof/<kind> (profile or trace over d; heap now,
// when d is 0) into file.
func (n *ledgerNode) profile(ctx context.Context, kind string, d time.Duration, file string) error {
	return fetchProfile(ctx, n.debug, kind, d, file)
}

// fetchProfile fetches /debug/pprof/<kind> of the server whose debug
// listener is at debug (host:port) into file.
func fetchProfile(ctx context.Context, debug, kind string, d time.Duration, file string) error {
	u := fmt.Sprintf("http://%s/debug/pprof/%s", debug, kind)
	if d > 0 {
		u += fmt.Sprintf("?seconds=%d", max(1, int(d.Seconds())))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

func (c *ledgerCluster) servers() (*proc, []*proc) {
	all := make([]*proc, len(c.nodes))
	for i, n := range c.nodes {
		all[i] = n.proc
	}
	return c.leader.proc, all
}

// message1KiB is the 1 KiB message (or value) every proposal carries.
func message1KiB() []byte {
	m := make([]byte, 1024)
	for i := range m {
		m[i] = 'a' + byte(i%26)
	}
	return m
}
