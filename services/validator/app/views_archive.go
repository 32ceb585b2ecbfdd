package app

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/segarchive"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// The segment routes of the local-diagnostic layer: the TAR files of the
// storage model listed (/api/segments/tars), the newest segments
// (/api/segments/recent), and each TAR file streamed out as a real tar
// archive (/segments/{name}, pkg/segarchive) for backups and offline
// checks of the hash chain (ledgerctl segments verify).

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
	view, err := v.machine.ReadView()
	if err != nil {
		return err
	}
	defer view.Close()
	out := api.SegmentTars{NodeID: v.cfg.NodeID, AppliedIndex: view.AppliedIndex(), TargetBytes: tarTargetBytes}
	if err := v.storage.withIndex(view, func(x *segmentIndex) { out.Tars = x.tarFiles() }); err != nil {
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
	view, err := v.machine.ReadView()
	if err != nil {
		return err
	}
	defer view.Close()
	var tars []tarFile
	if err := v.storage.withIndex(view, func(x *segmentIndex) { tars = append(tars, x.tars...) }); err != nil {
		return err
	}
	out := api.RecentSegments{NodeID: v.cfg.NodeID, AppliedIndex: view.AppliedIndex(), Limit: limit, Segments: []api.SegmentInfo{}}
	err = view.NewestSegments(func(index uint64, raw []byte) (bool, error) {
		seg := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, seg); err != nil {
			return false, fmt.Errorf("%w: segment %d: %v", state.ErrCorruptState, index, err)
		}
		info := api.SegmentInfo{Index: index, Term: seg.GetTerm(), Epoch: seg.GetEpoch(), Generation: seg.GetGeneration(),
			Bytes: len(raw), Hash: hexHash(segarchive.Hash(raw)), PrevHash: "0x" + hex.EncodeToString(seg.GetPrevHash()),
			Proposals: len(seg.GetProposalIds())}
		info.NodeWrites, info.NodeDeletes = segarchive.CountOps(seg)
		if i := tarOf(tars, index); i >= 0 {
			info.Tar = tarName(i, tars[i].generation)
		}
		out.Segments = append(out.Segments, info)
		return len(out.Segments) < limit, nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// parseTarName returns the number a TAR file name (tarName) gives, ok
// false unless name is one tarName writes.
func parseTarName(name string) (int, bool) {
	body, prefixed := strings.CutPrefix(name, "data")
	body, suffixed := strings.CutSuffix(body, ".tar")
	if !prefixed || !suffixed || len(body) < 6 {
		return 0, false
	}
	letter := body[len(body)-1]
	n, err := strconv.Atoi(body[:len(body)-1])
	if err != nil || n < 0 || letter < 'a' || letter > 'z' {
		return 0, false
	}
	return n, tarName(n, uint32(letter-'a')) == name
}

// segmentArchive serves GET /segments/{name}: the TAR file's segments as
// of now, as a segment archive. A closed TAR file never changes; the newest
// one is archived up to its newest segment, a prefix of what it will hold.
// Every validator that applied the same segments serves the same bytes.
func (v *opsViews) segmentArchive(c echo.Context) error {
	name := c.Param("name")
	number, ok := parseTarName(name)
	if !ok {
		return apierror.New(apierror.NotFound, "%q is not a TAR file name (data00000a.tar); GET /api/segments/tars lists them", name)
	}
	view, err := v.machine.ReadView()
	if err != nil {
		return err
	}
	defer view.Close()
	var (
		file   tarFile
		closed bool
		found  bool
	)
	if err := v.storage.withIndex(view, func(x *segmentIndex) {
		if number < len(x.tars) && tarName(number, x.tars[number].generation) == name {
			file, closed, found = x.tars[number], x.closed(number), true
		}
	}); err != nil {
		return err
	}
	if !found {
		return apierror.New(apierror.NotFound, "no TAR file %s on this validator; GET /api/segments/tars lists them", name)
	}
	m := segarchive.Manifest{Name: name, FirstIndex: file.first, LastIndex: file.last, Segments: file.segments,
		Bytes: file.bytes, PrevHash: hexHash(file.prev), HeadHash: hexHash(file.head)}

	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/x-tar")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	h.Set("X-Segments-First", strconv.FormatUint(m.FirstIndex, 10))
	h.Set("X-Segments-Last", strconv.FormatUint(m.LastIndex, 10))
	h.Set("X-Segments-Head", m.HeadHash)
	// The head hash names the bytes: a closed file's never change.
	h.Set("ETag", `"`+m.HeadHash+`"`)
	if closed {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	bw, arm, done := streamOK(c)
	defer done()
	w, err := segarchive.NewWriter(bw, m)
	if err != nil {
		return err
	}
	if err := view.SegmentRange(file.first, file.last, func(index uint64, raw []byte) error {
		arm()
		return w.Add(index, raw)
	}); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// streamOK sends status 200 with the headers set so far, and returns a
// 64 KiB buffered writer over the answer; arm, which gives the client
// archiveWriteTimeout from now to take the next bytes (a stalled client
// would otherwise hold open the Pebble snapshot the answer is read from);
// and done, which clears that deadline. The caller flushes the writer. A
// failure from here on cuts the answer short: the error handler drops the
// connection (internal/api), so the reader never takes a part for the
// whole.
func streamOK(c echo.Context) (w *bufio.Writer, arm, done func()) {
	c.Response().WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.Response())
	arm = func() { _ = rc.SetWriteDeadline(time.Now().Add(archiveWriteTimeout)) }
	arm()
	return bufio.NewWriterSize(c.Response(), 64<<10), arm, func() { _ = rc.SetWriteDeadline(time.Time{}) }
}
