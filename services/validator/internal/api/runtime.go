package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/sysinfo"
)

// The runtime snapshot (source): the Go runtime's and the process's
// figures, the NATS connections, and the blob store: the CIDs live nodes
// map, and the IPFS gateway clients fetch binaries from.

// Gateway is the IPFS gateway's checker (blobgateway.Checker).
type Gateway interface {
	// URL is the gateway's base URL, credentials redacted.
	URL() string
	// Last is the outcome of the last check; ok is false before the first
	// ends.
	Last() (blobgateway.Check, bool)
}

// runtimeSnapshot serves GET /v1/ops/snapshots/runtime.
func (s *Server) runtimeSnapshot(c echo.Context) error {
	now := s.now()
	if !s.opsReader(c) {
		return c.JSON(http.StatusOK, api.RuntimeSnapshot{ContractVersion: api.RuntimeSnapshotVersion, At: now.UTC(), Gaps: publicViewGaps()})
	}
	started := s.deps.Cluster.StartedAt()
	out := api.RuntimeSnapshot{ContractVersion: api.RuntimeSnapshotVersion, NodeID: s.cfg.NodeID, At: now.UTC(),
		StartedAt: started.UTC(), UptimeMs: now.Sub(started).Milliseconds(), Go: sysinfo.GoRuntime(), Gaps: []api.Gap{}}
	out.Process, out.Gaps = sysinfo.Process(out.Gaps)
	out.NATS = natsConnections(s.deps.NATS)
	cids, err := s.deps.Segments.CIDStats()
	if err != nil {
		return err
	}
	out.Blobstore = api.Blobstore{CidMappings: cids.NodesWithCID, AppliedIndex: cids.AppliedIndex, ComputedAt: cids.ComputedAt}
	out.Gaps = gatewayFigures(&out.Blobstore, s.deps.Gateway, out.Gaps)
	return c.JSON(http.StatusOK, out)
}

// natsConnections reads the client library's figures of each connection.
func natsConnections(clients []NATSClient) []api.NATSConnection {
	out := make([]api.NATSConnection, 0, len(clients))
	for _, c := range clients {
		st := c.Conn.Stats()
		n := api.NATSConnection{Name: c.Conn.Opts.Name, Uses: c.Uses, Connected: c.Conn.IsConnected(), Status: c.Conn.Status().String(),
			ServerURL: c.Conn.ConnectedUrlRedacted(), InMsgs: st.InMsgs, OutMsgs: st.OutMsgs, InBytes: st.InBytes, OutBytes: st.OutBytes,
			Reconnects: st.Reconnects}
		if err := c.Conn.LastError(); err != nil {
			n.LastError = err.Error()
		}
		out = append(out, n)
	}
	return out
}

// gatewayFigures fills in the IPFS gateway and its last check, and the
// gaps of what is not known: the gateway when none is configured, the
// check before the first ends. It reads the checker's last outcome and
// never waits for a check.
func gatewayFigures(b *api.Blobstore, gateway Gateway, gaps []api.Gap) []api.Gap {
	if gateway == nil {
		return append(gaps,
			api.Gap{Field: "blobstore.gatewayUrl", Reason: "this validator is configured with no IPFS gateway (SVC_VALIDATOR_IPFS_GATEWAY)"},
			api.Gap{Field: "blobstore.lastCheck", Reason: "no IPFS gateway is configured, so none is checked"})
	}
	u := gateway.URL()
	b.GatewayURL = &u
	last, ok := gateway.Last()
	if !ok {
		return append(gaps, api.Gap{Field: "blobstore.lastCheck", Reason: "the first check of the IPFS gateway has not ended yet"})
	}
	at := last.At.UTC()
	b.LastCheck = &at
	b.Check = &api.GatewayCheck{OK: last.OK, LatencyMs: float64(last.Latency.Microseconds()) / 1000, Error: last.Err}
	if last.StatusCode != 0 {
		b.Check.StatusCode = &last.StatusCode
	}
	return gaps
}
