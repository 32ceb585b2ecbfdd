package segments

import (
	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// What GC could reclaim, and where it stands. Apply knows no COMPACT entry
// yet: segments are never compacted, every one stays in its generation,
// and the answers say so in their gaps. Storage GC, when it comes, lands
// here.

// noGcRun says why no GC run is reported: apply has no COMPACT entry yet.
const noGcRun = "no GC (COMPACT) run has been applied: this validator version does not propose or apply COMPACT entries, " +
	"so segments are never compacted or cleaned up and every segment stays in its generation"

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
	return api.GcStatus{
		ContractVersion: api.GcStatusVersion, NodeID: c.cfg.NodeID, AppliedIndex: view.AppliedIndex(), Debt: d, Generations: gens,
		LastRun: nil, Gaps: []api.Gap{{Field: "lastRun", Reason: noGcRun}},
	}, nil
}

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
		out.ByTar = append(out.ByTar, api.TarEstimate{Name: tarName(i, f.generation), Generation: f.generation, Segments: f.segments,
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
			written = ww.byTar[i]
		}
		if wl != nil {
			live = min(wl.byTar[i], written)
		}
		if written == 0 {
			continue // a TAR file the wallet wrote nothing to
		}
		out.ByTar = append(out.ByTar, api.TarEstimate{Name: tarName(i, f.generation), Generation: f.generation, Segments: f.segments,
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
		ByTar: []api.TarEstimate{}}
}

// CompactionProposals lists the compaction proposals in applied state:
// none, since apply knows no COMPACT entry yet; the gap says so.
func (c *Catalog) CompactionProposals() api.CompactionProposals {
	return api.CompactionProposals{
		ContractVersion: api.CompactionProposalsVersion, NodeID: c.cfg.NodeID, AppliedIndex: c.machine.AppliedIndex(),
		Proposals: []api.CompactionProposal{},
		Gaps: []api.Gap{{Field: "proposals", Reason: "this validator version has no GC proposal lifecycle (propose-gc, vote, " +
			"COMPACT entries): no compaction proposal can exist, so the list stays empty"}},
	}
}
