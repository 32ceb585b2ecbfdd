package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/eventpub"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
)

// The event routes: the replicated event log as Server-Sent Events
// (internal/events), its publication to NATS (internal/eventpub), and this
// validator's own operational events (internal/opsevents), listed and
// streamed.

// EventStreams serves an event log as Server-Sent Events (events.Hub): the
// replicated event log, or this validator's operational events.
type EventStreams interface {
	// Handler returns the stream route; its streams count against the
	// budget of streams per client the validator's stream routes share.
	Handler() http.Handler
}

// EventPublisher is the leader's publication of the event log to NATS.
type EventPublisher interface {
	// PublisherStatus is how far publication got and the state of its NATS
	// connection; nil when this validator does not publish.
	PublisherStatus() (status *eventpub.Status, nats string)
}

// OpsEvents are this validator's operational events (opsevents.Recorder).
type OpsEvents interface {
	// Recent returns up to limit events, newest first, and the id of the
	// newest recorded.
	Recent(limit int) ([]opsevents.Event, uint64)
	// Capacity is how many events are kept.
	Capacity() int
	Stats() opsevents.Stats
}

// PublisherStatus is the body of GET /v1/events/publisher.
type PublisherStatus struct {
	NodeID  uint64 `json:"nodeId"`
	Enabled bool   `json:"enabled"`
	// NATS is the connection's state; empty when not publishing.
	NATS string `json:"nats,omitempty"`
	*eventpub.Status
}

// eventPublisher serves GET /v1/events/publisher: whether this validator
// publishes, the last event the stream acknowledged and the lag behind the
// applied log.
func (s *Server) eventPublisher(c echo.Context) error {
	out := PublisherStatus{NodeID: s.cfg.NodeID}
	out.Status, out.NATS = s.deps.EventPublisher.PublisherStatus()
	out.Enabled = out.Status != nil
	return c.JSON(http.StatusOK, out)
}

// recentOpsEvents serves GET /v1/events/recent[?limit=N]: the newest
// operational events, newest first.
func (s *Server) recentOpsEvents(c echo.Context) error {
	limit, err := opsEventsLimit(c.QueryParams())
	if err != nil {
		return err
	}
	events, newest := s.deps.OpsEvents.Recent(limit)
	out := api.OpsEventsRecent{ContractVersion: api.OpsEventsRecentVersion, NodeID: s.cfg.NodeID, Limit: limit,
		Capacity: s.deps.OpsEvents.Capacity(), Recorded: newest, Events: make([]api.OpsEvent, len(events))}
	for i, e := range events {
		out.Events[i] = e.API()
	}
	return c.JSON(http.StatusOK, out)
}

// opsEventStats serves GET /v1/events/stats.
func (s *Server) opsEventStats(c echo.Context) error {
	out := s.deps.OpsEvents.Stats().API()
	out.ContractVersion, out.NodeID = api.OpsEventStatsVersion, s.cfg.NodeID
	return c.JSON(http.StatusOK, out)
}

// opsEventsLimit reads limit: absent, api.DefaultOpsEventsLimit; given, one
// integer from 1 to api.MaxOpsEventsLimit. An empty or repeated limit is
// refused rather than guessed at.
func opsEventsLimit(q url.Values) (int, error) {
	values, given := q["limit"]
	if !given {
		return api.DefaultOpsEventsLimit, nil
	}
	n, err := strconv.Atoi(values[0])
	if len(values) != 1 || err != nil || n < 1 || n > api.MaxOpsEventsLimit {
		return 0, apierror.Field("limit", "must be one integer from 1 to %d", api.MaxOpsEventsLimit)
	}
	return n, nil
}
