package app

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
)

// The segment routes of the local-diagnostic layer: the TAR files of the
// storage model listed (/api/segments/tars), the newest segments
// (/api/segments/recent), and each TAR file streamed out as a real tar
// archive (/segments/{name}, pkg/segarchive) for backups and offline
// checks of the hash chain (ledgerctl segments verify). internal/segments
// computes them.

// tarTargetBytes is the TAR file size the validator groups segments by:
// the default, which every validator of a cluster shares.
const tarTargetBytes = segments.DefaultTarTargetBytes


// archiveWriteTimeout cuts off a client that takes no archive bytes for
// this long: the stream reads through a Pebble snapshot, which a stalled
// client would otherwise hold open.
const archiveWriteTimeout = 30 * time.Second

// registerSegments adds the segment routes.
func (v *opsViews) registerSegments(e *echo.Echo) {
	e.GET("/api/segments/tars", v.segmentTars)
	e.GET("/api/segments/recent", v.recentSegments)
	e.GET("/segments/:name", v.segmentArchive)
}

// segmentTars serves GET /api/segments/tars.
func (v *opsViews) segmentTars(c echo.Context) error {
	out, err := v.segments.Tars()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// recentSegments serves GET /api/segments/recent[?limit=N].
func (v *opsViews) recentSegments(c echo.Context) error {
	limit := api.DefaultRecentSegments
	if values, given := c.QueryParams()["limit"]; given {
		n, err := strconv.Atoi(values[0])
		if len(values) != 1 || err != nil || n < 1 || n > api.MaxRecentSegments {
			return apierror.Field("limit", "must be one integer from 1 to %d", api.MaxRecentSegments)
		}
		limit = n
	}
	out, err := v.segments.Recent(limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// segmentArchive serves GET /segments/{name}: the TAR file's segments as
// of now, as a segment archive. A closed TAR file never changes; the newest
// one is archived up to its newest segment, a prefix of what it will hold.
func (v *opsViews) segmentArchive(c echo.Context) error {
	name := c.Param("name")
	a, err := v.segments.OpenArchive(name)
	if err != nil {
		return err
	}
	defer a.Close()
	m := a.Manifest
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/x-tar")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	h.Set("X-Segments-First", strconv.FormatUint(m.FirstIndex, 10))
	h.Set("X-Segments-Last", strconv.FormatUint(m.LastIndex, 10))
	h.Set("X-Segments-Head", m.HeadHash)
	// The head hash names the bytes: a closed file's never change.
	h.Set("ETag", `"`+m.HeadHash+`"`)
	if a.Closed {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	arm, done := streamOK(c)
	defer done()
	return a.Write(c.Response(), arm)
}

// streamOK sends status 200 with the headers set so far, and returns arm,
// which gives the client archiveWriteTimeout from now to take the next
// bytes (a stalled client would otherwise hold open the Pebble snapshot
// the answer is read from), to be called before each write; and done,
// which clears that deadline. A failure from here on cuts the answer
// short: the error handler drops the connection (internal/api), so the
// reader never takes a part for the whole.
func streamOK(c echo.Context) (arm, done func()) {
	c.Response().WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.Response())
	arm = func() { _ = rc.SetWriteDeadline(time.Now().Add(archiveWriteTimeout)) }
	arm()
	return arm, func() { _ = rc.SetWriteDeadline(time.Time{}) }
}
