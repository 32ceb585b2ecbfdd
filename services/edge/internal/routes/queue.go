package routes

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// leaderFields reads a source route from the leader as the data of an ops
// envelope: every field of the source's answer, plus the sources asked.
func (s *server) leaderFields(c echo.Context, route, contractVersion string) (map[string]any, error) {
	data := map[string]any{}
	sources, err := s.fromLeader(c.Request().Context(), route, contractVersion, &data)
	if err != nil {
		return nil, err
	}
	data["sources"] = sources
	return data, nil
}

// passThrough serves a source route of the leader as it answers.
func (s *server) passThrough(route, contractVersion string) echo.HandlerFunc {
	return func(c echo.Context) error {
		data, err := s.leaderFields(c, route, contractVersion)
		if err != nil {
			return err
		}
		return s.envelope(c, data)
	}
}

func (s *server) queueFields(c echo.Context) (map[string]any, error) {
	return s.leaderFields(c, "/v1/proposals/queue/stats", api.QueueStatsVersion)
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

// walletPattern is a wallet address as the explorer route takes it.
var walletPattern = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)

// explorerWallet is /ops/v1/explorer/wallets/{wallet} from the leader.
func (s *server) explorerWallet(c echo.Context) error {
	w := c.Param("wallet")
	if !walletPattern.MatchString(w) {
		return &opsError{http.StatusNotFound, CodeNotFound, "wallet addresses are 0x followed by 40 hex digits", false}
	}
	data, err := s.leaderFields(c, "/v1/explorer/wallets/"+strings.ToLower(w), api.ExplorerWalletVersion)
	if err != nil {
		return err
	}
	return s.envelope(c, data)
}

// proposals is /ops/v1/proposals, the proposal state rollup: the decided
// counts of applied state and the leader's queue.
func (s *server) proposals(c echo.Context) error {
	var counts api.ProposalCounts
	sources, err := s.fromLeader(c.Request().Context(), "/v1/proposals/counts", api.ProposalCountsVersion, &counts)
	if err != nil {
		return err
	}
	var q api.QueueStats
	more, err := s.fromLeader(c.Request().Context(), "/v1/proposals/queue/stats", api.QueueStatsVersion, &q)
	if err != nil {
		return err
	}
	pending := 0
	for _, n := range q.ProposalsByEpoch {
		pending += n
	}
	decided := q.QueuedProposals + q.BackpressurePendingRawCount // verified (or rejected) and not yet applied
	return s.envelope(c, map[string]any{
		"states": map[string]any{
			"pending":   max(0, pending-decided),
			"verified":  decided,
			"committed": counts.Committed - min(counts.Finalized, counts.Committed),
			"finalized": counts.Finalized,
			"rejected":  counts.Rejected,
		},
		"types":              map[string]any{"write": counts.Writes, "delete": counts.Deletes},
		"rejectionsByReason": counts.RejectedByReason,
		"epochs":             map[string]any{"current": q.CurrentEpoch, "finalized": q.FinalizedEpoch, "pending": q.ProposalsByEpoch},
		"appliedIndex":       counts.AppliedIndex,
		"sources":            append(sources, more...),
	})
}
