package app

import (
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
)

// retainedGenerations is how many segment generations GC keeps, fixed by
// the contract (segments.RetainedGenerations).
const retainedGenerations = segments.RetainedGenerations

// gcStatus serves GET /v1/gc/status: the GC debt accounts summed at one
// applied index, the segment generations, and the last GC run.
func (v *opsViews) gcStatus(c echo.Context) error {
	out, err := v.segments.GcStatus()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// gcEstimate serves GET /v1/gc/estimate[?wallet=0x…] (marker gc.estimate.v1):
// what GC could reclaim, by TAR file, from the last scan of the state.
func (v *opsViews) gcEstimate(c echo.Context) error {
	if !c.QueryParams().Has("wallet") {
		out, err := v.segments.GcEstimate()
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
	w, err := parseWallet(c.QueryParam("wallet"), "wallet")
	if err != nil {
		return err
	}
	out, err := v.segments.WalletGcEstimate(w)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// compactionProposals serves GET /v1/compaction/proposals.
func (v *opsViews) compactionProposals(c echo.Context) error {
	return c.JSON(http.StatusOK, v.segments.CompactionProposals())
}

// parseWallet reads a wallet address, 0x and 40 hex digits.
func parseWallet(raw, field string) (common.Address, error) {
	if len(raw) != 42 || raw[:2] != "0x" || !common.IsHexAddress(raw) {
		return common.Address{}, apierror.Field(field, "must be 0x followed by 40 hex digits")
	}
	return common.HexToAddress(raw), nil
}
