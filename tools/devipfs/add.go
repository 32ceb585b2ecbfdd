package devipfs

import (
	"context"
	"errors"
	"fmt"
	"io"

	chunker "github.com/ipfs/boxo/chunker"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	ipld "github.com/ipfs/go-ipld-format"
	"go.uber.org/zap"
)

// ChunkSize is the importer's chunk size: kubo's default (size-262144).
const ChunkSize = 256 << 10

// dsRoot is the key Sync is given: the whole store.
var dsRoot = ds.NewKey("/")

// AddOptions shape how content is imported. The zero value is kubo's
// default: CIDv0, dag-pb leaves.
type AddOptions struct {
	// CIDVersion is 0 (base58 Qm… CIDs, kubo's default) or 1 (base32 b…).
	CIDVersion int
	// RawLeaves stores the chunks as raw blocks rather than wrapped in
	// UnixFS dag-pb nodes, as kubo does by default with CIDv1. A file of
	// one chunk is then a single raw block.
	RawLeaves bool
}

// ErrCIDVersion is the error of an AddOptions.CIDVersion other than 0 or 1.
var ErrCIDVersion = errors.New("devipfs: the CID version must be 0 or 1")

// Added is the root of imported content.
type Added struct {
	Cid cid.Cid
	// Size is the cumulative size of the DAG (the bytes of every block),
	// what kubo's add answers as Size.
	Size uint64
}

// Add imports r as a UnixFS file and returns its root CID. The blocks are
// on disk, synced, when it returns.
func (n *Node) Add(ctx context.Context, r io.Reader, o AddOptions) (cid.Cid, error) {
	added, err := n.add(ctx, r, o)
	return added.Cid, err
}

func (n *Node) add(ctx context.Context, r io.Reader, o AddOptions) (Added, error) {
	var prefix cid.Prefix
	switch o.CIDVersion {
	case 0:
		prefix = merkledag.V0CidPrefix()
	case 1:
		prefix = merkledag.V1CidPrefix()
	default:
		return Added{}, ErrCIDVersion
	}
	// The importer writes node by node; a buffered DAG batches them into
	// few writes of the store.
	buffered := ipld.NewBufferedDAG(ctx, n.dag)
	params := helpers.DagBuilderParams{
		Dagserv:    buffered,
		Maxlinks:   helpers.DefaultLinksPerBlock,
		RawLeaves:  o.RawLeaves,
		CidBuilder: prefix,
	}
	db, err := params.New(chunker.NewSizeSplitter(r, ChunkSize))
	if err != nil {
		return Added{}, fmt.Errorf("devipfs: %w", err)
	}
	root, err := balanced.Layout(db)
	if err != nil {
		return Added{}, fmt.Errorf("devipfs: importing: %w", err)
	}
	if err := buffered.Commit(); err != nil {
		return Added{}, fmt.Errorf("devipfs: storing: %w", err)
	}
	if err := n.store.Sync(ctx, dsRoot); err != nil {
		return Added{}, fmt.Errorf("devipfs: %w", err)
	}
	size, err := root.Size()
	if err != nil {
		return Added{}, fmt.Errorf("devipfs: %w", err)
	}
	return Added{Cid: root.Cid(), Size: size}, nil
}

// open returns a reader of the UnixFS file c. A directory or a CID whose
// root is not stored is an error (ipld.IsNotFound for the latter).
func (n *Node) open(ctx context.Context, c cid.Cid) (uio.DagReader, error) {
	root, err := n.dag.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	return uio.NewDagReader(ctx, root, n.dag)
}

// emptyDir is the empty UnixFS directory: QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn,
// bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354 in CIDv1.
func emptyDir() ipld.Node { return unixfs.EmptyDirNode() }

// pebbleLogger sends Pebble's messages to zap instead of the standard
// library logger (which writes to stderr).
type pebbleLogger struct{ s *zap.SugaredLogger }

func (l pebbleLogger) Infof(format string, args ...any)  { l.s.Infof(format, args...) }
func (l pebbleLogger) Errorf(format string, args ...any) { l.s.Errorf(format, args...) }

// Fatalf is called by Pebble on corruption and broken invariants, after
// which it must not continue; zap's Fatal logs and exits like Pebble's own
// default logger does.
func (l pebbleLogger) Fatalf(format string, args ...any) { l.s.Fatalf(format, args...) }
