package httpserver

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"

	"github.com/contentledger/contentledger/pkg/lifecycle"
)

// Server is an http.Server with the limits of a Config: timeouts, header
// and connection caps, optional TLS from files that are re-read on change.
type Server struct {
	cfg     Config
	handler http.Handler
	clients *Clients
	certs   *certificateFiles // nil without TLS

	ln atomic.Pointer[limitListener] // set by Serve
	// peers, when set, are exempt from the per-client cap (ExemptPeers).
	peers func(netip.Addr) bool
}

// Stats are a server's connection figures.
type Stats struct {
	// Open is the connections open now.
	Open int
	// RefusedTotal and RefusedPerClient count the connections closed as
	// soon as accepted, over MaxConns and over MaxConnsPerClient.
	RefusedTotal, RefusedPerClient uint64
	// TLSReloads counts the certificates loaded again after a change;
	// TLSError is the last failure to load one (the previous certificate
	// stays in service), empty once one loads.
	TLSReloads uint64
	TLSError   string
}

// New returns a server of handler under cfg; it loads the TLS certificate
// now, so that a missing or broken one stops the service at start.
func New(cfg Config, handler http.Handler) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	clients, err := NewClients(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, handler: handler, clients: clients}
	if cfg.TLSCert != "" {
		if s.certs, err = newCertificateFiles(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ExemptPeers exempts the addresses peer reports from the per-client
// connection cap, as trusted proxies are: a service's own peers (the other
// validators, which forward many clients' requests from one address).
// They still count in MaxConns. peer is asked on accept, so it must answer
// from memory. Call it before Serve.
func (s *Server) ExemptPeers(peer func(netip.Addr) bool) { s.peers = peer }

// Clients is the server's client resolution (its TrustedProxies).
func (s *Server) Clients() *Clients { return s.clients }

// TLS reports whether the server speaks TLS.
func (s *Server) TLS() bool { return s.certs != nil }

// Serve serves ln until ctx ends, then shuts down as lifecycle.ServeHTTP
// does. ln is closed on return.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	exempt := s.clients.Trusted
	if peers := s.peers; peers != nil {
		exempt = func(a netip.Addr) bool { return s.clients.Trusted(a) || peers(a) }
	}
	limited := newLimitListener(ln, s.cfg.MaxConns, s.cfg.MaxConnsPerClient, exempt)
	s.ln.Store(limited)
	var served net.Listener = limited
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
	}
	if s.certs != nil {
		// HTTP/1.1 only: the connection caps and read deadlines are per
		// request there; HTTP/2 would multiplex many over one connection.
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.GetCertificate,
			NextProtos: []string{"http/1.1"}}
		served = tls.NewListener(served, srv.TLSConfig)
	}
	return lifecycle.ServeHTTP(ctx, srv, served)
}

// Stats returns the connection figures; zero before Serve.
func (s *Server) Stats() Stats {
	var st Stats
	if ln := s.ln.Load(); ln != nil {
		st.Open = ln.openConns()
		st.RefusedTotal, st.RefusedPerClient = ln.refusedTotal.Load(), ln.refusedClient.Load()
	}
	if s.certs != nil {
		s.certs.mu.Lock()
		st.TLSReloads, st.TLSError = s.certs.reloads, s.certs.lastError
		s.certs.mu.Unlock()
	}
	return st
}
