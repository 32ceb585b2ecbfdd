package app

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// The CID routes of the local-diagnostic layer: the CIDs of binaries live
// nodes reference (the ledger:cid property), counted and looked up
// (internal/segments).

func (v *opsViews) registerCIDs(e *echo.Echo) {
	e.GET("/api/cid/stats", v.cidStats)
	e.GET("/api/cid/reverse/:cid", v.cidReverse)
}

func (v *opsViews) cidStats(c echo.Context) error {
	out, err := v.segments.CIDStats()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (v *opsViews) cidReverse(c echo.Context) error {
	cid := c.Param("cid")
	if err := proposal.ValidateCID(cid); err != nil {
		return apierror.Field("cid", "%v", err)
	}
	out, err := v.segments.CIDReferences(cid)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
