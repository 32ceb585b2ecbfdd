package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// MockEpochs is the MOCK mode epoch clock, which the /api/mock/* test
// surfaces move.
type MockEpochs interface {
	Current() uint64
	Finalized() uint64
	Advance(n uint64)
	SetOffset(offset int64) bool
	Offset() int64
	NextIn() time.Duration
	Length() time.Duration
}

// maxMockAdvance bounds one advance, so a typo cannot push the clock
// decades ahead.
const maxMockAdvance = 10_000

// The mock routes act on the leader's clock, which stamps proposals and
// decides finality: a follower forwards them.

func (s *Server) mockEpochStatus(c echo.Context) error {
	return s.fromLeader(c, func() any { return s.mockStatus() })
}

func (s *Server) mockAdvanceEpoch(c echo.Context) error {
	n := uint64(1)
	if raw := c.QueryParam("epochs"); raw != "" {
		v, err := strconv.ParseUint(raw, 10, 64)
		if err != nil || v == 0 || v > maxMockAdvance {
			return apierror.Field("epochs", "must be an integer from 1 to %d", maxMockAdvance)
		}
		n = v
	}
	if handled, err := s.forward(c); handled {
		return err
	}
	s.deps.MockEpochs.Advance(n)
	return c.JSON(http.StatusOK, s.mockStatus())
}

func (s *Server) mockSetEpochOffset(c echo.Context) error {
	offset, err := strconv.ParseInt(c.QueryParam("offset"), 10, 64)
	if err != nil {
		return apierror.Field("offset", "must be an integer number of epochs")
	}
	if handled, err := s.forward(c); handled {
		return err
	}
	if !s.deps.MockEpochs.SetOffset(offset) {
		return apierror.Field("offset", "would move the epoch below 0")
	}
	return c.JSON(http.StatusOK, s.mockStatus())
}

func (s *Server) mockStatus() api.MockEpochStatus {
	m := s.deps.MockEpochs
	return api.MockEpochStatus{
		ContractVersion: api.MockEpochStatusVersion, NodeID: s.deps.Cluster.Status().NodeID,
		CurrentEpoch: m.Current(), FinalizedEpoch: m.Finalized(), Offset: m.Offset(),
		EpochLengthSeconds: uint64(m.Length() / time.Second), NextEpochInMs: m.NextIn().Milliseconds(),
	}
}
