package routes

import (
	"encoding/json"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// queueFields reads the leader's queue statistics as the data of an ops
// envelope: every field of the source, plus the sources asked.
func (s *server) queueFields(c echo.Context) (map[string]any, error) {
	var q api.QueueStats
	sources, err := s.fromLeader(c.Request().Context(), "/v1/proposals/queue/stats", api.QueueStatsVersion, &q)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	data := map[string]any{}
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, err
	}
	data["sources"] = sources
	return data, nil
}

// queueStats is /ops/v1/proposals/queue/stats: the leader's queue
// statistics as the validator reports them.
func (s *server) queueStats(c echo.Context) error {
	data, err := s.queueFields(c)
	if err != nil {
		return err
	}
	return s.envelope(c, data)
}

// queue is /ops/v1/queue, the queue pressure summary: the same statistics
// with the figures an SRE reads first rolled up.
func (s *server) queue(c echo.Context) error {
	data, err := s.queueFields(c)
	if err != nil {
		return err
	}
	var q api.QueueStats
	raw, _ := json.Marshal(data)
	_ = json.Unmarshal(raw, &q)
	pending, oldest := 0, int64(0)
	for _, e := range q.PendingEpochStats {
		pending += e.Pending
		oldest = max(oldest, e.OldestAgeMs)
	}
	data["pending"] = pending
	data["inFlight"] = q.BackpressurePendingRawCount
	data["oldestPendingAgeMs"] = oldest
	return s.envelope(c, data)
}
