package app

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// fragmentationMetrics serves GET /v1/fragmentation/metrics: every wallet's
// bytes written against its live bytes, summed, and the first wallets in
// address order.
func (v *opsViews) fragmentationMetrics(c echo.Context) error {
	s, err := v.storage.live()
	if err != nil {
		return err
	}
	all := s.wallets()
	out := api.FragmentationMetrics{ContractVersion: api.FragmentationMetricsVersion, FragmentationComputed: s.computed(v.cfg.NodeID),
		Totals: api.FragmentationTotals{Wallets: len(all), TarFiles: len(s.tars)}}
	for _, f := range all {
		out.Totals.BytesWritten += f.BytesWritten
		out.Totals.LiveBytes += f.LiveBytes
		out.Totals.DeadBytes += f.DeadBytes
	}
	if out.Totals.BytesWritten > 0 {
		out.Totals.FragmentationScore = float64(out.Totals.DeadBytes) / float64(out.Totals.BytesWritten)
	}
	if len(all) > api.MaxFragmentationWallets {
		all, out.WalletsTruncated = all[:api.MaxFragmentationWallets], true
	}
	out.Wallets = all
	return c.JSON(http.StatusOK, out)
}

// fragmentationWallet serves GET /v1/fragmentation/metrics/{walletAddress};
// 404 for a wallet no segment wrote or deleted anything of.
func (v *opsViews) fragmentationWallet(c echo.Context) error {
	w, err := parseWallet(c.Param("wallet"), "walletAddress")
	if err != nil {
		return err
	}
	s, err := v.storage.live()
	if err != nil {
		return err
	}
	f, ok := s.fragmentation(w)
	if !ok {
		return apierror.New(apierror.NotFound, "wallet %s has written nothing (as of applied index %d)", strings.ToLower(w.Hex()), s.applied)
	}
	return c.JSON(http.StatusOK, api.FragmentationWallet{ContractVersion: api.FragmentationWalletVersion,
		FragmentationComputed: s.computed(v.cfg.NodeID), WalletFragmentation: f})
}

// fragmentationTop serves GET /v1/fragmentation/top?limit=N (at least 1,
// default api.DefaultFragmentationTop): the wallets by fragmentation score,
// then dead bytes, highest first, then by address.
func (v *opsViews) fragmentationTop(c echo.Context) error {
	limit := api.DefaultFragmentationTop
	if values, given := c.QueryParams()["limit"]; given {
		n, err := strconv.Atoi(values[0])
		if len(values) != 1 || err != nil || n < 1 {
			return apierror.Field("limit", "must be one integer of at least 1")
		}
		limit = n
	}
	s, err := v.storage.live()
	if err != nil {
		return err
	}
	all := s.wallets()
	slices.SortStableFunc(all, func(a, b api.WalletFragmentation) int {
		if c := cmp.Compare(b.FragmentationScore, a.FragmentationScore); c != 0 {
			return c
		}
		return cmp.Compare(b.DeadBytes, a.DeadBytes) // equal: address order, as wallets() gives them
	})
	return c.JSON(http.StatusOK, api.FragmentationTop{ContractVersion: api.FragmentationTopVersion,
		FragmentationComputed: s.computed(v.cfg.NodeID), Limit: limit, Wallets: all[:min(limit, len(all))]})
}
