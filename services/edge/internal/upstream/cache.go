package upstream

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Asker is what the cache wraps: a Pool.
type Asker interface {
	Get(ctx context.Context, route Route, accept Accept) (Response, []Source, error)
	GetFrom(ctx context.Context, base string, route Route, accept Accept) (Response, Source, error)
	URLs() []string
}

// CacheConfig is a cache's configuration.
type CacheConfig struct {
	// TTL is how long an accepted answer is reused; 0 reuses none
	// (concurrent identical reads still share one call).
	TTL time.Duration
	// Entries bounds the answers kept (a route with a path parameter,
	// a wallet, has as many answers as callers care to ask for).
	Entries int
	// Shared bounds a call shared by several requests: it is not ended
	// by the request that started it going away, only by this (0: by
	// the pool's own timeouts alone).
	Shared time.Duration
	// Observer counts the lookups; nil counts nothing.
	Observer Observer
	// Now is the clock answers are aged by; nil: time.Now.
	Now func() time.Time
}

// Cache coalesces concurrent identical reads into one call and reuses an
// accepted answer for a short while, so that the load on the validators
// follows the number of routes, not the number of clients. Only accepted
// answers are kept (Get and GetFrom return no other without an error);
// failures are never kept, so a validator coming back is seen at once.
//
// A cached answer is returned with the attempts that produced it, their
// CacheAgeMs set to its age.
type Cache struct {
	next Asker
	cfg  CacheConfig
	now  func() time.Time

	group singleflight.Group
	mu    sync.Mutex
	kept  map[string]entry
	seq   uint64 // numbers the answers kept, so that a Version names one
}

type entry struct {
	resp    Response
	sources []Source
	at      time.Time
	seq     uint64
}

// result is what a shared call hands to each of its callers.
type result struct {
	resp    Response
	sources []Source
}

// NewCache wraps next.
func NewCache(next Asker, cfg CacheConfig) *Cache {
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Entries <= 0 {
		cfg.Entries = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Cache{next: next, cfg: cfg, now: cfg.Now, kept: map[string]entry{}}
}

// URLs are the wrapped pool's.
func (c *Cache) URLs() []string { return c.next.URLs() }

// Get is Pool.Get through the cache.
func (c *Cache) Get(ctx context.Context, route Route, accept Accept) (Response, []Source, error) {
	return c.do(ctx, "\x00"+route.Path, route, func(ctx context.Context) (Response, []Source, error) {
		return c.next.Get(ctx, route, accept)
	})
}

// GetFrom is Pool.GetFrom through the cache.
func (c *Cache) GetFrom(ctx context.Context, base string, route Route, accept Accept) (Response, Source, error) {
	resp, sources, err := c.do(ctx, base+route.Path, route, func(ctx context.Context) (Response, []Source, error) {
		resp, src, err := c.next.GetFrom(ctx, base, route, accept)
		return resp, []Source{src}, err
	})
	return resp, sources[0], err
}

// do answers key from the cache, or from a call shared with every
// concurrent caller of the same key. The caller's sources are a copy:
// callers append to them and set ages on them.
func (c *Cache) do(ctx context.Context, key string, route Route, call func(context.Context) (Response, []Source, error)) (Response, []Source, error) {
	if !route.Fresh {
		if resp, sources, ok := c.lookup(key); ok {
			c.cfg.Observer.Lookup(route.Template, LookupHit)
			return resp, sources, nil
		}
	}
	led := false // this caller's function made the call; read after the answer
	ch := c.group.DoChan(key, func() (any, error) {
		led = true
		// The call outlives the request that started it, which
		// others may be waiting on.
		shared, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
		if c.cfg.Shared > 0 {
			shared, cancel = context.WithTimeout(shared, c.cfg.Shared)
		}
		defer cancel()
		resp, sources, err := call(shared)
		if err == nil {
			resp.Kept = c.keep(key, entry{resp: resp, sources: sources, at: c.now()})
		}
		return result{resp, sources}, err
	})
	select {
	case r := <-ch:
		outcome := LookupShared
		if led {
			outcome = LookupMiss
		}
		c.cfg.Observer.Lookup(route.Template, outcome)
		res := r.Val.(result)
		return res.resp, append([]Source(nil), res.sources...), r.Err
	case <-ctx.Done():
		c.cfg.Observer.Lookup(route.Template, LookupMiss)
		src := Source{Route: route.Path, Error: "request ended: " + ctx.Err().Error()}
		return Response{}, []Source{src}, &attemptError{kind: ErrUnavailable, reason: src.Error}
	}
}

func (c *Cache) lookup(key string) (Response, []Source, bool) {
	if c.cfg.TTL <= 0 {
		return Response{}, nil, false
	}
	c.mu.Lock()
	e, ok := c.kept[key]
	c.mu.Unlock()
	age := c.now().Sub(e.at)
	if !ok || age >= c.cfg.TTL {
		return Response{}, nil, false
	}
	sources := append([]Source(nil), e.sources...)
	for i := range sources {
		sources[i].CacheAgeMs = age.Milliseconds()
	}
	resp := e.resp
	resp.Kept = Version{Key: key, Seq: e.seq}
	return resp, sources, true
}

// Age is the age of the kept answer v names; false once it has expired or
// been replaced, so that what was derived from it is derived again.
func (c *Cache) Age(v Version) (time.Duration, bool) {
	if v.Seq == 0 || c.cfg.TTL <= 0 {
		return 0, false
	}
	c.mu.Lock()
	e, ok := c.kept[v.Key]
	c.mu.Unlock()
	age := c.now().Sub(e.at)
	return age, ok && e.seq == v.Seq && age < c.cfg.TTL
}

// keep stores an answer and returns its version (none when nothing is
// kept). When the cache is full the expired answers go first, then any
// one: the bound matters more than which answer is lost.
func (c *Cache) keep(key string, e entry) Version {
	if c.cfg.TTL <= 0 {
		return Version{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	e.seq = c.seq
	if _, ok := c.kept[key]; !ok && len(c.kept) >= c.cfg.Entries {
		now := c.now()
		for k, old := range c.kept {
			if now.Sub(old.at) >= c.cfg.TTL {
				delete(c.kept, k)
			}
		}
		for k := range c.kept {
			if len(c.kept) < c.cfg.Entries {
				break
			}
			delete(c.kept, k)
		}
	}
	c.kept[key] = e
	return Version{Key: key, Seq: e.seq}
}

// Len is the number of answers kept, expired ones included until they are
// replaced or swept.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.kept)
}
