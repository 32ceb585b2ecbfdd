package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
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
	if s.deps.Blobs != nil {
		if out.BlobMappings, out.BlobBytes, err = s.deps.Blobs.BlobTotals(); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, out)
}

// cidReverse serves GET /api/cid/reverse/{cid}: the live nodes that
// reference a CID, what unpinning it would break, and the blob a completed
// upload mapped it to; 404 when there is neither.
func (s *Server) cidReverse(c echo.Context) error {
	cid := c.Param("cid")
	if err := proposal.ValidateCID(cid); err != nil {
		return apierror.Field("cid", "%v", err)
	}
	mapped, err := s.cidBlob(cid)
	if err != nil {
		return err
	}
	out, err := s.deps.Segments.CIDReferences(cid)
	if errors.Is(err, &apierror.Error{Code: apierror.NotFound}) && mapped != nil {
		out, err = api.CIDReverse{CID: cid, AppliedIndex: mapped.CommitIndex, Nodes: []api.CIDReference{}}, nil
	}
	if err != nil {
		return err
	}
	out.Blob = mapped
	return c.JSON(http.StatusOK, out)
}
