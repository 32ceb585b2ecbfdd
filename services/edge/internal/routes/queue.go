package routes

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// passThrough serves a source route of the leader as it answers: every
// field of the answer, its contractVersion included, plus the sources.
func (s *server) passThrough(src call) echo.HandlerFunc {
	return func(c echo.Context) error { return s.relay(c, src, true, "") }
}

// relay answers with src's answer as it is, plus the sources: the leader's
// answer, or any validator's when fromLeader is false. With notFound set, a
// 404 upstream is the edge's not_found with that text (routes with an id).
func (s *server) relay(c echo.Context, src call, fromLeader bool, notFound string) error {
	r := s.reader(c)
	read := r.read
	if fromLeader {
		read = r.readLeader
	}
	data := map[string]any{}
	status, err := read(src, &data)
	if err != nil {
		return err
	}
	if notFound != "" && status == http.StatusNotFound {
		return newError(CodeNotFound, "%s", notFound)
	}
	data["sources"] = r.attempts()
	return s.envelope(c, data)
}

// queue is /ops/v1/queue, the queue pressure summary: the leader's queue
// statistics with the figures an SRE reads first rolled up.
func (s *server) queue(c echo.Context) error {
	r := s.reader(c)
	data := map[string]any{}
	var q api.QueueStats
	if _, err := r.readLeader(at(srcQueueStats), &data, &q); err != nil {
		return err
	}
	pending, oldest := 0, int64(0)
	for _, e := range q.PendingEpochStats {
		pending += e.Pending
		oldest = max(oldest, e.OldestAgeMs)
	}
	data["pending"] = pending
	data["inFlight"] = q.BackpressurePendingRawCount
	data["oldestPendingAgeMs"] = oldest
	data["sources"] = r.attempts()
	return s.envelope(c, data)
}

// proposals is /ops/v1/proposals, the proposal state rollup: the decided
// counts of applied state and the leader's queue.
func (s *server) proposals(c echo.Context) error {
	r := s.reader(c)
	var counts api.ProposalCounts
	if _, err := r.readLeader(at(srcCounts), &counts); err != nil {
		return err
	}
	var q api.QueueStats
	if _, err := r.readLeader(at(srcQueueStats), &q); err != nil {
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
		"sources":            r.attempts(),
	})
}

// explorerProposal is the proposal detail: the status record (ADR 0005)
// and the payment transaction it spent, as any validator answers it
// (a follower asks the leader for a proposal it has not applied).
func (s *server) explorerProposal(c echo.Context) error {
	id := c.Param("proposalId")
	return s.relay(c, at(srcExplorerProposal).with("proposalId", id), false, "no proposal "+id)
}

// transaction is /ops/v1/transactions/{transactionId}: one payment
// transaction with its payments' blocks, confirmations, proposals and state
// history (ADR 0007), from the leader, whose applied state decides
// MATCHED and FINALIZED. The hash is asked in lowercase, so that every
// spelling of it shares one kept answer.
func (s *server) transaction(c echo.Context) error {
	id := strings.ToLower(c.Param("transactionId"))
	return s.relay(c, at(srcTransaction).with("transactionId", id), true, "no payment of transaction "+id+" is observed")
}

// explorerWallet is /ops/v1/explorer/wallets/{walletAddress}: the wallet's
// figures, GC account and first content, from the leader; a wallet with no
// content and no GC account is 404. Validators name wallets in lowercase.
func (s *server) explorerWallet(c echo.Context) error {
	w := strings.ToLower(c.Param("walletAddress"))
	return s.relay(c, at(srcExplorerWallet).with("walletAddress", w), true, "wallet "+w+" has no content and no GC account")
}
