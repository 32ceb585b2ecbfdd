package devchain

import (
	"context"
	"log/slog"
	"sync"
)

// endpointCapture is the slog handler the dev chain's node logs through. It
// forwards records to the caller's handler and remembers the address of the
// HTTP RPC server.
//
// Why a log handler: simulated.Backend keeps its node.Node private, so
// node.HTTPEndpoint() cannot be called, and with port 0 the only place the
// chosen port appears is the node's "HTTP server started" record (endpoint =
// the listener's address). The options of simulated.NewBackend receive the
// *node.Config, whose Logger is the node's logger, so this is reachable
// without forking the backend. Start checks the captured address by calling
// eth_chainId over HTTP, so a change of the message in a later go-ethereum
// fails loudly instead of reporting a wrong URL.
type endpointCapture struct {
	next  slog.Handler
	state *captured
}

type captured struct {
	mu       sync.Mutex
	endpoint string
}

// httpStartedMsg and endpointKey are what node/rpcstack.go logs in
// go-ethereum v1.17.10 when the HTTP server listens.
const (
	httpStartedMsg = "HTTP server started"
	endpointKey    = "endpoint"
)

func newEndpointCapture(next slog.Handler) *endpointCapture {
	return &endpointCapture{next: next, state: &captured{}}
}

func (h *endpointCapture) Enabled(ctx context.Context, level slog.Level) bool {
	// Info must reach Handle even when the caller's handler drops it.
	return level >= slog.LevelInfo || h.next.Enabled(ctx, level)
}

func (h *endpointCapture) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == httpStartedMsg {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != endpointKey {
				return true
			}
			h.state.mu.Lock()
			h.state.endpoint = a.Value.String()
			h.state.mu.Unlock()
			return false
		})
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *endpointCapture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &endpointCapture{next: h.next.WithAttrs(attrs), state: h.state}
}

func (h *endpointCapture) WithGroup(name string) slog.Handler {
	return &endpointCapture{next: h.next.WithGroup(name), state: h.state}
}

// Endpoint returns the captured host:port, or "" before the server started.
func (h *endpointCapture) Endpoint() string {
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	return h.state.endpoint
}
