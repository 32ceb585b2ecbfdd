// Package segments computes what the validator's segment chain and storage
// hold: the segments indexed into TAR files, their archives and journal,
// and, against the content nodes live now, fragmentation, GC estimates and
// CID figures. It reads applied state and writes nothing; DESIGN.md states
// its cost model and locking.
package segments

import (
	"sync"
	"time"

	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Machine is the applied state the catalog reads (*state.Machine).
type Machine interface {
	// ReadView opens a view of applied state at one index.
	ReadView() (*state.ReadView, error)
	// AppliedIndex is the index applied now.
	AppliedIndex() uint64
}

// Catalog keeps the segment index and the last scan of the live nodes, and
// answers every view of the segment store from them. Its methods may be
// called concurrently.
//
// Reads of the index and scans take different locks, so that a long scan
// does not hold up the views that need only the index.
type Catalog struct {
	cfg     Config
	machine Machine

	indexMu sync.Mutex
	index   *segmentIndex

	scanMu sync.Mutex
	scan   *liveScan
}

// New returns a catalog of machine's segments. It reads nothing yet: the
// first view reads every segment applied so far.
func New(cfg Config, machine Machine) (*Catalog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Catalog{cfg: cfg, machine: machine, index: newSegmentIndex(cfg.TarTargetBytes)}, nil
}

// TarTargetBytes is the TAR file size the catalog groups segments by.
func (c *Catalog) TarTargetBytes() uint64 { return c.cfg.TarTargetBytes }

// openIndexed opens a view of applied state, brings the index up to it
// and runs fn with the view's applied index and the index, under the index
// lock; the caller closes the view. The view is opened under the lock so
// that views are caught up to in the order they are opened: the index
// never runs ahead of a view, and fn sees exactly the segments the view
// holds. fn copies out what it needs.
func (c *Catalog) openIndexed(fn func(applied uint64, x *segmentIndex)) (*state.ReadView, error) {
	c.indexMu.Lock()
	defer c.indexMu.Unlock()
	view, err := c.machine.ReadView()
	if err != nil {
		return nil, err
	}
	if err := c.index.catchUp(view); err != nil {
		_ = view.Close()
		return nil, err
	}
	fn(view.AppliedIndex(), c.index)
	return view, nil
}

// readIndex is openIndexed for the views that need nothing but the index.
func (c *Catalog) readIndex(fn func(applied uint64, x *segmentIndex)) error {
	view, err := c.openIndexed(fn)
	if err != nil {
		return err
	}
	defer view.Close()
	return nil
}

func (c *Catalog) now() time.Time { return c.cfg.Now() }
