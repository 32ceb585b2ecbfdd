package httpserver

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults of Config. Each service exposes these settings in its own
// environment (a zero there takes the default here), so they are defined
// once, here.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included:
	// 3 MiB (the largest proposal form) at 1 Mbit/s takes about 25 s.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its answer. It exceeds the longest wait a route offers
	// (?wait= on proposals, at most 60 s) and a 30 s CPU profile. The event
	// streams lift it for themselves (see DESIGN.md).
	DefaultWriteTimeout = 90 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection waits for its
	// next request.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxHeaderBytes bounds a request's headers (net/http's own
	// default is 1 MiB): a bearer token and a few forwarding hops fit in a
	// few hundred bytes.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxBodyBytes is the body limit of a route that names no other.
	DefaultMaxBodyBytes = 64 << 10
	// DefaultMaxConns bounds the open connections of a server in all.
	DefaultMaxConns = 8192
	// DefaultMaxConnsPerClient bounds the open connections of one client
	// key (ClientKey): enough for a dashboard, an edge and a tool sharing
	// an address, far from what it takes to exhaust the server.
	DefaultMaxConnsPerClient = 256
	// DefaultForwardedHeader is the header trusted proxies name the client
	// in.
	DefaultForwardedHeader = HeaderXForwardedFor
)

// The forwarding headers a trusted proxy may name the client in.
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded"
)

// Config configures a Server. Zero fields take the defaults above; a
// negative MaxConns or MaxConnsPerClient means no cap.
type Config struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default
	// DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, its body included: a body
	// that trickles in slower is cut. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer. Default DefaultWriteTimeout. Streaming handlers lift
	// it for their request (LiftDeadlines).
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block. Default
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxBodyBytes is the body limit of a route that names none (LimitBody).
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxConns bounds the server's open connections; one over it is closed
	// at once. Default DefaultMaxConns; negative: no cap.
	MaxConns int
	// MaxConnsPerClient bounds the open connections of one client key
	// (ClientKey of the connection's address: IPv6 by /64); one over it is
	// closed at once. Trusted proxies are exempt: they carry many clients.
	// Default DefaultMaxConnsPerClient; negative: no cap.
	MaxConnsPerClient int
	// TLSCert and TLSKey, both or neither, are PEM files: set, the server
	// speaks TLS only. They are read again when they change, without a
	// restart.
	TLSCert string
	TLSKey  string
	// TrustedProxies lists the addresses and CIDR prefixes whose
	// ForwardedHeader is believed. From any other address it is ignored.
	TrustedProxies []string
	// ForwardedHeader is the one header trusted proxies name the client in:
	// HeaderXForwardedFor or HeaderForwarded (case-insensitive). Only one is
	// read, because a proxy that appends to one passes the other through as
	// the client wrote it. Default DefaultForwardedHeader.
	ForwardedHeader string
}

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("httpserver: invalid config")

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerClient == 0 {
		c.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if c.ForwardedHeader == "" {
		c.ForwardedHeader = DefaultForwardedHeader
	}
	return c
}

// Validate reports whether c, after defaults, describes a usable server.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.ReadHeaderTimeout < 0, c.ReadTimeout < 0, c.WriteTimeout < 0, c.IdleTimeout < 0:
		return fmt.Errorf("%w: timeouts must not be negative", ErrInvalidConfig)
	case c.ReadTimeout < c.ReadHeaderTimeout:
		return fmt.Errorf("%w: ReadTimeout %v is below ReadHeaderTimeout %v", ErrInvalidConfig, c.ReadTimeout, c.ReadHeaderTimeout)
	case c.MaxHeaderBytes < 0, c.MaxBodyBytes < 0:
		return fmt.Errorf("%w: MaxHeaderBytes and MaxBodyBytes must not be negative", ErrInvalidConfig)
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return fmt.Errorf("%w: TLSCert and TLSKey must be set together", ErrInvalidConfig)
	case !strings.EqualFold(c.ForwardedHeader, HeaderXForwardedFor) && !strings.EqualFold(c.ForwardedHeader, HeaderForwarded):
		return fmt.Errorf("%w: ForwardedHeader %q is neither %s nor %s", ErrInvalidConfig, c.ForwardedHeader, HeaderXForwardedFor, HeaderForwarded)
	}
	if _, err := ParseTrusted(c.TrustedProxies); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
