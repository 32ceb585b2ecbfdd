// Package upstream reaches the validators' source routes. A request goes to
// the validators in turn until one gives an answer the caller accepts, so
// one validator being down, or answering outside its contract, costs a
// request a retry, not an error. Every attempt is reported, so a composed
// view can name the validators it could not use.
//
// What an acceptable answer is belongs to the caller (the routes check it
// against the source contract); the pool only moves bytes and counts
// attempts. Caching and coalescing, when they come, wrap Get.
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
type Source struct {
	NodeID    string `json:"nodeId"`
	Route     string `json:"route"`
	OK        bool   `json:"ok"`
	LatencyMs int64  `json:"latencyMs"`
	Error     string `json:"error,omitempty"`
}

// Response is a validator's answer.
type Response struct {
	Status int
	Body   []byte
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

// Pool is a fixed list of validator base URLs.
type Pool struct {
	urls   []string
	client *http.Client
	token  string
}

// NewPool returns a pool. token, when set, is sent as the bearer token
// (SVC_VALIDATOR_AUTH_TOKEN of the validators).
func NewPool(urls []string, timeout time.Duration, token string) (*Pool, error) {
	if len(urls) == 0 {
		return nil, errors.New("upstream: no validator URL")
	}
	clean := make([]string, len(urls))
	for i, u := range urls {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("upstream: validator URL %q is not http(s)", u)
		}
		clean[i] = u
	}
	return &Pool{urls: clean, client: &http.Client{Timeout: timeout}, token: token}, nil
}

// URLs returns the validator base URLs.
func (p *Pool) URLs() []string { return append([]string(nil), p.urls...) }

// Get asks the validators in turn for route until accept takes an answer.
// The error wraps ErrRejected when at least one validator answered and
// none acceptably (asking again will not help), ErrUnavailable otherwise.
func (p *Pool) Get(ctx context.Context, route string, accept Accept) (Response, []Source, error) {
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
		return Response{}, sources, fmt.Errorf("%w: %s", ErrRejected, route)
	}
	return Response{}, sources, fmt.Errorf("%w: %s", ErrUnavailable, route)
}

// GetFrom asks one validator. The error unwraps to ErrUnavailable or
// ErrRejected, as Get's does, and its message is the reason alone.
func (p *Pool) GetFrom(ctx context.Context, base, route string, accept Accept) (Response, Source, error) {
	start := time.Now()
	src := Source{NodeID: base, Route: route}
	resp, err := p.get(ctx, base+route)
	if err != nil {
		err = &attemptError{kind: ErrUnavailable, reason: err.Error()}
	} else if err = accept(resp); err != nil {
		var ae *attemptError
		if !errors.As(err, &ae) {
			err = &attemptError{kind: ErrRejected, reason: err.Error()}
		}
	}
	src.LatencyMs = time.Since(start).Milliseconds()
	src.OK = err == nil
	if err != nil {
		src.Error = err.Error()
	}
	return resp, src, err
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
