package segments

import (
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/segarchive"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Storage is the segment chain and its TAR files at one applied index.
type Storage struct {
	AppliedIndex uint64
	Segments     api.SegmentSummary
	Tars         api.TarSummary
	// TarFiles lists every TAR file, oldest first; nil unless asked for.
	TarFiles []api.TarFile
}

// Storage sums the segment chain and its TAR files as applied now, and
// lists the TAR files when withFiles.
func (c *Catalog) Storage(withFiles bool) (Storage, error) {
	var out Storage
	err := c.readIndex(func(applied uint64, x *segmentIndex) {
		out.AppliedIndex = applied
		out.Segments, out.Tars = x.summary()
		if withFiles {
			out.TarFiles = x.tarFiles()
		}
	})
	return out, err
}

// Tars lists the TAR files as applied now, oldest first.
func (c *Catalog) Tars() (api.SegmentTars, error) {
	out := api.SegmentTars{NodeID: c.cfg.NodeID, TargetBytes: c.cfg.TarTargetBytes}
	err := c.readIndex(func(applied uint64, x *segmentIndex) {
		out.AppliedIndex = applied
		out.Tars = x.tarFiles()
	})
	return out, err
}

// Recent describes the newest segments, at most limit (at least 1; the
// caller bounds it, api.MaxRecentSegments), newest first, each with the
// TAR file that holds it.
func (c *Catalog) Recent(limit int) (api.RecentSegments, error) {
	var tars []tarFile
	view, err := c.openIndexed(func(_ uint64, x *segmentIndex) { tars = append(tars, x.tars...) })
	if err != nil {
		return api.RecentSegments{}, err
	}
	defer view.Close()
	out := api.RecentSegments{NodeID: c.cfg.NodeID, AppliedIndex: view.AppliedIndex(), Limit: limit, Segments: []api.SegmentInfo{}}
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
			info.Tar = tars[i].name()
		}
		out.Segments = append(out.Segments, info)
		return len(out.Segments) < limit, nil
	})
	if err != nil {
		return api.RecentSegments{}, err
	}
	return out, nil
}
