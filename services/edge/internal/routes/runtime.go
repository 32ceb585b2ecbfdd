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

// natsOfAll is every validator's NATS client connections, from its runtime
// snapshot, asked of all at once. A validator that does not answer is
// listed with its error; when none answers, nats is null and a gap says
// why, rather than the view failing: the raft transport stays readable.
func (s *server) natsOfAll(r *reader) (any, []gap) {
	vs, bodies, err := eachSnapshot(s, r, at(srcRuntime), func(base string, rt *api.RuntimeSnapshot) map[string]any {
		return map[string]any{"url": base, "nodeId": api.NodeName(rt.NodeID), "reachable": true, "connections": rt.NATS}
	})
	if err != nil {
		return nil, []gap{{Field: "nats", Reason: "no validator answered " + srcRuntime, SourceRoute: srcRuntime}}
	}
	// Connected when every connection of every validator that reports
	// one is; unknown (null) when none reports one.
	var connected any
	gaps := []gap{}
	for _, rt := range bodies {
		switch {
		case rt == nil:
		case rt.NATS == nil:
			if len(gaps) == 0 {
				gaps = append(gaps, gap{Field: "nats.validators[].connections", Reason: "a validator that answered does not publish its NATS client statistics",
					SourceRoute: srcRuntime})
			}
		default:
			for _, n := range rt.NATS {
				connected = n.Connected && (connected == nil || connected.(bool))
			}
		}
	}
	return map[string]any{"connected": connected, "validators": vs}, gaps
}

// msgbus is the runtime lane view of the messaging layer: raft membership,
// every validator's transport to its peers, and its NATS connections.
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
	nats, natsGaps := s.natsOfAll(r)
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
		"nats":    nats,
		"gaps":    natsGaps,
		"sources": r.attempts(),
	})
}

// mediaDriver is the runtime lane view of the transport's internals: send
// queues, reconnects, snapshot transfers, errors and timeouts per link,
// and totals.
func (s *server) mediaDriver(c echo.Context) error {
	r := s.reader(c)
	vs, err := s.peerViews(r)
	if err != nil {
		return err
	}
	var total api.PeerTransport
	// The timeouts of the links whose validator counts them: a validator
	// from before the count leaves its links out, and a gap says so.
	var timeouts uint64
	counted, uncounted := false, false
	for _, v := range vs {
		for _, p := range v.Peers {
			if t := p.Transport; t != nil && !p.Self {
				total.QueueDepth += t.QueueDepth
				total.Reconnects += t.Reconnects
				total.Dropped += t.Dropped
				total.SnapshotsSent += t.SnapshotsSent
				total.SnapshotsFailed += t.SnapshotsFailed
				total.SnapshotsReceived += t.SnapshotsReceived
				if t.Timeouts != nil {
					timeouts, counted = timeouts+*t.Timeouts, true
				} else {
					uncounted = true
				}
			}
		}
	}
	var totalTimeouts any = timeouts
	if uncounted && !counted {
		totalTimeouts = nil
	}
	gaps := []gap{}
	if uncounted {
		gaps = append(gaps, gap{Field: "totals.timeouts", Reason: "a validator that answered does not count its transport's timeouts: its links are left out",
			SourceRoute: srcPeers})
	}
	return s.envelope(c, map[string]any{
		"validators": withPeers(vs, func(t api.PeerTransport) map[string]any {
			return map[string]any{"queueDepth": t.QueueDepth, "reconnects": t.Reconnects, "dropped": t.Dropped,
				"snapshotsSent": t.SnapshotsSent, "snapshotsFailed": t.SnapshotsFailed, "snapshotsReceived": t.SnapshotsReceived,
				"timeouts": t.Timeouts}
		}),
		"totals": map[string]any{"queueDepth": total.QueueDepth, "reconnects": total.Reconnects, "dropped": total.Dropped,
			"snapshotsSent": total.SnapshotsSent, "snapshotsFailed": total.SnapshotsFailed,
			"snapshotsReceived": total.SnapshotsReceived, "timeouts": totalTimeouts},
		"gaps":    gaps,
		"sources": r.attempts(),
	})
}
