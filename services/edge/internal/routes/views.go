package routes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ops"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// A view is a function of its source answers and its parameters. While
// every answer it was composed of is still kept unchanged by the upstream
// cache, composing it again would give the same data: the edge keeps the
// data, encoded, and renders only the envelope (generatedAt) and
// data.sources[] (their cacheAgeMs) per request. Decoding the source
// answers and encoding the view are then paid once per answer kept, not
// once per request.

// dep is one kept answer a view read: its version, and its attempts among
// the view's sources (from, to).
type dep struct {
	kept     upstream.Version
	from, to int
}

// view is a composed view as it is kept.
type view struct {
	// data is the encoded data object without its sources member.
	data    []byte
	sources []upstream.Source
	deps    []dep
	// encoded are the sources encoded, each split where its cacheAgeMs
	// goes: only the ages change from one request to the next.
	encoded [][2][]byte
	// leader is the leader the view's leader reads went to, when it
	// made any (usedLeader): another leader makes it another view.
	leader     string
	usedLeader bool
}

// viewCache keeps composed views by route and query, and lets one request
// compose a view while the others asking for it wait.
type viewCache struct {
	entries int

	mu       sync.Mutex
	kept     map[string]*view
	building map[string]*building
}

// building is a view being composed; kept is set before done closes.
type building struct {
	done chan struct{}
	kept bool
}

func newViewCache(entries int) *viewCache {
	return &viewCache{entries: max(1, entries), kept: map[string]*view{}, building: map[string]*building{}}
}

// begin returns whether the caller composes key; when another does, its
// done closes once it has finished.
func (vc *viewCache) begin(key string) (b *building, lead bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if b, ok := vc.building[key]; ok {
		return b, false
	}
	b = &building{done: make(chan struct{})}
	vc.building[key] = b
	return b, true
}

func (vc *viewCache) end(key string, b *building, kept bool) {
	vc.mu.Lock()
	delete(vc.building, key)
	vc.mu.Unlock()
	b.kept = kept
	close(b.done)
}

func (vc *viewCache) get(key string) *view {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return vc.kept[key]
}

// put keeps v. When full, the views that can no longer be served go
// first, then any: the bound matters more than which view is lost.
func (vc *viewCache) put(key string, v *view, current func(*view) bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if _, ok := vc.kept[key]; !ok && len(vc.kept) >= vc.entries {
		for k, old := range vc.kept {
			if !current(old) {
				delete(vc.kept, k)
			}
		}
		for k := range vc.kept {
			if len(vc.kept) < vc.entries {
				break
			}
			delete(vc.kept, k)
		}
	}
	vc.kept[key] = v
}

// viewKey is the route and query of a request: the view's parameters.
func viewKey(c echo.Context) string {
	u := c.Request().URL
	if u.RawQuery == "" {
		return u.Path // no copy: most views take no parameter
	}
	return u.Path + "?" + u.RawQuery
}

// serveView answers from the kept view when every answer it was composed of
// is still kept; otherwise one request composes it (serve) while concurrent
// requests for the same view wait and then use what it kept.
func (s *server) serveView(c echo.Context, serve echo.HandlerFunc) error {
	key := viewKey(c)
	route := s.templates[c.Path()]
	composed := func() error {
		s.cfg.Metrics.View(route, "composed")
		return serve(c)
	}
	// A view kept and already out of date (an answer it read expired
	// while another was being fetched) is composed again by one of the
	// waiting requests; a few rounds at most, so that a source that
	// keeps changing costs latency, not an unbounded wait.
	for range 4 {
		if s.replay(c, key) {
			s.cfg.Metrics.View(route, "kept")
			return nil
		}
		b, lead := s.views.begin(key)
		if lead {
			err := composed()
			kept, _ := c.Get(keptKey).(bool)
			s.views.end(key, b, kept)
			return err
		}
		select {
		case <-b.done:
		case <-c.Request().Context().Done():
			return composed()
		}
		if !b.kept {
			break
		}
	}
	if s.replay(c, key) {
		s.cfg.Metrics.View(route, "kept")
		return nil
	}
	// The view could not be kept (an error, a failed attempt, the time
	// of the request in it): compose it for this request too.
	return composed()
}

// keptKey marks a request whose view was kept.
const keptKey = "edge.kept"

// replay answers with the kept view of key when it is current.
func (s *server) replay(c echo.Context, key string) bool {
	v := s.views.get(key)
	if v == nil {
		return false
	}
	ages, ok := s.current(v)
	if !ok {
		return false
	}
	err := s.renderEncoded(c, v.data, func(b []byte) []byte {
		b = append(b, '[')
		for i, e := range v.encoded {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, e[0]...)
			b = strconv.AppendInt(b, ages[i], 10)
			b = append(b, e[1]...)
		}
		return append(b, ']')
	})
	if err != nil {
		s.log.Debug("writing a kept view", zap.Error(err))
	}
	return true
}

// current reports whether v can still be served: every answer it read is
// kept unchanged and its leader is still the leader. The ages are its
// sources' cacheAgeMs now.
func (s *server) current(v *view) ([]int64, bool) {
	if v.usedLeader {
		if url, ok := s.leader.get(time.Now()); !ok || url != v.leader {
			return nil, false
		}
	}
	ages := make([]int64, len(v.sources))
	for _, d := range v.deps {
		age, ok := s.up.Age(d.kept)
		if !ok {
			return nil, false
		}
		for i := d.from; i < d.to; i++ {
			ages[i] = age.Milliseconds()
		}
	}
	return ages, true
}

// encodeSources encodes each source as upstream.Source encodes, split at
// its cacheAgeMs value.
func encodeSources(sources []upstream.Source) ([][2][]byte, error) {
	const mark = `"cacheAgeMs":`
	out := make([][2][]byte, len(sources))
	for i, src := range sources {
		src.CacheAgeMs = 0
		b, err := json.Marshal(src)
		if err != nil {
			return nil, err
		}
		at := bytes.Index(b, []byte(mark+"0"))
		if at < 0 {
			return nil, fmt.Errorf("encoded source without %s: %s", mark, b)
		}
		at += len(mark)
		out[i] = [2][]byte{b[:at], b[at+1:]}
	}
	return out, nil
}

// compose encodes data, keeps it as a view when the reader read nothing
// but kept answers, and answers with it.
func (s *server) compose(c echo.Context, r *reader, data map[string]any) error {
	sources := r.attempts()
	// data.sources[] is the reader's attempts in every view; a view that
	// reports something else is answered as it is.
	if got, ok := data["sources"].([]upstream.Source); !ok || len(got) != len(sources) {
		return c.JSON(http.StatusOK, ops.NewEnvelope(s.cfg.Now(), s.cfg.ClusterID, data))
	}
	delete(data, "sources")
	encoded, err := json.Marshal(data)
	if err != nil {
		return err
	}
	r.mu.Lock()
	cacheable := !r.volatile
	kept := append([]upstream.Source(nil), r.sources...)
	deps := r.deps
	r.mu.Unlock()
	// A leader that is not kept (LEADER_REFRESH=0, or a failed read of
	// it) is asked again by the next request: a view of it cannot be
	// served again.
	if cacheable && r.usedLeader {
		url, ok := s.leader.get(time.Now())
		cacheable = ok && url == r.leader
	}
	if cacheable {
		// Without the attempts at the leader's identity: a request
		// answered from the view does not make them. The view is served
		// while the leader it used is still the leader the edge keeps.
		v := &view{data: encoded, sources: kept, deps: deps, leader: r.leader, usedLeader: r.usedLeader}
		if v.encoded, err = encodeSources(kept); err != nil {
			return err
		}
		c.Set(keptKey, true)
		s.views.put(viewKey(c), v, func(old *view) bool { _, ok := s.current(old); return ok })
	}
	return s.render(c, encoded, sources)
}

// render writes the ops envelope of data (an encoded object without its
// sources) and sources, as ops.Envelope encodes it.
func (s *server) render(c echo.Context, data []byte, sources []upstream.Source) error {
	src, err := json.Marshal(sources)
	if err != nil {
		return err
	}
	return s.renderEncoded(c, data, func(b []byte) []byte { return append(b, src...) })
}

// maxKeptBody bounds the answer buffers kept for reuse: one large answer
// (a wallet's 50 items) must not pin its buffer for good.
const maxKeptBody = 256 << 10

// renderEncoded is render with the sources appended by appendSources.
func (s *server) renderEncoded(c echo.Context, data []byte, appendSources func([]byte) []byte) error {
	bp, _ := s.bodies.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := append((*bp)[:0], s.envelopeHead...)
	b = s.cfg.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, s.envelopeMid...)
	b = append(b, data[:len(data)-1]...)
	if len(data) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"sources":`...)
	b = appendSources(b)
	b = append(b, "}}\n"...)
	// With its length known the body goes in one piece, not chunked.
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	// The response copies the body before JSONBlob returns (into its
	// buffered writer, or straight to the connection), so b is free again.
	err := c.JSONBlob(http.StatusOK, b)
	if cap(b) <= maxKeptBody {
		*bp = b
		s.bodies.Put(bp)
	}
	return err
}

// envelopeParts pre-encodes what surrounds generatedAt in every envelope.
func envelopeParts(clusterID string) (head, mid []byte) {
	version, _ := json.Marshal(ops.Version)
	head = append(append([]byte(`{"version":`), version...), `,"generatedAt":"`...)
	mid = []byte(`"`)
	if clusterID != "" { // omitempty, as in ops.Envelope
		id, _ := json.Marshal(clusterID)
		mid = append(append(mid, `,"clusterId":`...), id...)
	}
	return head, append(mid, `,"data":`...)
}
