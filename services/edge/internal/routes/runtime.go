package routes

import (
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// peerValidator is one validator's raft transport to each of its peers.
type peerValidator struct {
	URL       string         `json:"url"`
	NodeID    string         `json:"nodeId,omitempty"`
	Reachable bool           `json:"reachable"`
	Error     string         `json:"error,omitempty"`
	Peers     []api.PeerView `json:"-"`
}

// peerViews asks every validator for its peers at once: each knows its own
// end of every link, so the mesh takes all of them.
func (s *server) peerViews(r *reader) ([]peerValidator, error) {
	out := make([]peerValidator, len(s.up.URLs()))
	errs := make([]error, len(out))
	s.eachValidator(func(i int, base string) {
		var p api.Peers
		if _, err := r.readFrom(base, at(srcPeers), &p); err != nil {
			out[i], errs[i] = peerValidator{URL: base, Error: err.Error()}, err
			return
		}
		out[i] = peerValidator{URL: base, NodeID: api.NodeName(p.Self), Reachable: true, Peers: p.Peers}
	})
	for _, v := range out {
		if v.Reachable {
			return out, nil
		}
	}
	return nil, r.noneAnswered(at(srcPeers), errs)
}

// withPeers renders each validator with its links (self left out), each
// link projected by link.
func withPeers(vs []peerValidator, link func(api.PeerTransport) map[string]any) []map[string]any {
	out := make([]map[string]any, 0, len(vs))
	for _, v := range vs {
		m := map[string]any{"url": v.URL, "reachable": v.Reachable}
		if v.NodeID != "" {
			m["nodeId"] = v.NodeID
		}
		if v.Error != "" {
			m["error"] = v.Error
		}
		links := []map[string]any{}
		for _, p := range v.Peers {
			if p.Self {
				continue
			}
			var t api.PeerTransport
			if p.Transport != nil {
				t = *p.Transport
			}
			l := link(t)
			l["nodeId"], l["isLeader"] = p.Name, p.IsLeader
			if t.LastError != "" {
				l["lastError"] = t.LastError
			}
			if t.LastErrorAt != nil {
				l["lastErrorAt"] = t.LastErrorAt.Format(time.RFC3339Nano)
			}
			links = append(links, l)
		}
		m["peers"] = links
		out = append(out, m)
	}
	return out
}

// msgbus is the runtime lane view of the messaging layer: raft membership
// and every validator's transport to its peers.
func (s *server) msgbus(c echo.Context) error {
	r := s.reader(c)
	vs, err := s.peerViews(r)
	if err != nil {
		return err
	}
	var cs api.ClusterState
	if _, err := r.read(at(srcClusterState), &cs); err != nil {
		return err
	}
	names := func(ids []uint64) []string {
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			out = append(out, api.NodeName(id))
		}
		return out
	}
	return s.envelope(c, map[string]any{
		"validators": withPeers(vs, func(t api.PeerTransport) map[string]any {
			return map[string]any{"connected": t.Connected, "inboundConnected": t.InboundConnected, "msgsSent": t.MsgsSent,
				"msgsRecv": t.MsgsRecv, "bytesSent": t.BytesSent, "bytesRecv": t.BytesRecv, "dropped": t.Dropped}
		}),
		"membership": map[string]any{"leader": api.NodeName(cs.Leader), "term": cs.Term, "voters": names(cs.Voters),
			"learners": names(cs.Learners), "quorum": cs.Quorum},
		"nats":    nil,
		"gaps":    []gap{{Field: "nats", Reason: "no validator route publishes its NATS client statistics yet", SourceRoute: "/v1/ops/snapshots/runtime"}},
		"sources": r.attempts(),
	})
}

// mediaDriver is the runtime lane view of the transport's internals: send
// queues, reconnects, snapshot transfers and errors per link, and totals.
func (s *server) mediaDriver(c echo.Context) error {
	r := s.reader(c)
	vs, err := s.peerViews(r)
	if err != nil {
		return err
	}
	var total api.PeerTransport
	for _, v := range vs {
		for _, p := range v.Peers {
			if t := p.Transport; t != nil && !p.Self {
				total.QueueDepth += t.QueueDepth
				total.Reconnects += t.Reconnects
				total.Dropped += t.Dropped
				total.SnapshotsSent += t.SnapshotsSent
				total.SnapshotsFailed += t.SnapshotsFailed
				total.SnapshotsReceived += t.SnapshotsReceived
			}
		}
	}
	return s.envelope(c, map[string]any{
		"validators": withPeers(vs, func(t api.PeerTransport) map[string]any {
			return map[string]any{"queueDepth": t.QueueDepth, "reconnects": t.Reconnects, "dropped": t.Dropped,
				"snapshotsSent": t.SnapshotsSent, "snapshotsFailed": t.SnapshotsFailed, "snapshotsReceived": t.SnapshotsReceived}
		}),
		"totals": map[string]any{"queueDepth": total.QueueDepth, "reconnects": total.Reconnects, "dropped": total.Dropped,
			"snapshotsSent": total.SnapshotsSent, "snapshotsFailed": total.SnapshotsFailed,
			"snapshotsReceived": total.SnapshotsReceived, "timeouts": nil},
		"gaps":    []gap{{Field: "totals.timeouts", Reason: "the raft transport does not count timeouts apart from its errors yet"}},
		"sources": r.attempts(),
	})
}
