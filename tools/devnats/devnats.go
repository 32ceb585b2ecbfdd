// Package devnats runs an embedded NATS server with JetStream for the local
// devnet and the system tests, configured as production should be for data
// that must not be lost: JetStream file storage synced on every write.
package devnats

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultPort is the NATS client port.
const DefaultPort = 4222

// Config configures the server.
type Config struct {
	// Host and Port to listen on; Port -1 picks a free port.
	Host string
	Port int
	// StoreDir holds JetStream's files. Required.
	StoreDir string
}

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
}

// Start starts the server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("devnats: StoreDir is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	opts := &server.Options{
		ServerName: "contentledger-dev",
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		// JetStream syncs file storage every 2 minutes by default; an
		// acknowledged payment must survive a crash.
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("devnats: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("devnats: server not ready within 10s")
	}
	return &Server{s}, nil
}

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}
