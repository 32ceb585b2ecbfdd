package app

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// The storage files of the local-diagnostic layer (ADR 0021), plain text
// for curl, diff and grep:
//
//   - /manifest: what the store is: its formats, content root, chain, and
//     the head of its segment chain.
//   - /journal.log: the segment chain, one line per segment, oldest first.
//     Each hash commits to every segment before it, so the first line two
//     validators' journals differ on is where their histories part.

// registerStorageFiles adds the storage file routes.
func (v *opsViews) registerStorageFiles(e *echo.Echo) {
	e.GET("/manifest", v.manifest)
	e.GET("/journal.log", v.journal)
}

// manifestVersion numbers the manifest's keys: a reader that finds a
// higher one may meet keys it does not know.
const manifestVersion = 1

// manifest serves GET /manifest: key=value lines in a fixed order, read
// at one applied index.
func (v *opsViews) manifest(c echo.Context) error {
	view, err := v.machine.ReadView()
	if err != nil {
		return err
	}
	defer view.Close()
	var lines [][2]string
	if err := v.storage.withIndex(view, func(x *segmentIndex) {
		generation := "none"
		if n := len(x.generations); n > 0 {
			generation = strconv.FormatUint(uint64(x.generations[n-1]), 10)
		}
		lines = [][2]string{
			{"segments.count", strconv.FormatUint(x.count, 10)},
			{"segments.bytes", strconv.FormatUint(x.bytes, 10)},
			{"segments.first", strconv.FormatUint(x.first, 10)},
			{"segments.last", strconv.FormatUint(x.last, 10)},
			{"segments.head", hexHash(x.head)},
			{"segments.chainBreaks", strconv.FormatUint(x.breaks, 10)},
			{"tar.targetBytes", strconv.FormatUint(x.target, 10)},
			{"tar.count", strconv.Itoa(len(x.tars))},
			{"generation.current", generation},
		}
	}); err != nil {
		return err
	}
	contract := "none"
	if v.cfg.ContractAddress != "" {
		contract = strings.ToLower(v.cfg.ContractAddress)
	}
	lines = append([][2]string{
		{"manifest.version", strconv.Itoa(manifestVersion)},
		{"node.id", strconv.FormatUint(v.cfg.NodeID, 10)},
		{"applied.index", strconv.FormatUint(view.AppliedIndex(), 10)},
		{"mode", string(v.cfg.Mode)},
		{"content.root", v.cfg.ContentRoot},
		{"chain.id", strconv.FormatUint(v.cfg.ChainID, 10)},
		{"chain.contract", contract},
		{"segment.encoding", "protobuf contentledger.v1.Segment"},
		{"segment.hash", "sha256 of the stored bytes"},
	}, lines...)
	var b strings.Builder
	b.WriteString("# contentledger store manifest (ADR 0021)\n")
	for _, kv := range lines {
		b.WriteString(kv[0])
		b.WriteByte('=')
		b.WriteString(kv[1])
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
	view, err := v.machine.ReadView()
	if err != nil {
		return err
	}
	defer view.Close()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextPlainCharsetUTF8)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Applied-Index", strconv.FormatUint(view.AppliedIndex(), 10))
	bw, arm, done := streamOK(c)
	defer done()
	var line []byte
	err = view.SegmentsFrom(from, func(index uint64, raw []byte, hash [32]byte) error {
		seg := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, seg); err != nil {
			return fmt.Errorf("%w: segment %d: %v", state.ErrCorruptState, index, err)
		}
		line = appendJournalLine(line[:0], index, seg, hash)
		if bw.Available() < len(line) {
			arm()
		}
		_, err := bw.Write(line)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// appendJournalLine appends the journal line of one segment (logfmt):
//
//	index=12 term=2 epoch=1000 generation=0 proposals=3 hash=0x…
func appendJournalLine(dst []byte, index uint64, seg *ledgerpb.Segment, hash [32]byte) []byte {
	dst = append(dst, "index="...)
	dst = strconv.AppendUint(dst, index, 10)
	dst = append(dst, " term="...)
	dst = strconv.AppendUint(dst, seg.GetTerm(), 10)
	dst = append(dst, " epoch="...)
	dst = strconv.AppendUint(dst, seg.GetEpoch(), 10)
	dst = append(dst, " generation="...)
	dst = strconv.AppendUint(dst, uint64(seg.GetGeneration()), 10)
	dst = append(dst, " proposals="...)
	dst = strconv.AppendInt(dst, int64(len(seg.GetProposalIds())), 10)
	dst = append(dst, " hash="...)
	dst = append(dst, hexHash(hash)...)
	return append(dst, '\n')
}
