package app

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
)

// The storage files of the local-diagnostic layer (ADR 0021), plain text
// for curl, diff and grep:
//
//   - /manifest: what the store is: its formats, content root, chain, and
//     the head of its segment chain.
//   - /journal.log: the segment chain, one line per segment, oldest first
//     (internal/segments).

// registerStorageFiles adds the storage file routes.
func (v *opsViews) registerStorageFiles(e *echo.Echo) {
	e.GET("/manifest", v.manifest)
	e.GET("/journal.log", v.journal)
}

// manifestVersion numbers the manifest's keys: a reader that finds a
// higher one may meet keys it does not know.
const manifestVersion = 1

// manifest serves GET /manifest: key=value lines in a fixed order, read
// at one applied index: this validator's own, then the segment store's.
func (v *opsViews) manifest(c echo.Context) error {
	store, err := v.segments.Manifest()
	if err != nil {
		return err
	}
	contract := "none"
	if v.cfg.ContractAddress != "" {
		contract = strings.ToLower(v.cfg.ContractAddress)
	}
	lines := append([]segments.KeyValue{
		{Key: "manifest.version", Value: strconv.Itoa(manifestVersion)},
		{Key: "node.id", Value: strconv.FormatUint(v.cfg.NodeID, 10)},
		{Key: "applied.index", Value: strconv.FormatUint(store.AppliedIndex, 10)},
		{Key: "mode", Value: string(v.cfg.Mode)},
		{Key: "content.root", Value: v.cfg.ContentRoot},
		{Key: "chain.id", Value: strconv.FormatUint(v.cfg.ChainID, 10)},
		{Key: "chain.contract", Value: contract},
	}, store.Lines...)
	var b strings.Builder
	b.WriteString("# contentledger store manifest (ADR 0021)\n")
	for _, kv := range lines {
		b.WriteString(kv.Key)
		b.WriteByte('=')
		b.WriteString(kv.Value)
		b.WriteByte('\n')
	}
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, echo.MIMETextPlainCharsetUTF8, []byte(b.String()))
}

// journal serves GET /journal.log[?from=N]: a line per segment with index
// >= N (default: all), oldest first, streamed from one Pebble snapshot.
func (v *opsViews) journal(c echo.Context) error {
	from := uint64(1)
	if values, given := c.QueryParams()["from"]; given {
		n, err := strconv.ParseUint(values[0], 10, 64)
		if len(values) != 1 || err != nil || n < 1 {
			return apierror.Field("from", "must be one raft index, an integer of at least 1")
		}
		from = n
	}
	j, err := v.segments.OpenJournal(from)
	if err != nil {
		return err
	}
	defer j.Close()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextPlainCharsetUTF8)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Applied-Index", strconv.FormatUint(j.AppliedIndex, 10))
	arm, done := streamOK(c)
	defer done()
	return j.Write(c.Response(), arm)
}
