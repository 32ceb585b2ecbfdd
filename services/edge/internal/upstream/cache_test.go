package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counting is a validator that answers "ok" (or status) and counts the
// calls; gate, when not nil, holds every answer until it is closed.
type counting struct {
	srv    *httptest.Server
	calls  atomic.Int64
	status atomic.Int64
	gate   chan struct{}
}

func newCounting(t *testing.T, gate chan struct{}) *counting {
	v := &counting{gate: gate}
	if gate != nil {
		// Closed before the server is, should the test stop early.
		defer t.Cleanup(func() {
			select {
			case <-gate:
			default:
				close(gate)
			}
		})
	}
	v.status.Store(http.StatusOK)
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.calls.Add(1)
		if v.gate != nil {
			<-v.gate
		}
		w.WriteHeader(int(v.status.Load()))
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// counts is an Observer for the tests.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) Call(template, outcome string)     { c.add("call " + template + " " + outcome) }
func (c *counts) CallLatency(string, time.Duration) {}
func (c *counts) Lookup(template, result string)    { c.add("lookup " + template + " " + result) }

func (c *counts) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

func (c *counts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func cached(t *testing.T, cfg CacheConfig, perValidator int, urls ...string) *Cache {
	t.Helper()
	p, err := NewPool(Config{URLs: urls, Timeout: time.Second, Token: "", PerValidator: perValidator, Observer: cfg.Observer})
	if err != nil {
		t.Fatal(err)
	}
	return NewCache(p, cfg)
}

func acceptOK(r Response) error {
	if r.Status >= 500 {
		return Unavailable("status %d", r.Status)
	}
	return nil
}

// TestCoalescing: concurrent identical reads make one call, with the cache
// off, and every caller gets the answer.
func TestCoalescing(t *testing.T) {
	gate := make(chan struct{})
	v := newCounting(t, gate)
	obs := &counts{}
	c := cached(t, CacheConfig{TTL: 0, Entries: 8, Observer: obs}, 0, v.srv.URL)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for range n {
		wg.Go(func() {
			resp, sources, err := c.Get(context.Background(), x, acceptOK)
			if err != nil || string(resp.Body) != "ok" || len(sources) != 1 || sources[0].CacheAgeMs != 0 {
				errs <- errors.New("bad answer")
			}
		})
		wg.Go(func() {
			// GetFrom is coalesced apart from Get: another key.
			if _, _, err := c.GetFrom(context.Background(), v.srv.URL, x, acceptOK); err != nil {
				errs <- err
			}
		})
	}
	// Every caller has joined one of the two calls well before this.
	time.Sleep(300 * time.Millisecond)
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := v.calls.Load(); got != 2 {
		t.Errorf("%d upstream calls for 2×%d concurrent reads, want 2", got, n)
	}
	if obs.get("lookup /v1/x miss") != 2 || obs.get("lookup /v1/x shared") != 2*n-2 {
		t.Errorf("lookups %v", obs.n)
	}
	// With the cache off, the next read calls again.
	if _, _, err := c.Get(context.Background(), x, acceptOK); err != nil || v.calls.Load() != 3 {
		t.Errorf("%v, %d calls", err, v.calls.Load())
	}
}

// TestTTL: an answer is reused until it is TTL old, with its age; a
// failure is never kept; Fresh skips the kept answer.
func TestTTL(t *testing.T) {
	v := newCounting(t, nil)
	obs := &counts{}
	c := cached(t, CacheConfig{TTL: time.Second, Entries: 8, Observer: obs}, 0, v.srv.URL)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	ctx := context.Background()

	if _, _, err := c.Get(ctx, x, acceptOK); err != nil || v.calls.Load() != 1 {
		t.Fatalf("%v %d", err, v.calls.Load())
	}
	now = now.Add(400 * time.Millisecond)
	_, sources, err := c.Get(ctx, x, acceptOK)
	if err != nil || v.calls.Load() != 1 || sources[0].CacheAgeMs != 400 || !sources[0].OK {
		t.Fatalf("kept answer: %v %d %+v", err, v.calls.Load(), sources)
	}
	if obs.get("lookup /v1/x hit") != 1 {
		t.Errorf("lookups %v", obs.n)
	}
	fresh := x
	fresh.Fresh = true
	if _, sources, _ := c.Get(ctx, fresh, acceptOK); v.calls.Load() != 2 || sources[0].CacheAgeMs != 0 {
		t.Errorf("Fresh: %d calls, %+v", v.calls.Load(), sources)
	}
	now = now.Add(time.Second)
	if _, sources, _ := c.Get(ctx, x, acceptOK); v.calls.Load() != 3 || sources[0].CacheAgeMs != 0 {
		t.Errorf("expired: %d calls, %+v", v.calls.Load(), sources)
	}

	v.status.Store(http.StatusServiceUnavailable)
	now = now.Add(2 * time.Second)
	for range 3 {
		if _, _, err := c.Get(ctx, x, acceptOK); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%v", err)
		}
	}
	if v.calls.Load() != 6 {
		t.Errorf("%d calls: a failure was kept", v.calls.Load())
	}
}

// TestEntriesAreBounded: a route with a parameter cannot grow the cache
// past its bound.
func TestEntriesAreBounded(t *testing.T) {
	v := newCounting(t, nil)
	c := cached(t, CacheConfig{TTL: time.Minute, Entries: 3}, 0, v.srv.URL)
	for i := range 20 {
		r := Route{Template: "/v1/w/{w}", Path: "/v1/w/" + strings.Repeat("a", i+1)}
		if _, _, err := c.Get(context.Background(), r, acceptOK); err != nil {
			t.Fatal(err)
		}
		if c.Len() > 3 {
			t.Fatalf("%d entries kept, bound 3", c.Len())
		}
	}
}

// TestSlots: a validator with every slot taken is passed over once the
// wait is over, and the attempt says why.
func TestSlots(t *testing.T) {
	slow := newCounting(t, nil)
	fast := newCounting(t, nil)
	obs := &counts{}
	p, err := NewPool(Config{URLs: []string{slow.srv.URL, fast.srv.URL}, Timeout: 200 * time.Millisecond, PerValidator: 1, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	// A call in flight to slow holds its one slot.
	p.slots[slow.srv.URL] <- struct{}{}
	start := time.Now()
	resp, sources, err := p.Get(context.Background(), x, acceptOK)
	if err != nil || string(resp.Body) != "ok" || len(sources) != 2 || !strings.HasPrefix(sources[0].Error, "busy") {
		t.Fatalf("%v %+v", err, sources)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("gave up after %v, before the wait was over", waited)
	}
	if slow.calls.Load() != 0 || obs.get("call /v1/x busy") != 1 || obs.get("call /v1/x ok") != 1 {
		t.Errorf("slow %d calls, %v", slow.calls.Load(), obs.n)
	}
	// The request's own end bounds the wait too.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, _, err := p.GetFrom(ctx, slow.srv.URL, x, acceptOK); !errors.Is(err, ErrUnavailable) || time.Since(start) > 150*time.Millisecond {
		t.Errorf("%v after %v", err, time.Since(start))
	}
	// Once the slot is free, the validator is asked again.
	<-p.slots[slow.srv.URL]
	if _, _, err := p.GetFrom(context.Background(), slow.srv.URL, x, acceptOK); err != nil || slow.calls.Load() != 1 {
		t.Errorf("%v, %d calls", err, slow.calls.Load())
	}
}

// TestAge: an answer's version stays current, with its age, until the
// answer expires or another replaces it.
func TestAge(t *testing.T) {
	v := newCounting(t, nil)
	c := cached(t, CacheConfig{TTL: time.Second, Entries: 8}, 0, v.srv.URL)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	ctx := context.Background()

	made, _, err := c.Get(ctx, x, acceptOK)
	if err != nil || made.Kept.Seq == 0 {
		t.Fatalf("%v %+v", err, made.Kept)
	}
	now = now.Add(300 * time.Millisecond)
	hit, _, _ := c.Get(ctx, x, acceptOK)
	if hit.Kept != made.Kept {
		t.Errorf("a kept answer's version %+v, want %+v", hit.Kept, made.Kept)
	}
	if age, ok := c.Age(made.Kept); !ok || age != 300*time.Millisecond {
		t.Errorf("age %v %v, want 300ms", age, ok)
	}
	fresh := x
	fresh.Fresh = true
	replaced, _, _ := c.Get(ctx, fresh, acceptOK)
	if _, ok := c.Age(made.Kept); ok || replaced.Kept == made.Kept {
		t.Errorf("a replaced answer is still current: %+v %+v", made.Kept, replaced.Kept)
	}
	now = now.Add(time.Second)
	if _, ok := c.Age(replaced.Kept); ok {
		t.Error("an expired answer is still current")
	}
	if _, ok := c.Age(Version{}); ok {
		t.Error("the zero Version is current")
	}
	if _, ok := (&Pool{}).Age(made.Kept); ok {
		t.Error("a pool keeps answers")
	}
}
