// Package events serves event logs as Server-Sent Events: the replicated
// event log (contract "Events", ADR 0023) on GET /v1/events/stream, and any
// other log of consecutive ids given its Kind (the validator's operational
// events, internal/opsevents, on /v1/ops/events/stream, ADR 0039).
//
// One Hub per log reads it once per change that added events and fans the
// events out to every subscriber's bounded queue; a subscriber that resumes
// from an older id reads the history from the log itself until it has
// caught up, then joins the hub. The hubs of a validator share one Budget
// of streams per client. See DESIGN.md.
package events

import (
	"net/http"
	"time"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Source is a log of events of type E with consecutive ids from 1, the
// oldest of which may be gone.
type Source[E any] interface {
	// EventsSince returns the events with id > afterID in id order, at most
	// limit of them.
	EventsSince(afterID uint64, limit int) ([]E, error)
	// FirstEventID is the oldest event kept, LastEventID()+1 when none is.
	FirstEventID() uint64
	// LastEventID is the newest event id (0 before the first).
	LastEventID() uint64
	// Changed is closed after the next change; take it before reading.
	Changed() <-chan struct{}
}

// Log is the replicated event log (state.Machine).
type Log = Source[*ledgerpb.Event]

// Kind is what the streams of one source need to know of its events: how
// they are named and framed, and how a request chooses among them.
type Kind[E any] interface {
	// ID is an event's id in its source.
	ID(ev E) uint64
	// Render writes an event as one SSE message: the id line (StreamID of
	// its id), the event line and one data line, then the blank line.
	Render(ev E) ([]byte, error)
	// StreamID is the SSE id of a source id, as the gap and dropped
	// notices name events.
	StreamID(id uint64) string
	// Open reads a stream request (its filters and resumption point)
	// before a connection slot is taken. An invalid request is the error
	// the client gets, and opens nothing.
	Open(r *http.Request) (Start[E], *apierror.Error)
}

// Start is what a stream request asks for.
type Start[E any] struct {
	// Match selects the events the stream sends; nil sends every one.
	Match func(E) bool
	// After is the id the stream resumes after; without Resume the stream
	// starts at new events (after the newest at connection time).
	After  uint64
	Resume bool
	// Notice is a control message the stream sends first (nil: none): the
	// operational stream's reset, say.
	Notice []byte
}

// Config bounds the streams of one hub. Zero fields take the defaults.
type Config struct {
	// Budget counts the concurrent streams of each client. Hubs given the
	// same Budget share it: the contract's 10 streams per client is one
	// budget across the stream routes. Nil: a budget of this hub alone,
	// NewBudget(0, nil).
	Budget *Budget
	// Rate is the most events per second one stream sends (contract
	// Limits: 1000); above it events wait in the stream's queue.
	Rate float64
	// Queue is the most events waiting for one stream; on overflow the
	// oldest are dropped and the client is told (a dropped event).
	Queue int
	// KeepAlive is the interval of the comment lines that keep an idle
	// stream open through proxies.
	KeepAlive time.Duration
	// Retry is the reconnection delay the stream suggests (SSE retry:).
	Retry time.Duration
	// WriteTimeout disconnects a client that accepts no data for this long.
	WriteTimeout time.Duration
	// ReadBatch is the most events one read of the log returns.
	ReadBatch int
}

// Defaults.
const (
	DefaultMaxPerIP     = 10
	DefaultRate         = 1000
	DefaultQueue        = 4096
	DefaultKeepAlive    = 15 * time.Second
	DefaultRetry        = 2 * time.Second
	DefaultWriteTimeout = 30 * time.Second
	DefaultReadBatch    = 512
)

func (c Config) withDefaults() Config {
	if c.Budget == nil {
		c.Budget = NewBudget(0, nil)
	}
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueue
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.Retry <= 0 {
		c.Retry = DefaultRetry
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ReadBatch <= 0 {
		c.ReadBatch = DefaultReadBatch
	}
	return c
}
