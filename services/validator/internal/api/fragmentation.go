package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// The fragmentation routes (source): every wallet's bytes written against
// its live bytes (internal/segments).

// fragmentationMetrics serves GET /v1/fragmentation/metrics: the figures
// summed, and the first wallets in address order.
func (s *Server) fragmentationMetrics(c echo.Context) error {
	out, err := s.deps.Segments.Fragmentation()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// fragmentationWallet serves GET /v1/fragmentation/metrics/{walletAddress};
// 404 for a wallet no segment wrote or deleted anything of.
func (s *Server) fragmentationWallet(c echo.Context) error {
	w, err := walletParam(c)
	if err != nil {
		return err
	}
	out, err := s.deps.Segments.WalletFragmentation(w)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// fragmentationTop serves GET /v1/fragmentation/top?limit=N (at least 1,
// default api.DefaultFragmentationTop): the wallets by fragmentation score,
// then dead bytes, highest first, then by address.
func (s *Server) fragmentationTop(c echo.Context) error {
	limit := api.DefaultFragmentationTop
	if values, given := c.QueryParams()["limit"]; given {
		n, err := strconv.Atoi(values[0])
		if len(values) != 1 || err != nil || n < 1 {
			return apierror.Field("limit", "must be one integer of at least 1")
		}
		limit = n
	}
	out, err := s.deps.Segments.TopFragmented(limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
