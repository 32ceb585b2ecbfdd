package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// deepHealth answers /health/deep. /health says what the node believes of
// itself from figures it already has; /health/deep asks each part it
// depends on, now, each within deepProbeTimeout: a synced write to Pebble's
// WAL (a log-data record, which no key holds), a read of applied state,
// raft's leader, the peer streams (a quorum must be reachable), and, where
// used, the NATS server's payment stream, the chain-watcher's status and
// the IPFS gateway. The probes run concurrently; an answer is reused for
// deepHealthReuse, so that a load balancer polling it cannot turn the
// probes (an fsync among them) into load.
type deepHealth struct {
	cfg     Config
	db      *storage.DB
	node    *consensus.Node
	machine *state.Machine
	peers   *transport.Transport
	js      jetstream.JetStream   // nil: payments not verified (MOCK)
	chain   *payments.ChainStatus // nil: no chain-watcher (MOCK)
	gateway *blobgateway.Checker  // nil: no gateway configured
	now     func() time.Time

	mu   sync.Mutex
	last *api.DeepHealth
}

const (
	// deepProbeTimeout bounds each probe.
	deepProbeTimeout = 2 * time.Second
	// deepHealthReuse is how long an answer is served again.
	deepHealthReuse = time.Second
	// chainStatusStale is the age past which the chain-watcher's status
	// counts as stopped: it publishes at least every 30 s while it runs
	// (chain-watcher DESIGN, status).
	chainStatusStale = 90 * time.Second
)

// walProbe is the log-data record the WAL probe writes; recovery skips it.
var walProbe = []byte("contentledger health probe")

func (h *deepHealth) register(e *echo.Echo) { e.GET("/health/deep", h.serve) }

func (h *deepHealth) serve(c echo.Context) error {
	out := h.check(c.Request().Context())
	code := http.StatusOK
	if out.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	return c.JSON(code, out)
}

// probe is one check: it returns what it found, or an error.
type probe func(ctx context.Context) (string, error)

// check runs every probe, or returns the last answer while it is recent.
func (h *deepHealth) check(ctx context.Context) api.DeepHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && h.now().Sub(h.last.CheckedAt) < deepHealthReuse {
		return *h.last
	}
	probes := map[string]probe{"wal": h.wal, "state": h.state, "raft": h.raft, "peers": h.quorum}
	if h.js != nil {
		probes["nats"] = h.stream
	}
	if h.chain != nil {
		probes["chain"] = h.chainStatus
	}
	if h.gateway != nil {
		probes["gateway"] = h.ipfsGateway
	}
	start := h.now()
	out := api.DeepHealth{Status: "ok", NodeID: h.cfg.NodeID, CheckedAt: start, Checks: make(map[string]api.DeepCheck, len(probes))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range probes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, deepProbeTimeout)
			defer cancel()
			t0 := h.now()
			detail, err := runProbe(pctx, p)
			check := api.DeepCheck{Status: "ok", Detail: detail, LatencyMs: ms(h.now().Sub(t0))}
			if err != nil {
				check.Status, check.Detail = "failing", err.Error()
			}
			mu.Lock()
			out.Checks[name] = check
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, c := range out.Checks {
		if c.Status != "ok" {
			out.Status = "unavailable"
		}
	}
	out.TookMs = ms(h.now().Sub(start))
	if ctx.Err() == nil { // an answer cut short by the client says nothing
		h.last = &out
	}
	return out
}

// runProbe runs p, giving up when ctx ends even if p does not (a write
// stalled in the WAL cannot be interrupted).
func runProbe(ctx context.Context, p probe) (string, error) {
	type result struct {
		detail string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		d, err := p(ctx)
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		return r.detail, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("no answer within %s", deepProbeTimeout)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (h *deepHealth) wal(context.Context) (string, error) {
	if err := h.db.Pebble().LogData(walProbe, pebble.Sync); err != nil {
		return "", fmt.Errorf("synced WAL write: %w", err)
	}
	return "synced WAL write", nil
}

func (h *deepHealth) state(context.Context) (string, error) {
	view, err := h.machine.ReadView()
	if err != nil {
		return "", fmt.Errorf("reading applied state: %w", err)
	}
	defer view.Close()
	return fmt.Sprintf("applied index %d readable", view.AppliedIndex()), nil
}

func (h *deepHealth) raft(context.Context) (string, error) {
	st := h.node.Status()
	detail := fmt.Sprintf("role %s, term %d, leader %d, commit %d, applied %d", st.Role, st.Term, st.Leader, st.CommitIndex, st.AppliedIndex)
	if st.Leader == 0 {
		return "", errors.New("no leader known: " + detail)
	}
	return detail, nil
}

// quorum checks that this node reaches a majority of the voters it knows,
// counting itself: a stream in either direction counts.
func (h *deepHealth) quorum(context.Context) (string, error) {
	stats := h.peers.Stats()
	reachable := 1
	for _, s := range stats {
		if s.Connected || s.InboundConnected {
			reachable++
		}
	}
	members := len(stats) + 1
	detail := fmt.Sprintf("%d of %d members reachable (this one included)", reachable, members)
	if reachable < members/2+1 {
		return "", errors.New("no quorum: " + detail)
	}
	return detail, nil
}

func (h *deepHealth) stream(ctx context.Context) (string, error) {
	s, err := h.js.Stream(ctx, h.cfg.PaymentStream)
	if err != nil {
		return "", fmt.Errorf("JetStream stream %s: %w", h.cfg.PaymentStream, err)
	}
	info := s.CachedInfo()
	return fmt.Sprintf("stream %s: %d messages, last sequence %d", h.cfg.PaymentStream, info.State.Msgs, info.State.LastSeq), nil
}

func (h *deepHealth) chainStatus(context.Context) (string, error) {
	s, at, ok := h.chain.Latest()
	if !ok {
		return "", errors.New("no status from the chain-watcher yet")
	}
	age := h.now().Sub(at).Round(time.Millisecond)
	cursor := "none yet"
	if s.Cursor != nil {
		cursor = fmt.Sprint(s.Cursor.Number)
	}
	detail := fmt.Sprintf("chain-watcher status received %s ago: head %d, cursor %s", age, s.Head.Number, cursor)
	if age > chainStatusStale {
		return "", fmt.Errorf("the chain-watcher's status is older than %s: %s", chainStatusStale, detail)
	}
	return detail, nil
}

func (h *deepHealth) ipfsGateway(ctx context.Context) (string, error) {
	c := h.gateway.CheckNow(ctx)
	if !c.OK {
		return "", fmt.Errorf("IPFS gateway %s: %s", h.gateway.URL(), c.Err)
	}
	return fmt.Sprintf("IPFS gateway %s answered %d", h.gateway.URL(), c.StatusCode), nil
}
