package segments

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// What GC could reclaim, and where it stands. Compaction itself is a
// replicated entry (GcCompact, internal/state compact.go, docs/adr/0033);
// these views read the runs applied state records.

// noGcRun says why no GC run is reported yet.
const noGcRun = "no GC (COMPACT) run has been applied yet: the leader proposes one on an epoch finalization once the " +
	"segment bytes written since the last run reach the GC threshold (gcSizeDeltaEstimation)"

// GcStatus sums the GC debt accounts at one applied index, with the segment
// generations present at that index and the last GC run.
func (c *Catalog) GcStatus() (api.GcStatus, error) {
	gens := api.GcGenerations{Retained: RetainedGenerations, Present: []uint32{}}
	view, err := c.openIndexed(func(_ uint64, x *segmentIndex) {
		gens.Present = append(gens.Present, x.generations...)
		gens.Current, _ = x.currentGeneration()
	})
	if err != nil {
		return api.GcStatus{}, err
	}
	defer view.Close()
	d := api.GcDebt{BlockedWallets: []string{}, DefaultLimitMicros: state.DefaultDebtLimitMicros,
		DefaultLimit: api.DebtString(state.DefaultDebtLimitMicros), LastJobEpoch: view.GcEpoch()}
	if err := view.Accounts(func(acc *ledgerpb.GcAccount) error {
		d.Accounts++
		d.PendingDebtMicros += acc.GetPendingDebtMicros()
		d.ExecutedDebtMicros += acc.GetExecutedDebtMicros()
		d.PaidMicros += acc.GetPaidMicros()
		d.Deletes += acc.GetDeletes()
		d.DeletedBytes += acc.GetDeletedBytes()
		if state.WritesBlocked(acc) {
			d.WalletsBlocked++
			if len(d.BlockedWallets) < api.MaxBlockedWallets {
				d.BlockedWallets = append(d.BlockedWallets, walletHex([20]byte(acc.GetWallet())))
			} else {
				d.BlockedWalletsTruncated = true
			}
		}
		return nil
	}); err != nil {
		return api.GcStatus{}, err
	}
	d.PendingDebt, d.ExecutedDebt, d.Paid = api.DebtString(d.PendingDebtMicros), api.DebtString(d.ExecutedDebtMicros), api.DebtString(d.PaidMicros)
	out := api.GcStatus{
		ContractVersion: api.GcStatusVersion, NodeID: c.cfg.NodeID, AppliedIndex: view.AppliedIndex(), Debt: d, Generations: gens,
		Gaps: []api.Gap{},
	}
	if run := view.LastGcRun(); run != nil {
		r := gcRun(run)
		out.LastRun = &r
	} else {
		out.Gaps = append(out.Gaps, api.Gap{Field: "lastRun", Reason: noGcRun})
	}
	return out, nil
}

// gcRun renders a run's record.
func gcRun(run *ledgerpb.GcRun) api.GcRun {
	out := api.GcRun{Run: run.GetRun(), At: time.UnixMilli(run.GetAtMs()).UTC(), Epoch: run.GetEpoch(), CommitIndex: run.GetIndex(),
		State: api.GcRunStateOf(run), Abandoned: run.GetAbandoned(), Steps: run.GetSteps(), EndIndex: run.GetEndIndex(),
		Generation: run.GetGeneration(), KeptFromGeneration: run.GetKeptFromGeneration(), LiveNodes: run.GetLiveNodes(),
		NodesCurrent: run.GetNodesCurrent(), SegmentsWritten: run.GetSegmentsWritten(), BytesWritten: run.GetBytesWritten(),
		SegmentsReclaimed: run.GetSegmentsReclaimed(), ReclaimedBytes: run.GetBytesReclaimed(), GarbageBytes: run.GetGarbageBytes(),
		OldHead: hexBytes(run.GetOldHead())}
	if run.GetEndIndex() > 0 {
		end := time.UnixMilli(run.GetEndAtMs()).UTC()
		out.EndAt, out.StateHash = &end, hexBytes(run.GetStateHash())
	}
	return out
}

func hexBytes(b []byte) string { return "0x" + hex.EncodeToString(b) }

// GcEstimate is what GC could reclaim, by TAR file, from the kept scan: a
// TAR file's stored bytes its live nodes no longer carry.
func (c *Catalog) GcEstimate() (api.GcEstimate, error) {
	s, err := c.live()
	if err != nil {
		return api.GcEstimate{}, err
	}
	out := c.estimate(s)
	for i, f := range s.tars {
		live := min(s.tarLive[i], f.bytes)
		out.ByTar = append(out.ByTar, api.TarEstimate{Name: f.name(), Generation: f.generation, Segments: f.segments,
			Bytes: f.bytes, WrittenBytes: f.written, LiveBytes: live, ReclaimableBytes: f.bytes - live})
		out.SegmentBytes += f.bytes
		out.WrittenBytes += f.written
		out.LiveBytes += live
		out.ReclaimableBytes += f.bytes - live
	}
	return out, nil
}

// WalletGcEstimate is what GC could reclaim of one wallet's writes, by the
// TAR files the wallet wrote to.
func (c *Catalog) WalletGcEstimate(wallet common.Address) (api.GcEstimate, error) {
	s, err := c.live()
	if err != nil {
		return api.GcEstimate{}, err
	}
	out := c.estimate(s)
	out.Wallet = walletHex(wallet)
	ww := s.written[wallet]
	wl := s.live[wallet]
	for i, f := range s.tars {
		var written, live uint64
		if ww != nil {
			written = ww.byTar[i].written
		}
		if wl != nil {
			live = min(wl.byTar[i], written)
		}
		if written == 0 {
			continue // a TAR file the wallet wrote nothing to
		}
		out.ByTar = append(out.ByTar, api.TarEstimate{Name: f.name(), Generation: f.generation, Segments: f.segments,
			Bytes: f.bytes, WrittenBytes: written, LiveBytes: live, ReclaimableBytes: written - live})
		out.SegmentBytes += f.bytes
		out.WrittenBytes += written
		out.LiveBytes += live
		out.ReclaimableBytes += written - live
	}
	return out, nil
}

// estimate is an estimate of scan s with nothing added up yet.
func (c *Catalog) estimate(s *liveScan) api.GcEstimate {
	return api.GcEstimate{ContractVersion: api.GcEstimateVersion, NodeID: c.cfg.NodeID, AppliedIndex: s.applied, ComputedAt: s.at.UTC(),
		ByTar: []api.TarEstimate{}, CleanupCost: cleanupCost(s.lastDone)}
}

// cleanupCost is GC debt's price of cleanup as the newest completed run
// sets it (state.CleanupCostBytes).
func cleanupCost(done *ledgerpb.GcRun) api.GcCleanupCost {
	const mb = 1_000_000
	costBytes := state.CleanupCostBytes(mb, done)
	perMB := state.DeleteDebtMicros(costBytes)
	cost := float64(costBytes) / mb
	return api.GcCleanupCost{Run: done.GetRun(), RewriteBytesPerGarbageByte: cost - 1, CostBytesPerDeletedByte: cost,
		DebtPerDeletedMB: api.DebtString(perMB), DebtPerDeletedMBMicros: perMB}
}

// CompactionStateApplied is the state of a COMPACT entry applied state
// holds: committed and applied here (a proposal raft lost is in no state).
const CompactionStateApplied = "applied"

// CompactionProposals lists the COMPACT entries applied state holds, oldest
// first. Only applied ones are known to every validator alike: a proposal
// in flight is the leader's business (its sender proposes it until applied).
func (c *Catalog) CompactionProposals() (api.CompactionProposals, error) {
	view, err := c.machine.ReadView()
	if err != nil {
		return api.CompactionProposals{}, err
	}
	defer view.Close()
	out := api.CompactionProposals{
		ContractVersion: api.CompactionProposalsVersion, NodeID: c.cfg.NodeID, AppliedIndex: view.AppliedIndex(),
		Proposals: []api.CompactionProposal{}, Gaps: []api.Gap{},
	}
	if err := view.GcRuns(func(run *ledgerpb.GcRun) error {
		out.Proposals = append(out.Proposals, api.CompactionProposal{ProposalID: fmt.Sprintf("compact-%d", run.GetRun()),
			State: CompactionStateApplied, Epoch: run.GetEpoch(), Generation: run.GetGeneration(), CommitIndex: run.GetIndex(),
			Run: run.GetRun(), RunState: api.GcRunStateOf(run), Steps: run.GetSteps(), EndIndex: run.GetEndIndex()})
		return nil
	}); err != nil {
		return api.CompactionProposals{}, err
	}
	if len(out.Proposals) == 0 {
		out.Gaps = append(out.Gaps, api.Gap{Field: "proposals", Reason: noGcRun})
	}
	return out, nil
}
