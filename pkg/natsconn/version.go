package natsconn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// MinServerVersion is the oldest nats-server the validator and the
// chain-watcher run against: both publish with JetStream atomic batches
// (the ledger's events, the chain's payments), which came in 2.12. An
// older server ignores AllowAtomicPublish and stores a batch's messages one
// by one (ADR 0045).
const MinServerVersion = "2.12.0"

// ErrServerVersion is returned for a NATS server older than
// MinServerVersion, or one whose version cannot be read.
var ErrServerVersion = errors.New("natsconn: nats-server version")

// CheckServerVersion reports a server version (as the server announces it
// in INFO: "2.12.1", "2.14.0-RC.2") older than MinServerVersion, naming
// both. A pre-release of a version is older than the version itself.
func CheckServerVersion(version string) error {
	cmp, err := compareVersions(version, MinServerVersion)
	if err != nil {
		return fmt.Errorf("%w: cannot read the version %q the server announced (%v); %s or newer is required",
			ErrServerVersion, version, err, MinServerVersion)
	}
	if cmp < 0 {
		return fmt.Errorf("%w: the server runs nats-server %s; %s or newer is required (JetStream atomic batch publication)",
			ErrServerVersion, version, MinServerVersion)
	}
	return nil
}

// compareVersions compares two versions MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]
// (a leading v allowed) by their numbers, a pre-release before its release
// (two pre-releases of one version compare equal: none is required here).
func compareVersions(a, b string) (int, error) {
	na, preA, err := parseVersion(a)
	if err != nil {
		return 0, err
	}
	nb, preB, err := parseVersion(b)
	if err != nil {
		return 0, err
	}
	for i := range na {
		if na[i] != nb[i] {
			if na[i] < nb[i] {
				return -1, nil
			}
			return 1, nil
		}
	}
	switch {
	case preA && !preB:
		return -1, nil
	case !preA && preB:
		return 1, nil
	}
	return 0, nil
}

// parseVersion returns a version's three numbers and whether it is a
// pre-release.
func parseVersion(v string) (nums [3]uint64, pre bool, err error) {
	core := strings.TrimPrefix(v, "v")
	if i := strings.IndexByte(core, '+'); i >= 0 {
		core = core[:i]
	}
	if i := strings.IndexByte(core, '-'); i >= 0 {
		core, pre = core[:i], true
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return nums, false, errors.New("not MAJOR.MINOR.PATCH")
	}
	for i, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return nums, false, fmt.Errorf("%q is not a number", p)
		}
		if nums[i], err = strconv.ParseUint(p, 10, 32); err != nil {
			return nums, false, fmt.Errorf("%q is not a number", p)
		}
	}
	return nums, pre, nil
}

// VersionGuard refuses, for one service, every NATS server older than
// MinServerVersion that its connections reach: the first, and any it
// reconnects to (a cluster member not yet upgraded). A connection opened
// with RetryOnFailedConnect may reach its first server after the service
// has started, so the check runs in the connection's handlers, and the
// refusal is reported on Done for the service to stop with.
//
// Check is each connection's ConnectHandler and is called from its
// ReconnectHandler; the service also calls it once right after
// nats.Connect, to refuse to start when the server is already reached.
type VersionGuard struct {
	once sync.Once
	err  error
	done chan struct{}
}

// NewVersionGuard returns a guard that has refused nothing.
func NewVersionGuard() *VersionGuard {
	return &VersionGuard{done: make(chan struct{})}
}

// Check checks the server nc is connected to; a server too old closes nc
// (nothing more is published to it) and is the guard's refusal, which Check
// returns. A connection not connected yet passes: its handler checks it
// when it connects.
func (g *VersionGuard) Check(nc *nats.Conn) error {
	if !nc.IsConnected() {
		return nil
	}
	err := CheckServerVersion(nc.ConnectedServerVersion())
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%w (connected to %s)", err, nc.ConnectedUrlRedacted())
	nc.Close()
	g.once.Do(func() {
		g.err = err
		close(g.done)
	})
	return err
}

// Handler is Check as a nats.ConnHandler.
func (g *VersionGuard) Handler(nc *nats.Conn) { _ = g.Check(nc) }

// Done is closed at the first refusal.
func (g *VersionGuard) Done() <-chan struct{} { return g.done }

// Err is the first refusal; nil before one.
func (g *VersionGuard) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}

// Wait returns the first refusal, or nil when ctx ends first: a task of the
// service's lifecycle group, whose failure stops the service.
func (g *VersionGuard) Wait(ctx context.Context) error {
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return nil
	}
}
