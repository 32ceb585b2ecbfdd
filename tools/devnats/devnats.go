// Package devnats runs an embedded NATS server with JetStream for the local
// devnet and the system tests, configured as production should be for data
// that must not be lost: JetStream file storage synced on every write.
//
// With Config.Auth it also runs with users and permissions, as a real
// deployment must (ADR 0029, deployments/README.md): only the watcher may
// publish the chain feed, validators read it and publish the ledger's
// events, an indexer reads those events only.
package devnats

import (
	"crypto/rand"
	"encoding/hex"
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
	// Auth, when set, runs the server with a user per role (random
	// passwords, Server.Credentials) and their permissions. Unset, anyone
	// may do anything: tests of a single component use that.
	Auth *Auth
}

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
	credentials map[Role]Credentials
}

// Credentials returns the user and password of role; ok is false when the
// server runs without Auth.
func (s *Server) Credentials(role Role) (c Credentials, ok bool) {
	c, ok = s.credentials[role]
	return c, ok
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
	var credentials map[Role]Credentials
	if cfg.Auth != nil {
		var err error
		if opts.Users, credentials, err = cfg.Auth.users(); err != nil {
			return nil, fmt.Errorf("devnats: %w", err)
		}
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
	return &Server{Server: s, credentials: credentials}, nil
}

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// users makes a user with a random password for each role.
func (a Auth) users() ([]*server.User, map[Role]Credentials, error) {
	perms := a.Permissions()
	var users []*server.User
	credentials := make(map[Role]Credentials, len(perms))
	for _, role := range Roles {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, nil, err
		}
		c := Credentials{User: string(role), Password: hex.EncodeToString(b)}
		credentials[role] = c
		users = append(users, &server.User{Username: c.User, Password: c.Password, Permissions: perms[role]})
	}
	return users, credentials, nil
}
