// Package upstream reaches the validators' source routes. A request goes to
// the validators in turn until one answers, so one validator being down
// costs a request a timeout, not an error. Every attempt is reported, so a
// composed view can name the validators it could not reach.
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

// ErrUnavailable is returned when no validator answered.
var ErrUnavailable = errors.New("no validator answered")

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

// Get asks the validators in turn for route until one answers with a status
// below 500. A 4xx answer is an answer: it is returned, not failed over.
func (p *Pool) Get(ctx context.Context, route string) (Response, []Source, error) {
	var sources []Source
	for _, base := range p.urls {
		resp, src := p.GetFrom(ctx, base, route)
		sources = append(sources, src)
		if src.OK {
			return resp, sources, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return Response{}, sources, ErrUnavailable
}

// GetFrom asks one validator.
func (p *Pool) GetFrom(ctx context.Context, base, route string) (Response, Source) {
	start := time.Now()
	src := Source{NodeID: base, Route: route}
	resp, err := p.get(ctx, base+route)
	src.LatencyMs = time.Since(start).Milliseconds()
	switch {
	case err != nil:
		src.Error = err.Error()
	case resp.Status >= 500:
		src.Error = fmt.Sprintf("status %d", resp.Status)
	default:
		src.OK = true
	}
	return resp, src
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
