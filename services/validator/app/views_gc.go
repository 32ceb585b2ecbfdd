package app

import (
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// retainedGenerations is how many segment generations GC keeps: 2, fixed by
// the contract.
const retainedGenerations = 2

// noGcRun says why no GC run is reported: apply has no COMPACT entry yet.
const noGcRun = "no GC (COMPACT) run has been applied: this validator version does not propose or apply COMPACT entries, " +
	"so segments are never compacted or cleaned up and every segment stays in its generation"

// gcStatus serves GET /v1/gc/status: the GC debt accounts summed at one
// applied index, the segment generations, and the last GC run.
func (v *opsViews) gcStatus(c echo.Context) error {
	view, err := v.machine.ReadView()
	if err != nil {
		return err
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
		return err
	}
	d.PendingDebt, d.ExecutedDebt, d.Paid = api.DebtString(d.PendingDebtMicros), api.DebtString(d.ExecutedDebtMicros), api.DebtString(d.PaidMicros)
	gens := api.GcGenerations{Retained: retainedGenerations, Present: []uint32{}}
	if err := v.storage.withIndex(view, func(x *segmentIndex) {
		gens.Present = append(gens.Present, x.generations...)
		if n := len(x.generations); n > 0 {
			gens.Current = x.generations[n-1]
		}
	}); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.GcStatus{
		ContractVersion: api.GcStatusVersion, NodeID: v.cfg.NodeID, AppliedIndex: view.AppliedIndex(), Debt: d, Generations: gens,
		LastRun: nil, Gaps: []api.Gap{{Field: "lastRun", Reason: noGcRun}},
	})
}

// gcEstimate serves GET /v1/gc/estimate[?wallet=0x…] (marker gc.estimate.v1):
// what GC could reclaim, by TAR file, from the last scan of the state.
func (v *opsViews) gcEstimate(c echo.Context) error {
	var wallet *common.Address
	if c.QueryParams().Has("wallet") {
		w, err := parseWallet(c.QueryParam("wallet"), "wallet")
		if err != nil {
			return err
		}
		wallet = &w
	}
	s, err := v.storage.live()
	if err != nil {
		return err
	}
	out := api.GcEstimate{ContractVersion: api.GcEstimateVersion, NodeID: v.cfg.NodeID, AppliedIndex: s.applied, ComputedAt: s.at.UTC(),
		ByTar: []api.TarEstimate{}}
	if wallet == nil {
		for i, f := range s.tars {
			live := min(s.tarLive[i], f.bytes)
			out.ByTar = append(out.ByTar, api.TarEstimate{Name: tarName(i, f.generation), Generation: f.generation, Segments: f.segments,
				Bytes: f.bytes, WrittenBytes: f.written, LiveBytes: live, ReclaimableBytes: f.bytes - live})
			out.SegmentBytes += f.bytes
			out.WrittenBytes += f.written
			out.LiveBytes += live
			out.ReclaimableBytes += f.bytes - live
		}
		return c.JSON(http.StatusOK, out)
	}
	out.Wallet = walletHex(*wallet)
	ww := s.written[*wallet]
	wl := s.live[*wallet]
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
	return c.JSON(http.StatusOK, out)
}

// compactionProposals serves GET /v1/compaction/proposals. Apply knows no
// COMPACT entry yet, so applied state holds none; the gap says so.
func (v *opsViews) compactionProposals(c echo.Context) error {
	return c.JSON(http.StatusOK, api.CompactionProposals{
		ContractVersion: api.CompactionProposalsVersion, NodeID: v.cfg.NodeID, AppliedIndex: v.machine.AppliedIndex(),
		Proposals: []api.CompactionProposal{},
		Gaps: []api.Gap{{Field: "proposals", Reason: "this validator version has no GC proposal lifecycle (propose-gc, vote, " +
			"COMPACT entries): no compaction proposal can exist, so the list stays empty"}},
	})
}

// parseWallet reads a wallet address, 0x and 40 hex digits.
func parseWallet(raw, field string) (common.Address, error) {
	if len(raw) != 42 || raw[:2] != "0x" || !common.IsHexAddress(raw) {
		return common.Address{}, apierror.Field(field, "must be 0x followed by 40 hex digits")
	}
	return common.HexToAddress(raw), nil
}
