// Package events serves the replicated event log as Server-Sent Events
// (contract "Events", ADR 0023): GET /v1/events/stream and
// /v1/ops/events/stream.
//
// One Hub per validator reads the log once per apply that added events and
// fans the events out to every subscriber's bounded queue; a subscriber that
// resumes from an older id reads the history from the log itself until it
// has caught up, then joins the hub. See DESIGN.md.
package events

import (
	"net/http"
	"time"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Log is the replicated event log (state.Machine).
type Log interface {
	// EventsSince returns the events with id > afterID in id order, at most
	// limit of them.
	EventsSince(afterID uint64, limit int) ([]*ledgerpb.Event, error)
	// FirstEventID is the oldest event kept, LastEventID()+1 when none is.
	FirstEventID() uint64
	// LastEventID is the newest event id (0 before the first).
	LastEventID() uint64
	// Changed is closed after the next apply; take it before reading.
	Changed() <-chan struct{}
}

// Config bounds the streams. Zero fields take the defaults.
type Config struct {
	// MaxPerIP is the number of concurrent streams one client may hold,
	// both stream routes together (contract Limits: 10).
	MaxPerIP int
	// ClientKey names the client a request comes from, for MaxPerIP.
	// Default: httpserver.ClientKey of the connection's address (the
	// validator passes its trusted-proxy resolution, httpserver.Clients.Key).
	ClientKey func(*http.Request) string
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
	if c.ClientKey == nil {
		c.ClientKey = directClientKey
	}
	if c.MaxPerIP <= 0 {
		c.MaxPerIP = DefaultMaxPerIP
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
