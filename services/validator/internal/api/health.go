package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
)

// The health routes. /health (and /health/local) says what the node
// believes of itself from figures it already has; /health/deep asks each
// part it depends on, now. Neither takes a token, so that load balancers,
// orchestrators and monitoring need no secret; without a token of the
// ops-read lane they show statuses only (below).

// What a validator does over a NATS connection (api.NATSConnection.Uses).
const (
	NATSUsePayments    = "payments"
	NATSUseChainStatus = "chainStatus"
	NATSUseEvents      = "events"
	NATSUseStreams     = "streams"
)

// NATSClient is one of the validator's NATS connections and what it is
// used for.
type NATSClient struct {
	Conn *nats.Conn
	Uses []string
}

// PaymentIndex is the payment index's figures (payments.Index).
type PaymentIndex interface {
	Stats() payments.Stats
}

// Probe checks one part of the validator now: what it found, or why it
// fails. /health/deep gives each probe deepProbeTimeout.
type Probe func(ctx context.Context) (string, error)

// natsClient returns the first connection used for use.
func (s *Server) natsClient(use string) (*nats.Conn, bool) {
	for _, c := range s.deps.NATS {
		if slices.Contains(c.Uses, use) {
			return c.Conn, true
		}
	}
	return nil, false
}

func check(ok bool, detail string) map[string]any {
	status := "ok"
	if !ok {
		status = "failing"
	}
	return map[string]any{"status": status, "detail": detail}
}

// health is the body of /health.
func (s *Server) health() map[string]any {
	st := s.deps.Cluster.Status()
	checks := map[string]any{
		"storage": check(true, "pebble open at "+s.cfg.DataDir),
		"raft":    check(st.Leader != 0, fmt.Sprintf("role %s, term %d, leader %d", st.Role, st.Term, st.Leader)),
	}
	if nc, ok := s.natsClient(NATSUsePayments); ok {
		connected := nc.IsConnected()
		checks["nats"] = check(connected, "connection "+nc.Status().String())
		ps := s.deps.PaymentIndex.Stats()
		checks["chain"] = check(connected, fmt.Sprintf("%d payments and %d debt payments indexed from %d messages; %d payments retracted by reorgs",
			ps.Indexed, ps.Debts, ps.Observed, ps.Retracted))
	} else {
		checks["nats"] = check(true, "not used in MOCK mode")
		if nc, ok := s.natsClient(NATSUseEvents); ok { // MOCK with NATS_EVENTS=on: events only
			checks["nats"] = check(nc.IsConnected(), "event publication connection "+nc.Status().String())
		}
		checks["chain"] = check(true, "payments not verified in MOCK mode")
	}
	status := "ok"
	for _, c := range checks {
		if c.(map[string]any)["status"] != "ok" {
			status = "unavailable"
		}
	}
	return map[string]any{
		"status":       status,
		"nodeId":       st.NodeID,
		"clusterId":    st.ClusterID,
		"mode":         s.cfg.Blockchain.Mode,
		"version":      s.cfg.Version,
		"role":         st.Role,
		"term":         st.Term,
		"leader":       st.Leader,
		"commitIndex":  st.CommitIndex,
		"appliedIndex": st.AppliedIndex,
		"stateHash":    st.StateHash,
		"checks":       checks,
	}
}

func (s *Server) getHealth(c echo.Context) error {
	body := s.health()
	code := http.StatusOK
	if body["status"] != "ok" {
		code = http.StatusServiceUnavailable
	}
	if !s.opsReader(c) {
		body = publicHealth(body)
	}
	return c.JSON(code, body)
}

const (
	// deepProbeTimeout bounds each probe.
	deepProbeTimeout = 2 * time.Second
	// deepHealthReuse is how long a /health/deep answer is served again,
	// so that a load balancer polling it cannot turn the probes (an fsync
	// among them) into load.
	deepHealthReuse = time.Second
)

// deepHealth runs the probes of /health/deep concurrently and keeps the
// last answer for deepHealthReuse.
type deepHealth struct {
	mu   sync.Mutex
	last *api.DeepHealth
}

func (s *Server) getDeepHealth(c echo.Context) error {
	out := s.deepCheck(c.Request().Context())
	code := http.StatusOK
	if out.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	if !s.opsReader(c) {
		out = publicDeepHealth(out)
	}
	return c.JSON(code, out)
}

// deepCheck runs every probe, or returns the last answer while it is
// recent.
func (s *Server) deepCheck(ctx context.Context) api.DeepHealth {
	h := &s.deepHealth
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && s.now().Sub(h.last.CheckedAt) < deepHealthReuse {
		return *h.last
	}
	start := s.now()
	out := api.DeepHealth{Status: "ok", NodeID: s.cfg.NodeID, CheckedAt: start, Checks: make(map[string]api.DeepCheck, len(s.deps.Probes))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range s.deps.Probes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, deepProbeTimeout)
			defer cancel()
			t0 := s.now()
			detail, err := runProbe(pctx, p)
			check := api.DeepCheck{Status: "ok", Detail: detail, LatencyMs: ms(s.now().Sub(t0))}
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
	out.TookMs = ms(s.now().Sub(start))
	if ctx.Err() == nil { // an answer cut short by the client says nothing
		h.last = &out
	}
	return out
}

// runProbe runs p, giving up when ctx ends even if p does not (a write
// stalled in the WAL cannot be interrupted).
func runProbe(ctx context.Context, p Probe) (string, error) {
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

// The public routes (/health*, the open snapshots) answer everyone, so a
// caller the ops-read lane does not admit gets what a load balancer needs
// and no more: the status and each check's status, without ids, terms,
// addresses, paths or figures. A token of the ops-read lane (or an open
// lane) gets the full view.

// publicViewGaps are the gaps a reduced view names.
func publicViewGaps() []api.Gap {
	return []api.Gap{{Field: "*", Reason: "the full view needs a token of the ops-read lane"}}
}

// publicHealth reduces /health's body to statuses.
func publicHealth(full map[string]any) map[string]any {
	checks := map[string]any{}
	for name, c := range full["checks"].(map[string]any) {
		checks[name] = map[string]any{"status": c.(map[string]any)["status"]}
	}
	return map[string]any{"status": full["status"], "checks": checks}
}

// publicDeepHealth reduces /health/deep's body to statuses.
func publicDeepHealth(full api.DeepHealth) api.DeepHealth {
	out := api.DeepHealth{Status: full.Status, CheckedAt: full.CheckedAt, TookMs: full.TookMs, Checks: map[string]api.DeepCheck{}}
	for name, c := range full.Checks {
		out.Checks[name] = api.DeepCheck{Status: c.Status}
	}
	return out
}
