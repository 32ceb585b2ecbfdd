package rpcpool

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcerr"
)

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fake is an endpoint: a chain of head blocks with chain id id, taking
// latency of the clock per call, failing with fail's error when it returns
// one.
type fake struct {
	clock   *clock
	id      int64
	head    uint64
	latency time.Duration
	fail    func(method string) error
	hang    bool   // FilterLogs waits for its context
	fork    uint64 // when not 0, its numbered headers are another branch's

	mu    sync.Mutex
	calls []string
}

func (f *fake) call(method string) error {
	f.mu.Lock()
	f.calls = append(f.calls, method)
	f.mu.Unlock()
	f.clock.Advance(f.latency)
	if f.fail != nil {
		return f.fail(method)
	}
	return nil
}

func (f *fake) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.calls {
		if m == method {
			n++
		}
	}
	return n
}

func (f *fake) ChainID(context.Context) (*big.Int, error) {
	if err := f.call("eth_chainId"); err != nil {
		return nil, err
	}
	return big.NewInt(f.id), nil
}

func (f *fake) BlockNumber(context.Context) (uint64, error) {
	return f.head, f.call("eth_blockNumber")
}

func (f *fake) HeaderByNumber(_ context.Context, n *big.Int) (*types.Header, error) {
	if err := f.call("eth_getBlockByNumber"); err != nil {
		return nil, err
	}
	if n.Sign() < 0 {
		return &types.Header{Number: new(big.Int).SetUint64(f.head)}, nil
	}
	if n.Uint64() > f.head {
		return nil, ethereum.NotFound
	}
	return &types.Header{Number: n, Time: f.fork}, nil
}

func (f *fake) FilterLogs(ctx context.Context, _ ethereum.FilterQuery) ([]types.Log, error) {
	if err := f.call("eth_getLogs"); err != nil {
		return nil, err
	}
	if f.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []types.Log{{BlockNumber: f.head}}, nil
}

// rpcErr is a JSON-RPC error object.
type rpcErr struct {
	code int
	msg  string
}

func (e rpcErr) Error() string  { return e.msg }
func (e rpcErr) ErrorCode() int { return e.code }

var unavailable = rpc.HTTPError{StatusCode: 503, Status: "503 Service Unavailable"}

// env is a pool over fakes, with the manual clock, no jitter, and the waits
// between rounds recorded instead of slept.
type env struct {
	t     *testing.T
	clock *clock
	eps   []*fake
	pool  *Pool
	waits []time.Duration
}

func newEnv(t *testing.T, n int, cfg Config) *env {
	t.Helper()
	e := &env{t: t, clock: &clock{t: time.Unix(1_700_000_000, 0)}}
	var eps []Endpoint
	for i := range n {
		f := &fake{clock: e.clock, id: 1337, head: 100 + uint64(i), latency: 10 * time.Millisecond}
		e.eps = append(e.eps, f)
		eps = append(eps, Endpoint{Name: Name(i, "https://user:secret@rpc.example/v3/KEY?k=v"), Client: f})
	}
	cfg.Now = e.clock.Now
	cfg.Rand = func() float64 { return 0 }
	cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		e.waits = append(e.waits, d)
		e.clock.Advance(d)
		return ctx.Err()
	}
	if cfg.Cooldown == (backoff.Policy{}) {
		cfg.Cooldown = backoff.Policy{Initial: 5 * time.Second, Max: time.Minute}
	}
	p, err := New(eps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.pool = p
	if _, err := p.ChainID(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) head() uint64 {
	e.t.Helper()
	n, err := e.pool.BlockNumber(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) health(i int) EndpointHealth { return e.pool.Health()[i] }

func TestNameHidesSecrets(t *testing.T) {
	if got := Name(0, "https://user:secret@mainnet.example:8545/v3/KEY?x=1"); got != "1:mainnet.example:8545" {
		t.Errorf("Name = %q", got)
	}
	if got := Name(2, "not a url"); got != "3" {
		t.Errorf("Name of garbage = %q", got)
	}
}

// TestFailsOverWithinOneCall: the first endpoint fails, the same call is
// answered by the second; the first is passed over for its cooldown, then
// tried again when the second fails, and its cooldown grows with
// consecutive failures.
func TestFailsOverWithinOneCall(t *testing.T) {
	e := newEnv(t, 2, Config{})
	a, b := e.eps[0], e.eps[1]
	if e.head() != 100 || !e.health(0).Current {
		t.Fatal("the first endpoint is not the one in use")
	}
	a.fail = func(string) error { return unavailable }
	if e.head() != 101 {
		t.Fatal("the call was not answered by the second endpoint")
	}
	h := e.health(0)
	if h.Up || h.Errors != 1 || h.ConsecutiveFailures != 1 || h.LastError == "" || !h.DownUntil.Equal(h.LastErrorAt.Add(5*time.Second)) {
		t.Fatalf("failed endpoint %+v", h)
	}
	if !e.health(1).Current {
		t.Fatal("the second endpoint is not in use")
	}
	// While cooling down the first is not asked.
	before := a.count("eth_blockNumber")
	e.head()
	if a.count("eth_blockNumber") != before {
		t.Fatal("an endpoint cooling down was asked first")
	}
	// After the cooldown it is up again, but the second stays in use
	// while healthy.
	e.clock.Advance(5 * time.Second)
	if !e.health(0).Up || e.head() != 101 {
		t.Fatal("after the cooldown")
	}
	// The second fails: the first is tried, fails again, and cools down
	// twice as long; the call fails over back to... nothing healthy, so
	// the round is repeated after a backoff.
	b.fail = func(string) error { return unavailable }
	if _, err := e.pool.BlockNumber(context.Background()); !errors.As(err, new(rpc.HTTPError)) {
		t.Fatalf("both failing: %v", err)
	}
	if h := e.health(0); h.ConsecutiveFailures < 2 {
		t.Fatalf("first endpoint %+v", h)
	}
	// The first recovers: it is asked (the second cools down longer) and
	// answers; its failures are forgotten, not its recent errors.
	a.fail = nil
	e.clock.Advance(time.Minute)
	if e.head() != 100 {
		t.Fatal("the recovered endpoint did not answer")
	}
	if h := e.health(0); h.ConsecutiveFailures != 0 || !h.Up || h.RecentErrors <= 0 || h.RecentErrors >= 3 {
		t.Fatalf("recovered endpoint %+v", h)
	}
}

// TestRoundsAreBoundedWithBackoff: when every endpoint fails, the call
// makes Attempts rounds with exponential waits between them, then returns
// the last error.
func TestRoundsAreBoundedWithBackoff(t *testing.T) {
	e := newEnv(t, 2, Config{Attempts: 4, Retry: backoff.Policy{Initial: 100 * time.Millisecond, Max: 250 * time.Millisecond}})
	for _, f := range e.eps {
		f.fail = func(m string) error {
			if m == "eth_blockNumber" {
				return errors.New("connection refused")
			}
			return nil
		}
	}
	_, err := e.pool.BlockNumber(context.Background())
	if err == nil || !slices.Equal(e.waits, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond}) {
		t.Fatalf("err %v, waits %v", err, e.waits)
	}
	for i, f := range e.eps {
		if n := f.count("eth_blockNumber"); n != 4 {
			t.Errorf("endpoint %d asked %d times, want 4", i, n)
		}
	}
	// A cancelled context ends the call at the first wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.waits = nil
	if _, err := e.pool.BlockNumber(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestJitterShortensWaits: the rand source shortens the waits between
// rounds by up to the policy's jitter.
func TestJitterShortensWaits(t *testing.T) {
	e := newEnv(t, 1, Config{Attempts: 2, Retry: backoff.Policy{Initial: time.Second, Jitter: 0.5}})
	e.pool.cfg.Rand = func() float64 { return 0.5 }
	e.eps[0].fail = func(string) error { return unavailable }
	if _, err := e.pool.BlockNumber(context.Background()); err == nil {
		t.Fatal("no error")
	}
	if !slices.Equal(e.waits, []time.Duration{750 * time.Millisecond}) {
		t.Fatalf("waits %v", e.waits)
	}
}

// TestRangeErrorsAreAnswers: an eth_getLogs range refusal goes back to the
// caller at once, without failing over or counting against the endpoint;
// a timed-out query goes back as a range error too, and does count.
func TestRangeErrorsAreAnswers(t *testing.T) {
	e := newEnv(t, 2, Config{CallTimeout: 20 * time.Millisecond})
	a, b := e.eps[0], e.eps[1]
	a.fail = func(m string) error {
		if m == "eth_getLogs" {
			return rpcErr{-32005, "query returned more than 10000 results"}
		}
		return nil
	}
	_, err := e.pool.FilterLogs(context.Background(), ethereum.FilterQuery{})
	if !rpcerr.IsRangeError(err) || b.count("eth_getLogs") != 0 {
		t.Fatalf("range error: %v; second endpoint asked %d times", err, b.count("eth_getLogs"))
	}
	if h := e.health(0); !h.Up || h.Errors != 0 {
		t.Fatalf("endpoint penalised for a range error: %+v", h)
	}
	a.fail, a.hang = nil, true
	_, err = e.pool.FilterLogs(context.Background(), ethereum.FilterQuery{})
	if !errors.Is(err, rpcerr.ErrTimeout) || !rpcerr.IsRangeError(err) || b.count("eth_getLogs") != 0 {
		t.Fatalf("timeout: %v", err)
	}
	if h := e.health(0); h.Up || h.Errors != 1 {
		t.Fatalf("timed-out endpoint not penalised: %+v", h)
	}
	// The next query goes to the other endpoint.
	if logs, err := e.pool.FilterLogs(context.Background(), ethereum.FilterQuery{}); err != nil || logs[0].BlockNumber != 101 {
		t.Fatalf("after the timeout: %v, %v", logs, err)
	}
}

// TestNotFoundAsksTheOthers: a block one endpoint does not have (it lags)
// is taken from another; absent only when no endpoint has it.
func TestNotFoundAsksTheOthers(t *testing.T) {
	e := newEnv(t, 2, Config{})
	h, err := e.pool.HeaderByNumber(context.Background(), big.NewInt(101))
	if err != nil || h.Number.Uint64() != 101 || e.eps[1].count("eth_getBlockByNumber") != 1 {
		t.Fatalf("block only the second has: %v, %v", h, err)
	}
	if e.health(0).Errors != 0 {
		t.Fatal("not found counted as an error")
	}
	if _, err := e.pool.HeaderByNumber(context.Background(), big.NewInt(500)); !errors.Is(err, ethereum.NotFound) {
		t.Fatalf("block nobody has: %v", err)
	}
}

// TestTagErrorsAreAnswers: an error for a block tag is asked of each
// endpoint once, without a penalty or a retry round.
func TestTagErrorsAreAnswers(t *testing.T) {
	e := newEnv(t, 2, Config{})
	for _, f := range e.eps {
		f.fail = func(m string) error {
			if m == "eth_getBlockByNumber" {
				return errors.New("finalized block not found")
			}
			return nil
		}
	}
	if _, err := e.pool.HeaderByNumber(context.Background(), big.NewInt(int64(rpc.FinalizedBlockNumber))); err == nil {
		t.Fatal("no error")
	}
	if len(e.waits) != 0 || e.health(0).Errors+e.health(1).Errors != 0 {
		t.Fatalf("waits %v, health %+v", e.waits, e.pool.Health())
	}
	// Invalid params are the same for any method.
	e.eps[0].fail = func(string) error { return rpcErr{-32602, "invalid argument"} }
	e.eps[1].fail = e.eps[0].fail
	if _, err := e.pool.BlockNumber(context.Background()); err == nil || len(e.waits) != 0 {
		t.Fatalf("rejected: %v, waits %v", err, e.waits)
	}
}

// TestWrongChainExcluded: an endpoint serving another chain is never used.
func TestWrongChainExcluded(t *testing.T) {
	e := newEnv(t, 2, Config{})
	e.eps[1].id = 1
	e.eps[0].fail = func(m string) error {
		if m == "eth_blockNumber" {
			return unavailable
		}
		return nil
	}
	_, err := e.pool.BlockNumber(context.Background())
	if err == nil || e.eps[1].count("eth_blockNumber") != 0 {
		t.Fatalf("the other chain's endpoint answered: %v", err)
	}
	h := e.health(1)
	if h.Up || h.Score != 0 || h.LastError == "" {
		t.Fatalf("wrong-chain endpoint %+v", h)
	}
	// Checked once only.
	e.eps[0].fail = nil
	e.clock.Advance(time.Hour)
	e.head()
	e.head()
	if n := e.eps[1].count("eth_chainId"); n != 1 {
		t.Fatalf("chain id asked %d times", n)
	}
}

// TestPrefersHealthierEndpoint: a slow endpoint in use gives way to one
// that is not known to be slow; a small difference does not move calls.
func TestPrefersHealthierEndpoint(t *testing.T) {
	e := newEnv(t, 3, Config{})
	e.eps[0].latency = 400 * time.Millisecond
	e.eps[1].latency = 90 * time.Millisecond
	e.eps[2].latency = 80 * time.Millisecond
	// The first's running latency climbs towards 400 ms; once its score
	// is clearly below an unmeasured endpoint's (0.5), calls move.
	moved := false
	for range 6 {
		if e.head() == 101 {
			moved = true
			break
		}
	}
	if !moved {
		t.Fatalf("calls did not move from the slow endpoint: %+v", e.pool.Health())
	}
	// The second measured at 90 ms (score 0.53): the third, unmeasured
	// (0.5) is within the margin, so calls stay.
	for range 3 {
		if got := e.head(); got != 101 {
			t.Fatalf("calls moved to a barely different endpoint: head %d", got)
		}
	}
}

// TestErrorsHideTheURL: an error quoting the endpoint's URL (API key in the
// path) is reported with the endpoint's name instead, in the returned error
// and in the health record, and keeps its type.
func TestErrorsHideTheURL(t *testing.T) {
	const raw = "https://rpc.example/v3/SECRETKEY"
	f := &fake{clock: &clock{}, id: 1, fail: func(string) error {
		return fmt.Errorf("Post %q: %w", raw, unavailable)
	}}
	p, err := New([]Endpoint{{Name: Name(0, raw), URL: raw, Client: f}}, Config{Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.BlockNumber(context.Background())
	if err == nil || strings.Contains(err.Error(), "SECRETKEY") || !errors.As(err, new(rpc.HTTPError)) {
		t.Fatalf("error %v", err)
	}
	if h := p.Health()[0]; strings.Contains(h.LastError, "SECRETKEY") || !strings.Contains(h.LastError, "1:rpc.example") {
		t.Fatalf("health %+v", h)
	}
}

// canonical is the hash the fakes not on a fork answer for block n.
func canonical(n int64) common.Hash { return (&types.Header{Number: big.NewInt(n)}).Hash() }

// TestAgreedHashMajority: two of three endpoints agree, the third is on
// another branch: the majority's hash is the answer, and the third is
// counted as failed and left out of the next vote; no vote moves the
// endpoint in use.
func TestAgreedHashMajority(t *testing.T) {
	e := newEnv(t, 3, Config{})
	e.eps[2].fork = 1
	hash, found, err := e.pool.AgreedHash(context.Background(), 50)
	if err != nil || !found || hash != canonical(50) {
		t.Fatalf("got %s %v %v, want %s", hash.Hex(), found, err, canonical(50).Hex())
	}
	for i, f := range e.eps {
		if n := f.count("eth_getBlockByNumber"); n != 1 {
			t.Errorf("endpoint %d asked %d times", i, n)
		}
	}
	if h := e.health(2); h.Up || h.Errors != 1 || !strings.Contains(h.LastError, "block 50") {
		t.Fatalf("the endpoint on another branch: %+v", h)
	}
	if h0, h1 := e.health(0), e.health(1); h0.Errors+h1.Errors != 0 || !h0.Current {
		t.Fatalf("the agreeing endpoints: %+v %+v", h0, h1)
	}
	// Cooling down, the third is not asked; the two others still agree.
	if hash, found, err := e.pool.AgreedHash(context.Background(), 60); err != nil || !found || hash != canonical(60) ||
		e.eps[2].count("eth_getBlockByNumber") != 1 {
		t.Fatalf("second vote: %s %v %v", hash.Hex(), found, err)
	}
	// Once back, it is asked again, and fails again for longer.
	e.clock.Advance(5 * time.Second)
	if _, _, err := e.pool.AgreedHash(context.Background(), 70); err != nil {
		t.Fatal(err)
	}
	if h := e.health(2); h.ConsecutiveFailures != 2 || h.Errors != 2 {
		t.Fatalf("after a second disagreement: %+v", h)
	}
}

// TestAgreedHashNoMajority: one endpoint against one is no decision, an
// error without a penalty for either (nothing says which is right) and
// without retry rounds; with a third endpoint down it is the same.
func TestAgreedHashNoMajority(t *testing.T) {
	e := newEnv(t, 2, Config{})
	e.eps[1].fork = 1
	if _, _, err := e.pool.AgreedHash(context.Background(), 50); !errors.Is(err, ErrNoAgreement) ||
		!strings.Contains(err.Error(), canonical(50).Hex()) {
		t.Fatalf("1 vs 1: %v", err)
	}
	if len(e.waits) != 0 || e.health(0).Errors+e.health(1).Errors != 0 {
		t.Fatalf("waits %v, health %+v", e.waits, e.pool.Health())
	}

	e = newEnv(t, 3, Config{})
	e.eps[1].fork = 1
	e.eps[2].fail = func(string) error { return unavailable }
	if _, _, err := e.pool.AgreedHash(context.Background(), 50); !errors.Is(err, ErrNoAgreement) {
		t.Fatalf("1 vs 1 and one down: %v", err)
	}
	if h := e.health(2); h.Up || h.Errors != 1 {
		t.Fatalf("the endpoint down: %+v", h)
	}
}

// TestAgreedHashOneDown: an endpoint that fails is counted as usual and
// the two others decide; a single endpoint decides alone.
func TestAgreedHashOneDown(t *testing.T) {
	e := newEnv(t, 3, Config{})
	e.eps[0].fail = func(string) error { return unavailable }
	if hash, found, err := e.pool.AgreedHash(context.Background(), 50); err != nil || !found || hash != canonical(50) {
		t.Fatalf("got %s %v %v", hash.Hex(), found, err)
	}
	if h := e.health(0); h.Up || h.Errors != 1 {
		t.Fatalf("the endpoint down: %+v", h)
	}

	one := newEnv(t, 1, Config{})
	one.eps[0].fork = 7
	want := (&types.Header{Number: big.NewInt(50), Time: 7}).Hash()
	if hash, found, err := one.pool.AgreedHash(context.Background(), 50); err != nil || !found || hash != want {
		t.Fatalf("a single endpoint: %s %v %v", hash.Hex(), found, err)
	}
}

// TestAgreedHashMissingBlock: an endpoint without the block (it lags)
// abstains without a penalty; the block is missing only when no endpoint
// that answered has it.
func TestAgreedHashMissingBlock(t *testing.T) {
	e := newEnv(t, 2, Config{}) // heads 100 and 101
	if hash, found, err := e.pool.AgreedHash(context.Background(), 101); err != nil || !found || hash != canonical(101) {
		t.Fatalf("block only the second has: %s %v %v", hash.Hex(), found, err)
	}
	if e.health(0).Errors != 0 {
		t.Fatal("a lagging endpoint was counted as failed")
	}
	if _, found, err := e.pool.AgreedHash(context.Background(), 500); err != nil || found {
		t.Fatalf("block nobody has: %v %v", found, err)
	}
}

// TestAgreedHashRetriesWhenNobodyAnswers: when every endpoint fails, the
// vote is held again after the backoff, up to Attempts rounds.
func TestAgreedHashRetriesWhenNobodyAnswers(t *testing.T) {
	e := newEnv(t, 2, Config{Attempts: 3, Retry: backoff.Policy{Initial: 100 * time.Millisecond, Max: time.Second}})
	calls := 0
	var mu sync.Mutex
	for _, f := range e.eps {
		f.fail = func(m string) error {
			mu.Lock()
			defer mu.Unlock()
			if m != "eth_getBlockByNumber" {
				return nil
			}
			if calls++; calls <= 4 {
				return unavailable
			}
			return nil
		}
	}
	hash, found, err := e.pool.AgreedHash(context.Background(), 50)
	if err != nil || !found || hash != canonical(50) {
		t.Fatalf("got %s %v %v", hash.Hex(), found, err)
	}
	if !slices.Equal(e.waits, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}) {
		t.Fatalf("waits %v", e.waits)
	}
	for _, f := range e.eps {
		f.fail = func(string) error { return unavailable }
	}
	e.waits = nil
	if _, _, err := e.pool.AgreedHash(context.Background(), 50); !errors.As(err, new(rpc.HTTPError)) || len(e.waits) != 2 {
		t.Fatalf("nobody answers: %v, waits %v", err, e.waits)
	}
}
