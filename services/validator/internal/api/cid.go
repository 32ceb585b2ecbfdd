package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// The CID routes of the local-diagnostic layer: the CIDs of binaries live
// nodes reference (the ledger:cid property), counted and looked up
// (internal/segments). Validators keep CIDs, never the binaries.

// cidStats serves GET /api/cid/stats.
func (s *Server) cidStats(c echo.Context) error {
	out, err := s.deps.Segments.CIDStats()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// cidReverse serves GET /api/cid/reverse/{cid}: the live nodes that
// reference a CID, what unpinning it would break.
func (s *Server) cidReverse(c echo.Context) error {
	cid := c.Param("cid")
	if err := proposal.ValidateCID(cid); err != nil {
		return apierror.Field("cid", "%v", err)
	}
	out, err := s.deps.Segments.CIDReferences(cid)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
