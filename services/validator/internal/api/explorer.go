package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// lookupProposal reads the :id proposal's status, waiting up to wait for a
// change. A follower holds only applied records: for a proposal still in
// the leader's pipeline it forwards the request to the leader; without a
// leader, the local answer stands. handled is true when the forwarded
// answer was written.
func (s *Server) lookupProposal(c echo.Context, wait time.Duration) (status api.ProposalStatus, handled bool, err error) {
	id, ok := proposal.ParseHash(c.Param("id"))
	if !ok {
		return status, false, apierror.Field("proposalId", "must be 0x followed by 64 hex digits")
	}
	status, err = s.deps.Proposals.WaitStatus(c.Request().Context(), id, wait)
	if apierror.CodeOf(err) == apierror.NotFound {
		if fwd, ferr := s.forward(c); fwd && ferr == nil {
			return status, true, nil
		}
	}
	return status, false, err
}

func (s *Server) explorerProposal(c echo.Context) error {
	status, handled, err := s.lookupProposal(c, 0)
	if handled || err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.ExplorerProposal{ContractVersion: api.ExplorerProposalVersion, Proposal: status, Transaction: status.Payment})
}

// operation serves /v1/ops/operations/{operationId}: every write and delete
// is an operation named by its proposal id.
func (s *Server) operation(c echo.Context) error {
	status, handled, err := s.lookupProposal(c, 0)
	if handled || err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.Operation{ContractVersion: api.OperationVersion, OperationID: status.ProposalID,
		Kind: "proposal." + status.Action, Done: api.Terminal(status.Status), Status: status.Status, Error: status.Reason, Result: status})
}

// finality serves /v1/finality from applied state and this node's epoch
// clock.
func (s *Server) finality(c echo.Context) error {
	f, err := s.finalityView()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, f)
}

func (s *Server) finalityView() (api.Finality, error) {
	n, oldest, err := s.deps.Content.Unfinalized()
	if err != nil {
		return api.Finality{}, err
	}
	current, finalized := s.deps.Proposals.QueueStats().CurrentEpoch, s.deps.Content.FinalizedEpoch()
	counts, _ := s.deps.Content.Counts()
	f := api.Finality{ContractVersion: api.FinalityVersion, CurrentEpoch: current, FinalizedEpoch: finalized,
		EpochsUntilFinality: current - min(current, finalized), CommittedUnfinalized: n, LastCommitAt: msTime(counts.GetLastCommitAtMs())}
	if oldest != nil {
		f.OldestUnfinalizedEpoch = oldest.GetProposal().GetEpoch()
		if at := msTime(oldest.GetCommittedAtMs()); at != nil {
			f.OldestUnfinalizedAgeMs = max(0, s.now().Sub(*at).Milliseconds())
		}
	}
	return f, nil
}

// explorerSummary serves /v1/explorer/summary from the leader.
func (s *Server) explorerSummary(c echo.Context) error {
	if fwd, err := s.forward(c); fwd && err == nil {
		return nil
	}
	st := s.deps.Cluster.Status()
	q := s.deps.Proposals.QueueStats()
	fin, err := s.finalityView()
	if err != nil {
		return err
	}
	var sum api.ExplorerSummary
	sum.ContractVersion = api.ExplorerSummaryVersion
	sum.Identity.NodeID, sum.Identity.ClusterID = st.NodeID, st.ClusterID
	sum.Identity.Mode, sum.Identity.ChainID, sum.Identity.ContractAddress = s.cfg.Blockchain.Mode, s.cfg.Blockchain.ChainID, s.cfg.Blockchain.ContractAddress
	sum.Identity.Version = s.cfg.Version
	sum.Cluster.Leader, sum.Cluster.Term, sum.Cluster.Members = st.Leader, st.Term, len(s.deps.Cluster.Members())
	sum.Cluster.AppliedIndex, sum.Cluster.StateHash = st.AppliedIndex, st.StateHash
	for _, v := range q.ProposalsByEpoch {
		sum.Queue.Pending += v
	}
	sum.Queue.InFlight, sum.Queue.BackpressureActive = q.BackpressurePendingRawCount, q.BackpressureActive
	sum.Finality = fin
	return c.JSON(http.StatusOK, sum)
}

func (s *Server) proposalCounts(c echo.Context) error {
	n, index := s.deps.Content.Counts()
	byReason := n.GetRejectedByReason()
	if byReason == nil {
		byReason = map[string]uint64{}
	}
	return c.JSON(http.StatusOK, api.ProposalCounts{ContractVersion: api.ProposalCountsVersion, AppliedIndex: index,
		Committed: n.GetCommitted(), Finalized: n.GetFinalized(), Rejected: n.GetRejected(), Writes: n.GetWrites(),
		Deletes: n.GetDeletes(), RejectedByReason: byReason, PaymentOrphaned: n.GetPaymentOrphaned()})
}
