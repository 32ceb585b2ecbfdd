package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// The GC proposal lifecycle routes (docs/adr/0033, "Lifecycle routes"):
// an operator's forced compaction and the one-shot arming of the leader's
// trigger (operator lane, forwarded to the leader), each validator's result
// of the runs it applied (/v1/gc/vote) and their text log (/gc.log).

// Compactions is the leader's GC proposal manager (pipeline.Compactions).
type Compactions interface {
	// Propose proposes the compaction of the finalized epoch now, whatever
	// the garbage, and waits up to wait for it to be applied; a run of
	// that epoch already applied is a gc_refused error naming it.
	Propose(ctx context.Context, wait time.Duration) (api.GcProposal, error)
	// Arm has the leader propose a compaction at the next epoch
	// finalization whatever the garbage, once.
	Arm() (api.GcTrigger, error)
}

// proposeGc serves POST /v1/propose-gc and POST /v1/gc/execute with the
// body {} or {"wait": "30s"} (at most MaxStatusWait): 202 with the
// proposal while it is not applied, 200 with its run once it is. Cleanup
// is part of the compaction entry (generations below N-1 are deleted by
// the same run), so "execute" has nothing of its own to run: the two paths
// are one route.
func (s *Server) proposeGc(c echo.Context) error {
	var body struct {
		Wait string `json:"wait"`
	}
	if err := s.jsonObject(c, &body); err != nil {
		return err
	}
	var wait time.Duration
	if body.Wait != "" {
		d, err := time.ParseDuration(body.Wait)
		if err != nil || d < 0 {
			return apierror.Field("wait", "must be a duration such as 30s: how long to wait for the run to be applied")
		}
		wait = min(d, s.cfg.MaxStatusWait)
	}
	if handled, err := s.forward(c); handled {
		return err
	}
	out, err := s.deps.Compactions.Propose(c.Request().Context(), wait)
	if err != nil {
		return err
	}
	if out.State == api.GcProposalApplied {
		return c.JSON(http.StatusOK, out)
	}
	return c.JSON(http.StatusAccepted, out)
}

// gcTrigger serves POST /v1/gc/trigger with the body {}: 202 with the
// leader's arming.
func (s *Server) gcTrigger(c echo.Context) error {
	if err := s.jsonObject(c, &struct{}{}); err != nil {
		return err
	}
	if handled, err := s.forward(c); handled {
		return err
	}
	out, err := s.deps.Compactions.Arm()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}

// gcVote serves GET /v1/gc/vote[?runs=N]: this validator's result of each
// of the newest runs, from its own applied state (never forwarded: the
// edge compares validators).
func (s *Server) gcVote(c echo.Context) error {
	runs, err := gcRunsParam(c)
	if err != nil {
		return err
	}
	out, err := s.deps.Segments.GcVotes(runs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// gcLog serves GET /gc.log[?runs=N]: plain text, a line per phase of each
// of the newest runs, oldest first; X-Applied-Index names the state read.
func (s *Server) gcLog(c echo.Context) error {
	runs, err := gcRunsParam(c)
	if err != nil {
		return err
	}
	log, err := s.deps.Segments.GcLog(runs)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Applied-Index", strconv.FormatUint(log.AppliedIndex, 10))
	var b strings.Builder
	for _, line := range log.Lines {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return c.String(http.StatusOK, b.String())
}

// gcRunsParam reads ?runs=, the newest GC runs shown: 1 to api.MaxGcRuns,
// api.DefaultGcRuns when absent.
func gcRunsParam(c echo.Context) (int, error) {
	values, given := c.QueryParams()["runs"]
	if !given {
		return api.DefaultGcRuns, nil
	}
	n, err := strconv.Atoi(values[0])
	if len(values) != 1 || err != nil || n < 1 || n > api.MaxGcRuns {
		return 0, apierror.Field("runs", "must be one integer from 1 to %d: the newest GC runs shown", api.MaxGcRuns)
	}
	return n, nil
}
