package app

import (
	"context"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/services/validator/internal/events"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// eventStreams serves the replicated event log as Server-Sent Events
// (internal/events).
type eventStreams struct{ hub *events.Hub }

func newEventStreams(cfg Config, machine *state.Machine, log *zap.Logger) eventStreams {
	return eventStreams{hub: events.NewHub(machine, events.Config{
		MaxPerIP: cfg.EventsStreamPerIP, Rate: cfg.EventsStreamRate, Queue: cfg.EventsStreamQueue,
		KeepAlive: cfg.EventsKeepAlive,
	}, log)}
}

// register serves the two stream routes of the contract: the same events,
// each route with its own per-address connection budget
// (internal/events/DESIGN.md).
func (s eventStreams) register(e *echo.Echo) {
	e.GET("/v1/events/stream", echo.WrapHandler(s.hub.Handler()))
	e.GET("/v1/ops/events/stream", echo.WrapHandler(s.hub.Handler()))
}

// run follows the log until ctx ends.
func (s eventStreams) run(ctx context.Context) { s.hub.Run(ctx) }
