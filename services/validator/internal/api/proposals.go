package api

import (
	"bytes"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
)

func (s *Server) proposeWrite(c echo.Context) error { return s.propose(c, proposal.ParseWrite) }

func (s *Server) proposeDelete(c echo.Context) error { return s.propose(c, proposal.ParseDelete) }

func (s *Server) propose(c echo.Context, parse func(url.Values, proposal.Options) (*proposal.Submission, error)) error {
	if err := s.limitIP(c); err != nil {
		return err
	}
	if handled, err := s.forward(c); handled {
		return err
	}
	ctx := pipeline.WithClient(c.Request().Context(), s.clientKey(c))
	if err := s.deps.Proposals.RefuseImpatient(ctx, int(max(c.Request().ContentLength, 0))); err != nil {
		return err
	}
	form, err := s.readForm(c, func(body string) error {
		if id, ok := proposal.ScanID(body); ok {
			return s.deps.Proposals.RefuseEarly(ctx, id, len(body))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sub, err := parse(form, s.cfg.Form)
	if err != nil {
		return err
	}
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	status, created, err := s.deps.Proposals.Submit(ctx, sub)
	if err != nil {
		return err
	}
	// ?wait= holds the answer until the proposal is decided or the time is
	// up, so a client needs one request instead of a submit and a poll.
	if deadline := time.Now().Add(wait); wait > 0 {
		for !api.Terminal(status.Status) && time.Until(deadline) > 0 && c.Request().Context().Err() == nil {
			if status, err = s.deps.Proposals.WaitStatus(c.Request().Context(), sub.ProposalID, time.Until(deadline)); err != nil {
				return err
			}
		}
	}
	if !created {
		return c.JSON(http.StatusOK, status)
	}
	return c.JSON(http.StatusAccepted, api.Receipt{
		ProposalID: status.ProposalID,
		Status:     status.Status,
		Path:       status.Path,
		Links:      api.Links{Status: api.StatusLink(status.ProposalID)},
	})
}

// fromLeader answers with the leader's view: a follower forwards, and
// answers with its own only when no leader is known.
func (s *Server) fromLeader(c echo.Context, local func() any) error {
	if handled, err := s.forward(c); handled && err == nil {
		return nil
	}
	return c.JSON(http.StatusOK, local())
}

func (s *Server) releaseFlow(c echo.Context) error {
	return s.fromLeader(c, func() any { return s.deps.Proposals.ReleaseFlow() })
}

func (s *Server) explorerReleaseFlow(c echo.Context) error {
	return s.fromLeader(c, func() any {
		f := s.deps.Proposals.ReleaseFlow()
		f.ContractVersion = api.ExplorerReleaseFlowVersion
		return f
	})
}

func (s *Server) epochOverlay(c echo.Context) error {
	return s.fromLeader(c, func() any { return s.deps.Proposals.EpochOverlay() })
}

// explorerEpochs is deprecated: it points to its successor.
func (s *Server) explorerEpochs(c echo.Context) error {
	const successor = "/v1/explorer/release-flow"
	c.Response().Header().Set("Deprecation", "true")
	c.Response().Header().Set("Link", "<"+successor+`>; rel="successor-version"`)
	return c.JSON(http.StatusOK, map[string]any{
		"contractVersion": api.ExplorerEpochsVersion, "deprecated": true, "successor": successor,
		"message": "deprecated: epoch release is reported by " + successor + "; per-epoch counts by /v1/proposals/epochs",
	})
}

// limitIP applies the per-address limit where a proposal first arrives. A
// request a member forwarded was counted on that member, against its
// client's address; it is recognised by the forwarding header coming from
// that member's own address, so a client cannot skip the limit by setting
// the header.
func (s *Server) limitIP(c echo.Context) error {
	if s.cfg.IPLimiter == nil {
		return nil
	}
	ip := c.RealIP()
	if by := c.Request().Header.Get(forwardedHeader); by != "" && s.isMemberAddress(by, ip) {
		return nil
	}
	// Counted by client key: an IPv6 client has one budget for its /64.
	if ok, err := s.cfg.IPLimiter.Allow(httpserver.KeyOfAddr(ip)); err != nil || !ok {
		return apierror.New(apierror.RateLimited, "too many proposals and registrations from %s; retry shortly", ip)
	}
	return nil
}

// clientKey names the client of a request for the bounds kept per client:
// its address's key (IPv6: the /64), or, on a request a member forwarded,
// the key that member sent along.
func (s *Server) clientKey(c echo.Context) string {
	ip := c.RealIP()
	if by := c.Request().Header.Get(forwardedHeader); by != "" && s.isMemberAddress(by, ip) {
		if client := c.Request().Header.Get(forwardedClientHeader); client != "" {
			return client
		}
	}
	return httpserver.KeyOfAddr(ip)
}

// isMemberAddress reports whether ip is an address of the member whose id
// is the decimal id, as its API URL names it.
func (s *Server) isMemberAddress(id, ip string) bool {
	for _, m := range s.deps.Cluster.Members() {
		if strconv.FormatUint(m.ID, 10) != id {
			continue
		}
		u, err := url.Parse(m.APIURL)
		if err != nil {
			return false
		}
		addrs, err := s.resolve(u.Hostname())
		return err == nil && slices.Contains(addrs, ip)
	}
	return false
}

// readForm reads a url-encoded body of bounded size. URL query parameters are
// not form fields: a signed field must come from the body.
//
// It does what Request.ParseForm does for this request, and answers the
// same errors, without the work intake has no use for: parsing the media
// type when it is exactly the one clients send, and merging body and query
// into Request.Form. screen, when set, sees the encoded body before it is
// decoded and may refuse it (intake's early refusal, ADR 0030).
func (s *Server) readForm(c echo.Context, screen func(body string) error) (url.Values, error) {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != echo.MIMEApplicationForm {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != echo.MIMEApplicationForm {
			return nil, apierror.New(apierror.InvalidField, "content type must be application/x-www-form-urlencoded").
				WithDetail("field", "Content-Type")
		}
	}
	limit := s.formLimit()
	if e := httpserver.LimitBody(c.Response(), req, limit); e != nil {
		return nil, e
	}
	// The buffer grows with what arrives, never from the declared length:
	// a client declaring a large body and sending a trickle holds no more
	// memory than it sent. The server's read timeout cuts a trickle.
	var body bytes.Buffer
	if _, err := body.ReadFrom(req.Body); err != nil {
		if httpserver.IsTooLarge(err) {
			return nil, httpserver.TooLarge(limit)
		}
		return nil, apierror.New(apierror.InvalidField, "form does not parse: %v", err)
	}
	raw := body.String()
	if screen != nil {
		if err := screen(raw); err != nil {
			return nil, err
		}
	}
	form, err := url.ParseQuery(raw)
	if err == nil && req.URL.RawQuery != "" {
		// ParseForm refused a malformed query string too; so do we.
		_, err = url.ParseQuery(req.URL.RawQuery)
	}
	if err != nil {
		return nil, apierror.New(apierror.InvalidField, "form does not parse: %v", err)
	}
	return form, nil
}

func (s *Server) proposalStatus(c echo.Context) error {
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	status, handled, err := s.lookupProposal(c, wait)
	if handled || err != nil {
		return err
	}
	return c.JSON(http.StatusOK, status)
}

// queueStats serves /v1/proposals/queue/stats. The queue is the leader's:
// a follower forwards to it, and answers with its own (empty) pipeline only
// when no leader is known, so the route keeps answering during an election.
func (s *Server) queueStats(c echo.Context) error {
	return s.fromLeader(c, func() any { return s.deps.Proposals.QueueStats() })
}

// pendingCount serves /v1/proposals/pending/count: proposals accepted and
// not yet applied, from the leader like queueStats.
func (s *Server) pendingCount(c echo.Context) error {
	return s.fromLeader(c, func() any {
		n := 0
		for _, v := range s.deps.Proposals.QueueStats().ProposalsByEpoch {
			n += v
		}
		return api.PendingCount{ContractVersion: api.PendingCountVersion, Pending: n}
	})
}

// waitParam reads ?wait=, a duration capped at MaxStatusWait.
func (s *Server) waitParam(c echo.Context) (time.Duration, error) {
	w := c.QueryParam("wait")
	if w == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(w)
	if err != nil || d < 0 {
		return 0, apierror.Field("wait", "must be a duration such as 30s")
	}
	return min(d, s.cfg.MaxStatusWait), nil
}
