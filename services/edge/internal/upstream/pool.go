// Package upstream reaches the validators' source routes. A request goes to
// the validators in turn until one gives an answer the caller accepts, so
// one validator being down, or answering outside its contract, costs a
// request a retry, not an error. Every attempt is reported, so a composed
// view can name the validators it could not use.
//
// What an acceptable answer is belongs to the caller (the routes check it
// against the source contract); the pool only moves bytes and counts
// attempts. Cache wraps a pool with request coalescing and a short cache.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxBody bounds what the edge reads from a validator.
const maxBody = 8 << 20

// Source is one attempt at one validator, as data.sources[] reports it.
// CacheAgeMs is how old the attempt is when it is reported: 0 when it was
// made for this request (or shared with a concurrent one), the age of the
// cached answer otherwise.
type Source struct {
	NodeID     string `json:"nodeId"`
	Route      string `json:"route"`
	OK         bool   `json:"ok"`
	LatencyMs  int64  `json:"latencyMs"`
	CacheAgeMs int64  `json:"cacheAgeMs"`
	Error      string `json:"error,omitempty"`
}

// Route is one request to a source route: Template is the route as the
// source document names it (the label of the metrics, so that a wallet
// address does not become a time series), Path what is asked, query
// included.
type Route struct {
	Template, Path string
	// Fresh skips a cached answer (the answer is still shared with
	// concurrent identical reads): for a caller that keeps its own,
	// longer-lived view of the answer, such as the leader.
	Fresh bool
}

// Observer counts what the pool and the cache do; metrics.Metrics is one.
type Observer interface {
	// Call is one call to a validator and its outcome (Outcome*).
	Call(template, outcome string)
	// CallLatency is how long one call sent to a validator took, from the
	// request to the end of its answer or its failure (a call that got no
	// slot is not sent and not timed).
	CallLatency(template string, took time.Duration)
	// Lookup is one read through the cache and how it was answered
	// (Lookup*).
	Lookup(template, result string)
}

// Outcomes of a call, and results of a lookup, as the metrics label them.
const (
	OutcomeOK          = "ok"
	OutcomeUnavailable = "unavailable"
	OutcomeRejected    = "rejected"
	OutcomeBusy        = "busy"

	LookupHit    = "hit"
	LookupMiss   = "miss"
	LookupShared = "shared"
)

type nopObserver struct{}

func (nopObserver) Call(string, string)               {}
func (nopObserver) CallLatency(string, time.Duration) {}
func (nopObserver) Lookup(string, string)             {}

// Response is a validator's answer.
type Response struct {
	Status int
	Body   []byte
	// Kept names the cache's copy of the answer (the zero Version when
	// the answer is not kept): a caller that derives something from it
	// keeps that only while Age says the answer is still kept.
	Kept Version
}

// Version names one answer a Cache keeps: its key and its number.
type Version struct {
	Key string
	Seq uint64
}

// Accept decides whether an answer can be used. It returns nil to take it;
// Unavailable(...) when the validator could not answer (a retry elsewhere
// or later may succeed); any other error when the answer is outside the
// contract.
type Accept func(Response) error

var (
	// ErrUnavailable: no validator answered.
	ErrUnavailable = errors.New("no validator answered")
	// ErrRejected: validators answered, and every answer was refused.
	ErrRejected = errors.New("no validator gave an answer within its contract")
)

// attemptError is why one attempt failed: its message is the reason alone,
// as data.sources[] shows it, and it unwraps to ErrUnavailable or
// ErrRejected.
type attemptError struct {
	kind   error
	reason string
}

func (e *attemptError) Error() string { return e.reason }
func (e *attemptError) Unwrap() error { return e.kind }

// Unavailable is the error of an Accept for an answer that says the
// validator could not answer (a 5xx).
func Unavailable(format string, args ...any) error {
	return &attemptError{kind: ErrUnavailable, reason: fmt.Sprintf(format, args...)}
}

// Config is a pool's configuration.
type Config struct {
	// URLs are the validators' base URLs, in the order Get asks them.
	URLs []string
	// Timeout bounds one call to a validator, and the wait for a slot.
	Timeout time.Duration
	// Token, when set, is sent as the bearer token (the validators'
	// SVC_VALIDATOR_AUTH_TOKEN).
	Token string
	// PerValidator bounds the calls in flight to one validator; 0: no
	// bound.
	PerValidator int
	// Observer counts the calls; nil counts nothing.
	Observer Observer
}

// Pool is a fixed list of validator base URLs.
type Pool struct {
	urls    []string
	client  *http.Client
	token   string
	timeout time.Duration
	obs     Observer
	// slots holds one semaphore per validator: a validator that slows
	// down is not buried under the edge's retries, and a request that
	// cannot get a slot in time moves on to the next validator.
	slots map[string]chan struct{}
}

// NewPool returns a pool.
func NewPool(cfg Config) (*Pool, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("upstream: no validator URL")
	}
	p := &Pool{
		client:  &http.Client{Timeout: cfg.Timeout},
		token:   cfg.Token,
		timeout: cfg.Timeout,
		obs:     cfg.Observer,
		slots:   map[string]chan struct{}{},
	}
	if p.obs == nil {
		p.obs = nopObserver{}
	}
	for _, u := range cfg.URLs {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("upstream: validator URL %q is not http(s)", u)
		}
		p.urls = append(p.urls, u)
		if cfg.PerValidator > 0 {
			p.slots[u] = make(chan struct{}, cfg.PerValidator)
		}
	}
	return p, nil
}

// URLs returns the validator base URLs.
func (p *Pool) URLs() []string { return append([]string(nil), p.urls...) }

// Age is always false: a pool keeps no answer (Cache does).
func (p *Pool) Age(Version) (time.Duration, bool) { return 0, false }

// Get asks the validators in turn for route until accept takes an answer.
// The error wraps ErrRejected when at least one validator answered and
// none acceptably (asking again will not help), ErrUnavailable otherwise.
func (p *Pool) Get(ctx context.Context, route Route, accept Accept) (Response, []Source, error) {
	var sources []Source
	rejected := false
	for _, base := range p.urls {
		resp, src, err := p.GetFrom(ctx, base, route, accept)
		sources = append(sources, src)
		if err == nil {
			return resp, sources, nil
		}
		rejected = rejected || errors.Is(err, ErrRejected)
		if ctx.Err() != nil {
			break
		}
	}
	if rejected {
		return Response{}, sources, fmt.Errorf("%w: %s", ErrRejected, route.Path)
	}
	return Response{}, sources, fmt.Errorf("%w: %s", ErrUnavailable, route.Path)
}

// GetFrom asks one validator. The error unwraps to ErrUnavailable or
// ErrRejected, as Get's does, and its message is the reason alone.
func (p *Pool) GetFrom(ctx context.Context, base string, route Route, accept Accept) (Response, Source, error) {
	start := time.Now()
	src := Source{NodeID: base, Route: route.Path}
	var resp Response
	outcome := OutcomeBusy
	release, err := p.acquire(ctx, base)
	if err == nil {
		sent := time.Now()
		resp, err = p.get(ctx, base+route.Path)
		release()
		p.obs.CallLatency(route.Template, time.Since(sent))
		outcome = OutcomeUnavailable
		if err != nil {
			err = &attemptError{kind: ErrUnavailable, reason: err.Error()}
		} else if err = accept(resp); err != nil {
			var ae *attemptError
			if !errors.As(err, &ae) {
				err = &attemptError{kind: ErrRejected, reason: err.Error()}
				outcome = OutcomeRejected
			}
		} else {
			outcome = OutcomeOK
		}
	}
	p.obs.Call(route.Template, outcome)
	src.LatencyMs = time.Since(start).Milliseconds()
	src.OK = err == nil
	if err != nil {
		src.Error = err.Error()
	}
	return resp, src, err
}

// acquire takes one of base's slots, waiting at most the pool's timeout
// (and never past ctx): a validator that has not freed a slot by then is
// as good as down for this request, which moves on to the next one.
func (p *Pool) acquire(ctx context.Context, base string) (release func(), err error) {
	slot, ok := p.slots[base]
	if !ok {
		return func() {}, nil
	}
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	default:
	}
	wait := time.NewTimer(p.timeout)
	defer wait.Stop()
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-wait.C:
	case <-ctx.Done():
	}
	return nil, &attemptError{kind: ErrUnavailable, reason: fmt.Sprintf("busy: %d calls in flight", cap(slot))}
}

func (p *Pool) get(ctx context.Context, url string) (Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Response{}, err
	}
	req.Header.Set("Accept", "application/json")
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Response{}, err
	}
	if len(body) > maxBody {
		return Response{}, fmt.Errorf("answer exceeds %d bytes", maxBody)
	}
	return Response{Status: resp.StatusCode, Body: body}, nil
}
