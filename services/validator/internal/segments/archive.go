package segments

import (
	"io"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/segarchive"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Archive is one TAR file opened for streaming as a segment archive
// (pkg/segarchive), at one applied index. Close it when done: it holds a
// read view of the state open.
type Archive struct {
	// Manifest describes the segments the archive holds; its HeadHash names
	// the archive's bytes.
	Manifest segarchive.Manifest
	// Closed says the TAR file takes no more segments, so its archive never
	// changes: it can be cached for good. The newest TAR file is archived
	// up to its newest segment, a prefix of what it will hold.
	Closed bool

	view *state.ReadView
}

// OpenArchive finds the TAR file name names as applied now. A name that is
// not a TAR file name (data00000a.tar), or names no TAR file of this
// validator, is an apierror.NotFound.
func (c *Catalog) OpenArchive(name string) (*Archive, error) {
	if _, ok := parseTarName(name); !ok {
		return nil, apierror.New(apierror.NotFound, "%q is not a TAR file name (data00000a.tar); GET /api/segments/tars lists them", name)
	}
	var (
		file   tarFile
		closed bool
		found  bool
	)
	view, err := c.openIndexed(func(_ uint64, x *segmentIndex) {
		for i, f := range x.tars { // a few files: two generations
			if f.name() == name {
				file, closed, found = f, x.closed(i), true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if !found {
		_ = view.Close()
		return nil, apierror.New(apierror.NotFound, "no TAR file %s on this validator; GET /api/segments/tars lists them", name)
	}
	m := segarchive.Manifest{Name: name, FirstIndex: file.first, LastIndex: file.last, Segments: file.segments,
		Bytes: file.bytes, PrevHash: hexHash(file.prev), HeadHash: hexHash(file.head)}
	return &Archive{Manifest: m, Closed: closed, view: view}, nil
}

// Write writes the archive to w, calling beforeWrite (if not nil) ahead of
// each write to w. Every validator that applied the same segments writes
// the same bytes. A failure leaves w with a part of the archive.
func (a *Archive) Write(w io.Writer, beforeWrite func()) error {
	bw := newStream(w, beforeWrite)
	aw, err := segarchive.NewWriter(bw, a.Manifest)
	if err != nil {
		return err
	}
	if err := a.view.SegmentRange(a.Manifest.FirstIndex, a.Manifest.LastIndex, aw.Add); err != nil {
		return err
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// Close releases the archive's read view.
func (a *Archive) Close() error { return a.view.Close() }
