// Package rpcpool spreads the watcher's JSON-RPC calls over several
// Ethereum endpoints: each call goes to the healthiest endpoint and fails
// over to the next within the same call; an endpoint that failed is passed
// over for a cooldown that grows with its consecutive failures, then tried
// again.
//
// Health is a score per endpoint from its recent errors (a count that
// decays with a half-life) and the latency of its light calls (head and
// header reads: eth_getLogs latency depends on the range, not the
// endpoint). The endpoint in use keeps the calls while its score stays
// within a margin of the best, so that one step of the watcher reads one
// node's view of the chain whenever it can: endpoints are at different
// heights, and switching costs a retried step (watch.ErrInconsistentChain).
//
// What a call's error means decides what happens next (internal/rpcerr):
//   - an answer (success, "not found", an eth_getLogs range refused as too
//     large) is returned; the range refusal is the watcher's to handle by
//     shrinking, not a fault of the endpoint (a timeout still counts
//     against it);
//   - a header "not found" is first asked of the other endpoints: a lagging
//     endpoint must not make a block look dropped by a reorg;
//   - a refusal of the request (invalid params, unknown method, and any
//     error for a block tag such as "finalized", which some providers do not
//     know) is asked of the other endpoints once, with no penalty and no
//     retry;
//   - anything else (transport errors, HTTP errors, timeouts, server
//     errors) is the endpoint's fault: it is penalised, the next endpoint is
//     tried, and when every endpoint failed the round is repeated after an
//     exponential backoff with jitter, up to Attempts rounds.
//
// Every endpoint must serve the chain the first answer of ChainID named:
// each is checked once before its first use, and one that serves another
// chain is excluded for good.
//
// A block hash that decides a reorg is not taken from one endpoint:
// AgreedHash asks every endpoint that is up and answers what a majority of
// those that answered say, so that one endpoint on a stale or minority
// fork cannot make the watcher retract payments that are still canonical.
package rpcpool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcerr"
)

// Client is what the pool asks of one endpoint; *ethclient.Client
// satisfies it.
type Client interface {
	ChainID(ctx context.Context) (*big.Int, error)
	BlockNumber(ctx context.Context) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
}

// Endpoint is one JSON-RPC endpoint.
type Endpoint struct {
	// Name identifies it in health, metrics and logs; it must hold no
	// secret (see Name).
	Name string
	// URL, when set, is scrubbed from error texts (replaced by Name):
	// providers put API keys in the path, and transport errors quote it.
	URL    string
	Client Client
}

// Defaults of Config.
const (
	DefaultCallTimeout   = 30 * time.Second
	DefaultAttempts      = 3
	DefaultErrorHalfLife = time.Minute
)

var (
	// DefaultRetry is the wait between rounds of one call.
	DefaultRetry = backoff.Policy{Initial: 250 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}
	// DefaultCooldown is how long a failed endpoint is passed over, by its
	// consecutive failures.
	DefaultCooldown = backoff.Policy{Initial: 5 * time.Second, Max: 2 * time.Minute, Jitter: 0.2}
)

// ErrNoEndpoint is returned when no endpoint may be used (none given, or
// every one serves another chain).
var ErrNoEndpoint = errors.New("rpcpool: no usable endpoint")

// ErrWrongChain marks an endpoint that serves another chain than the pool's.
var ErrWrongChain = errors.New("rpcpool: endpoint serves another chain")

// ErrNoAgreement is returned by AgreedHash when the endpoints that answered
// name different blocks and none has a majority.
var ErrNoAgreement = errors.New("rpcpool: the endpoints disagree on the block")

// Config configures a Pool. Zero values mean the defaults.
type Config struct {
	// CallTimeout bounds one call on one endpoint. A call that runs out of
	// it fails with rpcerr.ErrTimeout (for eth_getLogs: a range error).
	CallTimeout time.Duration
	// Attempts is the number of rounds over the endpoints one call makes
	// before it fails with the last error.
	Attempts int
	// Retry is the wait between rounds.
	Retry backoff.Policy
	// Cooldown is how long an endpoint is passed over after its n-th
	// consecutive failure (Delay(n-1), with jitter).
	Cooldown backoff.Policy
	// ErrorHalfLife is how fast an endpoint's recent errors are forgotten.
	ErrorHalfLife time.Duration
	// Logger; nil means none.
	Logger *zap.Logger

	// Now, Sleep and Rand replace the clock, the wait between rounds and
	// the jitter's random source (numbers in [0, 1)): tests make them
	// exact. Nil means the real ones.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Rand  func() float64
}

// latencyRef is the latency at which the latency factor of the score is
// one half; an endpoint not measured yet is scored as if it had it.
const latencyRef = 100 * time.Millisecond

// latencyWeight is the weight of a new latency sample in the running
// average.
const latencyWeight = 0.3

// stickiness keeps the endpoint in use while its score is at least this
// share of the best: scores move with every sample, and switching
// endpoints mid-step costs a retried step.
const stickiness = 0.8

// Pool is a set of endpoints used as one. It is safe for concurrent use.
type Pool struct {
	cfg Config
	log *zap.Logger

	mu      sync.Mutex
	eps     []*endpoint
	current int
	chainID *big.Int // nil until ChainID answered
}

type endpoint struct {
	name    string
	client  Client
	secrets []string // texts of the URL to scrub from errors, longest first

	// Guarded by Pool.mu.
	latency   time.Duration // running average of light calls; 0: not measured
	errs      float64       // recent errors at errsAt, decaying
	errsAt    time.Time
	failures  int // consecutive
	downUntil time.Time
	calls     uint64
	errors    uint64
	lastErr   string
	lastErrAt time.Time
	checked   bool  // serves the pool's chain
	wrong     error // serves another chain: never used
}

// New returns a pool of endpoints, tried in the given order while none has
// a record.
func New(endpoints []Endpoint, cfg Config) (*Pool, error) {
	if len(endpoints) == 0 {
		return nil, ErrNoEndpoint
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Retry == (backoff.Policy{}) {
		cfg.Retry = DefaultRetry
	}
	if cfg.Cooldown == (backoff.Policy{}) {
		cfg.Cooldown = DefaultCooldown
	}
	if cfg.ErrorHalfLife <= 0 {
		cfg.ErrorHalfLife = DefaultErrorHalfLife
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = backoff.Sleep
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	p := &Pool{cfg: cfg, log: log}
	for i, e := range endpoints {
		if e.Client == nil {
			return nil, fmt.Errorf("rpcpool: endpoint %d has no client", i+1)
		}
		name := e.Name
		if name == "" {
			name = fmt.Sprintf("%d", i+1)
		}
		p.eps = append(p.eps, &endpoint{name: name, client: e.Client, secrets: secretsOf(e.URL)})
	}
	return p, nil
}

// Name returns a name for the endpoint at rawURL that is safe to show: its
// position in the list and its host, without user info, path or query,
// where providers put API keys.
func Name(index int, rawURL string) string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Host == "" {
		return fmt.Sprintf("%d", index+1)
	}
	return fmt.Sprintf("%d:%s", index+1, u.Host)
}

// secretsOf returns the parts of rawURL that may hold a credential, as
// they can appear in an error text: the whole URL, and its user info, path
// and query when present.
func secretsOf(rawURL string) []string {
	rawURL = strings.TrimSpace(rawURL)
	if rawURL == "" {
		return nil
	}
	out := []string{rawURL}
	if u, err := url.Parse(rawURL); err == nil {
		if u.User != nil {
			out = append(out, u.User.String())
		}
		if len(u.EscapedPath()) > 1 {
			out = append(out, u.EscapedPath())
		}
		if u.RawQuery != "" {
			out = append(out, u.RawQuery)
		}
	}
	return out
}

// scrub replaces e's URL and its secret parts in text by its name.
func (e *endpoint) scrub(text string) string {
	for _, s := range e.secrets {
		text = strings.ReplaceAll(text, s, "<"+e.name+">")
	}
	return text
}

// endpointError is an endpoint's error with its name, its URL scrubbed from
// the text; the original stays reachable through Unwrap for errors.Is and
// errors.As.
type endpointError struct {
	text string
	err  error
}

func (e *endpointError) Error() string { return e.text }
func (e *endpointError) Unwrap() error { return e.err }

func (p *Pool) wrap(i int, method string, err error) error {
	e := p.eps[i]
	return &endpointError{text: fmt.Sprintf("rpcpool: %s on %s: %s", method, e.name, e.scrub(err.Error())), err: err}
}

// kind of call, for the classification of its errors.
type kind int

const (
	light  kind = iota // head and header reads: latency is measured
	logs               // eth_getLogs: range errors are answers
	header             // a numbered header: "not found" asks the others
	tag                // a tagged header (finalized): errors are answers
	vote               // a numbered header for AgreedHash: "not found" abstains
)

// ChainID returns the chain id of the endpoints: the first endpoint that
// answers names it for the pool, and every endpoint is checked against it
// before its first use.
func (p *Pool) ChainID(ctx context.Context) (*big.Int, error) {
	p.mu.Lock()
	id := p.chainID
	p.mu.Unlock()
	if id != nil {
		return new(big.Int).Set(id), nil
	}
	err := p.do(ctx, "eth_chainId", light, func(ctx context.Context, i int, c Client) error {
		got, err := c.ChainID(ctx)
		if err == nil && got == nil {
			err = errors.New("no chain id")
		}
		if err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.chainID == nil {
			p.chainID = new(big.Int).Set(got)
		}
		id = p.chainID
		if got.Cmp(id) == 0 {
			p.eps[i].checked = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return new(big.Int).Set(id), nil
}

// BlockNumber returns the head block number.
func (p *Pool) BlockNumber(ctx context.Context) (uint64, error) {
	var n uint64
	err := p.do(ctx, "eth_blockNumber", light, func(ctx context.Context, _ int, c Client) error {
		var err error
		n, err = c.BlockNumber(ctx)
		return err
	})
	return n, err
}

// HeaderByNumber returns the canonical header at number, or the tagged
// one for a negative number; ethereum.NotFound when no endpoint has it.
func (p *Pool) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	k := header
	if number == nil || number.Sign() < 0 {
		k = tag
	}
	var h *types.Header
	err := p.do(ctx, "eth_getBlockByNumber", k, func(ctx context.Context, _ int, c Client) error {
		var err error
		h, err = c.HeaderByNumber(ctx, number)
		return err
	})
	return h, err
}

// FilterLogs runs an eth_getLogs query. A range the provider refuses as too
// large is returned as it is, for the caller to shrink.
func (p *Pool) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	var out []types.Log
	err := p.do(ctx, "eth_getLogs", logs, func(ctx context.Context, _ int, c Client) error {
		var err error
		out, err = c.FilterLogs(ctx, q)
		return err
	})
	return out, err
}

// AgreedHash returns the hash of the canonical block at number as the
// endpoints agree on it, for decisions that retract payments (a reorg):
// one endpoint on a stale or minority fork must not decide alone.
//
// Every endpoint that is up is asked at once (when none is, every endpoint
// of the pool's chain); the answer is the hash a strict majority of the
// endpoints that answered a hash name. Endpoints that answer another hash
// are counted as failed (passed over for their cooldown, like any failure,
// so the next reads go elsewhere). An endpoint that has no block there
// abstains: it lags, which is not a fork; found is false only when no
// endpoint that answered has the block. No majority (two endpoints, two
// hashes) is ErrNoAgreement, with no penalty since nothing says which is
// right: the caller retries later. When no endpoint answered at all, the
// rounds are repeated as for any call. One endpoint alone decides only
// when it is the only one configured or up.
func (p *Pool) AgreedHash(ctx context.Context, number uint64) (hash common.Hash, found bool, err error) {
	const method = "eth_getBlockByNumber"
	n := new(big.Int).SetUint64(number)
	retry := backoff.New(p.cfg.Retry, p.rand)
	for round := 1; ; round++ {
		voters := p.voters()
		if len(voters) == 0 {
			return common.Hash{}, false, ErrNoEndpoint
		}
		ballots := make([]ballot, len(voters))
		var wg sync.WaitGroup
		for j, i := range voters {
			wg.Go(func() {
				b := ballot{i: i}
				b.elapsed, b.ran, b.err = p.call(ctx, i, func(ctx context.Context, _ int, c Client) error {
					h, err := c.HeaderByNumber(ctx, n)
					switch {
					case err != nil:
						return err
					case h == nil || h.Number == nil || h.Number.Cmp(n) != 0:
						return fmt.Errorf("header for block %d is another block", number)
					}
					b.hash = h.Hash()
					return nil
				})
				ballots[j] = b
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return common.Hash{}, false, err
		}
		hash, found, decided, again, err := p.count(method, number, ballots)
		if decided || !again || round >= p.cfg.Attempts {
			return hash, found, err
		}
		wait := retry.Next()
		p.log.Warn("no RPC endpoint answered the block; retrying", zap.Uint64("block", number),
			zap.Int("round", round), zap.Duration("backoff", wait), zap.Error(err))
		if serr := p.cfg.Sleep(ctx, wait); serr != nil {
			return common.Hash{}, false, cmpErr(err, serr)
		}
	}
}

// ballot is one endpoint's answer to AgreedHash.
type ballot struct {
	i       int
	ran     bool // the call was made (the chain check passed)
	elapsed time.Duration
	err     error
	hash    common.Hash // when err is nil
}

// count decides a vote and records each endpoint's part in it. decided is
// false when no endpoint answered; again is true when a failure may pass
// in another round.
func (p *Pool) count(method string, number uint64, ballots []ballot) (hash common.Hash, found, decided, again bool, err error) {
	votes := map[common.Hash]int{}
	hashes, abstained := 0, 0
	for _, b := range ballots {
		if !b.ran {
			if !errors.Is(b.err, ErrWrongChain) {
				again = true // a failed chain check, recorded by call
			}
			err = p.wrap(b.i, method, b.err)
			continue
		}
		switch classify(vote, b.err) {
		case done:
			votes[b.hash]++
			hashes++
		case absent:
			abstained++
		case rejected:
			err = p.wrap(b.i, method, b.err)
		case transient:
			err = p.wrap(b.i, method, b.err)
			again = true
		}
	}
	winner, top := common.Hash{}, 0
	for h, c := range votes {
		if c > top {
			winner, top = h, c
		}
	}
	majority := top*2 > hashes
	for _, b := range ballots {
		switch {
		case !b.ran:
		case b.err == nil && majority && b.hash != winner:
			p.failed(b.i, method, fmt.Errorf("block %d is %s there, %s on %d of the %d endpoints that answered it",
				number, b.hash.Hex(), winner.Hex(), top, hashes))
		default:
			p.record(b.i, method, vote, b.elapsed, b.err)
		}
	}
	switch {
	case hashes > 0 && majority:
		return winner, true, true, false, nil
	case hashes > 0:
		var named []string
		for _, b := range ballots {
			if b.ran && b.err == nil {
				named = append(named, p.eps[b.i].name+" "+b.hash.Hex())
			}
		}
		p.log.Warn("RPC endpoints disagree on a block hash", zap.Uint64("block", number), zap.Strings("answers", named))
		return common.Hash{}, false, true, false, fmt.Errorf("%w %d: %s", ErrNoAgreement, number, strings.Join(named, ", "))
	case abstained > 0:
		return common.Hash{}, false, true, false, nil
	}
	return common.Hash{}, false, false, again, err
}

// voters returns the endpoints AgreedHash asks: those up (not cooling
// down), or when none is, every one not excluded for serving another
// chain, in the configured order.
func (p *Pool) voters() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	var up, all []int
	for i, e := range p.eps {
		if e.wrong != nil {
			continue
		}
		all = append(all, i)
		if !now.Before(e.downUntil) {
			up = append(up, i)
		}
	}
	if len(up) > 0 {
		return up
	}
	return all
}

// outcome of one try, by what the call does next.
type outcome int

const (
	done      outcome = iota // return (success or an answer)
	absent                   // "not found": ask the others, then answer it
	rejected                 // ask the others once, no penalty, no retry
	transient                // penalise, ask the others, retry rounds
)

func classify(k kind, err error) outcome {
	var unchecked *uncheckedError
	switch {
	case err == nil:
		return done
	case errors.Is(err, ErrWrongChain):
		return rejected
	case errors.As(err, &unchecked):
		return transient
	case errors.Is(err, ethereum.NotFound):
		if k == header || k == vote {
			return absent
		}
		return done
	case k == logs && rpcerr.IsRangeError(err):
		return done
	case k == tag || rpcerr.IsRejected(err):
		return rejected
	}
	return transient
}

// do runs f on the endpoints, best first, as the package comment says.
func (p *Pool) do(ctx context.Context, method string, k kind, f func(context.Context, int, Client) error) error {
	retry := backoff.New(p.cfg.Retry, p.rand)
	for round := 1; ; round++ {
		order := p.order()
		if len(order) == 0 {
			return ErrNoEndpoint
		}
		var (
			last     error
			notFound error
			again    bool
		)
		for _, i := range order {
			err := p.try(ctx, i, method, k, f)
			if ctx.Err() != nil {
				return cmpErr(err, ctx.Err())
			}
			switch classify(k, err) {
			case done:
				if err != nil {
					return p.wrap(i, method, err)
				}
				return nil
			case absent:
				notFound = err
			case rejected:
				last = p.wrap(i, method, err)
			case transient:
				last = p.wrap(i, method, err)
				again = true
			}
		}
		if notFound != nil {
			// One endpoint had no such block and none that answered had
			// it: it is absent. (ethereum.NotFound itself, unwrapped, as
			// the go-ethereum clients answer it.)
			return notFound
		}
		if !again || round >= p.cfg.Attempts {
			return last
		}
		wait := retry.Next()
		p.log.Warn("every RPC endpoint failed; retrying", zap.String("method", method),
			zap.Int("round", round), zap.Duration("backoff", wait), zap.Error(last))
		if err := p.cfg.Sleep(ctx, wait); err != nil {
			return cmpErr(last, err)
		}
	}
}

// cmpErr prefers the context's error when the call was cut short by it.
func cmpErr(err, ctxErr error) error {
	if err == nil || !errors.Is(err, ctxErr) {
		return ctxErr
	}
	return err
}

// try runs f on endpoint i with the call timeout and records the outcome.
func (p *Pool) try(ctx context.Context, i int, method string, k kind, f func(context.Context, int, Client) error) error {
	elapsed, ran, err := p.call(ctx, i, f)
	if ran && ctx.Err() == nil { // a caller that gave up says nothing of the endpoint
		p.record(i, method, k, elapsed, err)
	}
	return err
}

// call runs f on endpoint i with the call timeout, once the endpoint is
// known to serve the pool's chain; ran is false when that check failed
// (a failed check is recorded here).
func (p *Pool) call(ctx context.Context, i int, f func(context.Context, int, Client) error) (elapsed time.Duration, ran bool, err error) {
	if err := p.check(ctx, i); err != nil {
		if !errors.Is(err, ErrWrongChain) && ctx.Err() == nil {
			p.failed(i, "eth_chainId", err)
		}
		return 0, false, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	start := p.cfg.Now()
	err = f(cctx, i, p.eps[i].client)
	elapsed = p.cfg.Now().Sub(start)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	if timedOut {
		err = fmt.Errorf("%w after %s: %w", rpcerr.ErrTimeout, p.cfg.CallTimeout, err)
	}
	return elapsed, true, err
}

// record counts the outcome of a call against endpoint i, or for it.
func (p *Pool) record(i int, method string, k kind, elapsed time.Duration, err error) {
	switch o := classify(k, err); {
	case o == transient || o == done && err != nil && rpcerr.IsTimeout(err):
		p.failed(i, method, err)
	default:
		p.answered(i, k, elapsed)
	}
}

// uncheckedError is a failure to ask an endpoint for its chain id before
// its first use: the endpoint's fault, whatever the call it preceded.
type uncheckedError struct{ err error }

func (e *uncheckedError) Error() string { return "checking the chain id: " + e.err.Error() }
func (e *uncheckedError) Unwrap() error { return e.err }

// check verifies once that endpoint i serves the pool's chain.
func (p *Pool) check(ctx context.Context, i int) error {
	e := p.eps[i]
	p.mu.Lock()
	want, checked, wrong := p.chainID, e.checked, e.wrong
	p.mu.Unlock()
	switch {
	case wrong != nil:
		return wrong
	case checked || want == nil:
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	got, err := e.client.ChainID(cctx)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	if timedOut {
		err = fmt.Errorf("%w after %s: %w", rpcerr.ErrTimeout, p.cfg.CallTimeout, err)
	}
	if err != nil {
		return &uncheckedError{err}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if got == nil || got.Cmp(want) != 0 {
		e.wrong = fmt.Errorf("%w: %v, want %v", ErrWrongChain, got, want)
		e.lastErr, e.lastErrAt = e.wrong.Error(), p.cfg.Now()
		p.log.Error("RPC endpoint excluded: it serves another chain", zap.String("endpoint", e.name), zap.Error(e.wrong))
		return e.wrong
	}
	e.checked = true
	return nil
}

func (p *Pool) answered(i int, k kind, elapsed time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.eps[i]
	e.calls++
	if e.failures > 0 {
		p.log.Info("RPC endpoint answers again", zap.String("endpoint", e.name), zap.Int("after_failures", e.failures))
	}
	e.failures, e.downUntil = 0, time.Time{}
	if k != logs {
		if e.latency == 0 {
			e.latency = max(elapsed, time.Nanosecond)
		} else {
			e.latency = time.Duration(latencyWeight*float64(elapsed) + (1-latencyWeight)*float64(e.latency))
		}
	}
	// A vote asks every endpoint at once: answering one says nothing of
	// which should take the next calls.
	if p.current != i && k != vote {
		p.log.Info("RPC calls now go to another endpoint", zap.String("from", p.eps[p.current].name), zap.String("to", e.name))
		p.current = i
	}
}

func (p *Pool) failed(i int, method string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.eps[i]
	now := p.cfg.Now()
	e.calls++
	e.errors++
	e.errs = p.recentErrors(e, now) + 1
	e.errsAt = now
	e.failures++
	cool := backoff.New(p.cfg.Cooldown, p.cfg.Rand)
	for range e.failures - 1 {
		cool.Next()
	}
	e.downUntil = now.Add(cool.Next())
	e.lastErr, e.lastErrAt = e.scrub(err.Error()), now
	p.log.Warn("RPC endpoint failed", zap.String("endpoint", e.name), zap.String("method", method),
		zap.Int("consecutive_failures", e.failures), zap.Time("passed_over_until", e.downUntil), zap.String("error", e.lastErr))
}

// recentErrors is e's error count decayed to now.
func (p *Pool) recentErrors(e *endpoint, now time.Time) float64 {
	if e.errs == 0 {
		return 0
	}
	age := now.Sub(e.errsAt)
	if age <= 0 {
		return e.errs
	}
	return e.errs * math.Exp2(-float64(age)/float64(p.cfg.ErrorHalfLife))
}

// score is e's health from 0 to 1: fewer recent errors and lower latency
// score higher.
func (p *Pool) score(e *endpoint, now time.Time) float64 {
	lat := e.latency
	if lat == 0 {
		lat = latencyRef
	}
	return 1 / (1 + p.recentErrors(e, now)) * float64(latencyRef) / float64(latencyRef+lat)
}

// order returns the endpoints to try, best first: those not cooling down by
// score (the one in use first while within the stickiness margin of the
// best, the list order among equals), then those cooling down, soonest
// back first; never those of another chain.
func (p *Pool) order() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	var up, down []int
	for i, e := range p.eps {
		switch {
		case e.wrong != nil:
		case now.Before(e.downUntil):
			down = append(down, i)
		default:
			up = append(up, i)
		}
	}
	scores := make([]float64, len(p.eps))
	for _, i := range up {
		scores[i] = p.score(p.eps[i], now)
	}
	slices.SortStableFunc(up, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	if c := slices.Index(up, p.current); c > 0 && scores[p.current] >= stickiness*scores[up[0]] {
		up = append([]int{p.current}, slices.Delete(up, c, c+1)...)
	}
	slices.SortStableFunc(down, func(a, b int) int { return p.eps[a].downUntil.Compare(p.eps[b].downUntil) })
	return append(up, down...)
}

func (p *Pool) rand() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Rand()
}

// EndpointHealth is one endpoint's record, for /health and metrics.
type EndpointHealth struct {
	Name string `json:"name"`
	// Current: the endpoint calls go to first.
	Current bool `json:"current"`
	// Up: not passed over after failures, and on the pool's chain.
	Up bool `json:"up"`
	// Score is the health from 0 to 1 that orders the endpoints.
	Score               float64   `json:"score"`
	LatencyMillis       float64   `json:"latencyMs,omitempty"`
	RecentErrors        float64   `json:"recentErrors"`
	ConsecutiveFailures int       `json:"consecutiveFailures"`
	Calls               uint64    `json:"calls"`
	Errors              uint64    `json:"errors"`
	DownUntil           time.Time `json:"downUntil,omitzero"`
	LastError           string    `json:"lastError,omitempty"`
	LastErrorAt         time.Time `json:"lastErrorAt,omitzero"`
}

// Health returns every endpoint's record, in the configured order.
func (p *Pool) Health() []EndpointHealth {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	out := make([]EndpointHealth, 0, len(p.eps))
	for i, e := range p.eps {
		h := EndpointHealth{
			Name: e.name, Current: i == p.current, Up: e.wrong == nil && !now.Before(e.downUntil),
			Score: p.score(e, now), LatencyMillis: float64(e.latency) / float64(time.Millisecond),
			RecentErrors: p.recentErrors(e, now), ConsecutiveFailures: e.failures,
			Calls: e.calls, Errors: e.errors, LastError: e.lastErr, LastErrorAt: e.lastErrAt,
		}
		if !h.Up && e.wrong == nil {
			h.DownUntil = e.downUntil
		}
		if e.wrong != nil {
			h.Score = 0
		}
		out = append(out, h)
	}
	return out
}
