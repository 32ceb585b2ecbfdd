package app

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// The pipeline tells the recorder what it does through its own interface.
var _ pipeline.Events = (*opsevents.Recorder)(nil)

// opsEventViews serves this validator's operational events (opsevents):
// GET /v1/events/recent and GET /v1/events/stats.
type opsEventViews struct {
	nodeID uint64
	rec    *opsevents.Recorder
}

// register adds the routes to the API's echo instance, behind its
// authentication and error handling (internal/api).
func (v opsEventViews) register(e *echo.Echo) {
	e.GET("/v1/events/recent", v.recent)
	e.GET("/v1/events/stats", v.stats)
}

// recent serves GET /v1/events/recent[?limit=N]: the newest events, newest
// first.
func (v opsEventViews) recent(c echo.Context) error {
	limit, err := opsEventsLimit(c.QueryParams())
	if err != nil {
		return err
	}
	events, newest := v.rec.Recent(limit)
	out := api.OpsEventsRecent{ContractVersion: api.OpsEventsRecentVersion, NodeID: v.nodeID, Limit: limit,
		Capacity: v.rec.Capacity(), Recorded: newest, Events: make([]api.OpsEvent, len(events))}
	for i, e := range events {
		out.Events[i] = e.API()
	}
	return c.JSON(http.StatusOK, out)
}

// stats serves GET /v1/events/stats.
func (v opsEventViews) stats(c echo.Context) error {
	out := v.rec.Stats().API()
	out.ContractVersion, out.NodeID = api.OpsEventStatsVersion, v.nodeID
	return c.JSON(http.StatusOK, out)
}

// opsEventsLimit reads limit: absent, api.DefaultOpsEventsLimit; given, one
// integer from 1 to api.MaxOpsEventsLimit. An empty or repeated limit is
// refused rather than guessed at.
func opsEventsLimit(q url.Values) (int, error) {
	values, given := q["limit"]
	if !given {
		return api.DefaultOpsEventsLimit, nil
	}
	n, err := strconv.Atoi(values[0])
	if len(values) != 1 || err != nil || n < 1 || n > api.MaxOpsEventsLimit {
		return 0, apierror.Field("limit", "must be one integer from 1 to %d", api.MaxOpsEventsLimit)
	}
	return n, nil
}

// opsCounterWatch turns counters that other parts keep into events: the
// transport's snapshot transfers per peer and the database's write stalls.
// Neither tells anyone when they move, so the watch looks at them every
// interval and records what moved since the last look. It belongs to one
// goroutine.
type opsCounterWatch struct {
	rec    *opsevents.Recorder
	peers  func() map[uint64]transport.PeerStats
	stalls func() storage.WriteStalls

	seen       map[uint64]transport.PeerStats
	stallsSeen uint64
}

func newOpsCounterWatch(rec *opsevents.Recorder, peers func() map[uint64]transport.PeerStats, stalls func() storage.WriteStalls) *opsCounterWatch {
	// Both sets of counters start at zero with the process (a peer's when
	// it is added), so what they hold at the first look happened since.
	return &opsCounterWatch{rec: rec, peers: peers, stalls: stalls, seen: map[uint64]transport.PeerStats{}}
}

// run looks every interval until ctx ends.
func (w *opsCounterWatch) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		w.look()
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// look records what moved since the last look.
func (w *opsCounterWatch) look() {
	now := w.peers()
	for id, st := range now {
		was := w.seen[id]
		w.rec.Snapshots(opsevents.SnapshotSent, id, moved(was.SnapshotsSent, st.SnapshotsSent))
		w.rec.Snapshots(opsevents.SnapshotFailed, id, moved(was.SnapshotsFailed, st.SnapshotsFailed))
		w.rec.Snapshots(opsevents.SnapshotReceived, id, moved(was.SnapshotsReceived, st.SnapshotsReceived))
	}
	w.seen = now
	s := w.stalls()
	w.rec.WriteStalls(s.LastReason, moved(w.stallsSeen, s.Count))
	w.stallsSeen = s.Count
}

// moved is how far a counter went from was to now; a counter below its
// last value started again from zero (a peer removed and added again).
func moved(was, now uint64) uint64 {
	if now < was {
		return now
	}
	return now - was
}
