package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/natsconn"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/eventpub"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Values of Config.NATSEvents.
const (
	natsEventsAuto = "auto"
	natsEventsOn   = "on"
	natsEventsOff  = "off"
)

// PublishesEvents reports whether the leader publishes the replicated events
// to NATS: "auto" (or unset) where the mode uses NATS anyway, "on" in every
// mode, "off" never.
func (c Config) PublishesEvents() bool {
	switch c.NATSEvents {
	case natsEventsOn:
		return true
	case natsEventsAuto, "":
		return c.VerifiesPayments()
	}
	return false
}

// eventStream is the stream the events go to, from the settings.
func (c Config) eventStream() eventpub.StreamConfig {
	return eventpub.StreamConfig{Name: c.NATSEventsStream, MaxMsgs: c.NATSEventsMaxMsgs, MaxBytes: c.NATSEventsMaxBytes,
		Duplicates: c.NATSEventsDuplicates, Replicas: c.NATSEventsReplicas}.WithDefaults()
}

// validateEventPublishing reports NATS_EVENTS* settings that cannot run.
func (c Config) validateEventPublishing() error {
	switch c.NATSEvents {
	case natsEventsAuto, natsEventsOn, natsEventsOff, "":
	default:
		return fmt.Errorf("SVC_VALIDATOR_NATS_EVENTS is %q; set auto, on or off", c.NATSEvents)
	}
	if c.NATSEventsReplicas < 0 || c.NATSEventsReplicas > eventpub.MaxReplicas {
		return fmt.Errorf("SVC_VALIDATOR_NATS_EVENTS_REPLICAS is %d; set 1 to %d (at most the NATS cluster's JetStream servers)",
			c.NATSEventsReplicas, eventpub.MaxReplicas)
	}
	if err := c.eventStream().Validate(); err != nil {
		return fmt.Errorf("SVC_VALIDATOR_NATS_EVENTS_*: %w", err)
	}
	if c.PublishesEvents() && c.NATSURL == "" {
		return errors.New("SVC_VALIDATOR_NATS_URL is empty and SVC_VALIDATOR_NATS_EVENTS publishes events")
	}
	return nil
}

// eventPublishing is the leader's publication of the event log to NATS
// JetStream (internal/eventpub); pub is nil when the configuration does not
// ask for it.
type eventPublishing struct {
	pub *eventpub.Publisher
	nc  *nats.Conn
	own bool // nc was opened for the publisher alone
}

// newEventPublishing prepares the publisher on nc, the validator's NATS
// connection, or on one of its own when the mode uses none (MOCK with
// NATS_EVENTS=on).
func newEventPublishing(cfg Config, nc *nats.Conn, guard *natsconn.VersionGuard, machine *state.Machine, node *consensus.Node,
	log *zap.Logger) (*eventPublishing, error) {
	ep := &eventPublishing{}
	if !cfg.PublishesEvents() {
		return ep, nil
	}
	if nc == nil {
		var err error
		nc, err = connectNATS(cfg, fmt.Sprintf("validator-%d-events", cfg.NodeID), guard, log)
		if err != nil {
			return nil, err
		}
		ep.own = true
	}
	ep.nc = nc
	js, err := eventpub.NewJetStream(nc)
	if err != nil {
		ep.close()
		return nil, fmt.Errorf("validator: JetStream for events: %w", err)
	}
	// Machine.Changed wakes the publisher after each apply; the poll is the
	// fallback.
	ep.pub = eventpub.New(js, machine, machine.Changed, node, eventpub.Config{Stream: cfg.eventStream()}, log)
	return ep, nil
}

// run publishes while this validator leads, until ctx ends.
func (ep *eventPublishing) run(ctx context.Context) {
	if ep.pub != nil {
		ep.pub.Run(ctx)
	}
}

func (ep *eventPublishing) close() {
	if ep.own && ep.nc != nil {
		ep.nc.Close()
	}
}

// PublisherStatus is how far publication got and the state of its NATS
// connection (api.EventPublisher); nil when this validator does not publish.
func (ep *eventPublishing) PublisherStatus() (*eventpub.Status, string) {
	if ep.pub == nil {
		return nil, ""
	}
	st := ep.pub.Status()
	return &st, ep.nc.Status().String()
}
