// Package devipfs runs an IPFS node in-process for the local devnet and the
// tests: the content-addressed store the contract's binaries live in
// (validators keep only their CIDs). It is built from boxo, the libraries
// kubo itself is made of (ADR 0042):
//
//   - blocks in a go-ds-pebble datastore on disk (boxo/blockstore), under an
//     offline block service and DAG service: the node holds what was added
//     to it and asks no network for anything else;
//   - kubo's UnixFS importer defaults (boxo/ipld/unixfs/importer): 256 KiB
//     chunks, balanced layout, dag-pb, CIDv0, or CIDv1 with raw leaves;
//   - boxo's gateway handler over those blocks on the gateway listener:
//     /ipfs/{cid} deserialized (with Range) and trustless (?format=raw,
//     ?format=car and their Accept types);
//   - a kubo-compatible subset of the RPC API on a second, loopback-only
//     listener: POST /api/v0/add and /api/v0/cat (rpc.go).
//
// It has no libp2p host, no DHT, no bitswap: it is not a peer of the IPFS
// network. A deployment points its validators at any trustless gateway
// instead (SVC_VALIDATOR_IPFS_GATEWAY).
package devipfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/ipld/merkledag"
	pebbleds "github.com/ipfs/go-ds-pebble"
	ipld "github.com/ipfs/go-ipld-format"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/httpserver"
)

// Default listen addresses: kubo's own ports, on loopback (ADR 0008 lists
// them with the other devnet ports).
const (
	DefaultGatewayAddr = "127.0.0.1:8080"
	DefaultAPIAddr     = "127.0.0.1:5001"
)

// DefaultMaxAddBytes bounds the body of one /api/v0/add request: room for
// the 100 MiB files of the blob throughput measurement and more, far from
// filling a developer's disk by accident.
const DefaultMaxAddBytes = 1 << 30

// storeCacheBytes is Pebble's block cache: the node serves what a test or
// a developer just added, mostly from the OS page cache.
const storeCacheBytes = 16 << 20

// transferTimeout bounds reading an add's body and writing a gateway or
// cat answer: a 1 GiB body at a slow 2 MB/s still fits.
const transferTimeout = 10 * time.Minute

// Config configures a node. Zero fields take the defaults noted.
type Config struct {
	// DataDir holds the node's blocks (a Pebble store in DataDir/blocks).
	// Required. A node started again on the same DataDir serves what was
	// added before.
	DataDir string
	// GatewayAddr is the host:port of the HTTP gateway; port 0 picks a free
	// port. Default DefaultGatewayAddr.
	GatewayAddr string
	// APIAddr is the host:port of the RPC API (add, cat); port 0 picks a
	// free port. It must be a loopback address: like kubo's, the API has
	// no authentication and writes to the node. Default DefaultAPIAddr.
	APIAddr string
	// MaxAddBytes bounds the body of one /api/v0/add request. Default
	// DefaultMaxAddBytes.
	MaxAddBytes int64
	// Log receives the servers' failures; nil: none.
	Log *zap.Logger
}

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("devipfs: invalid config")

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.GatewayAddr == "" {
		c.GatewayAddr = DefaultGatewayAddr
	}
	if c.APIAddr == "" {
		c.APIAddr = DefaultAPIAddr
	}
	if c.MaxAddBytes == 0 {
		c.MaxAddBytes = DefaultMaxAddBytes
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	return c
}

// Validate checks c after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("DataDir is required"))
	}
	if _, _, err := net.SplitHostPort(c.GatewayAddr); err != nil {
		errs = append(errs, fmt.Errorf("GatewayAddr %q: %v", c.GatewayAddr, err))
	}
	if host, _, err := net.SplitHostPort(c.APIAddr); err != nil {
		errs = append(errs, fmt.Errorf("APIAddr %q: %v", c.APIAddr, err))
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		errs = append(errs, fmt.Errorf("APIAddr %q is not a loopback address; the RPC API has no authentication", c.APIAddr))
	}
	if c.MaxAddBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxAddBytes is %d; give a positive size (0: %d)", c.MaxAddBytes, DefaultMaxAddBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// Node is a running node. Its methods may be called concurrently.
type Node struct {
	store     *guardedStore
	blocks    blockservice.BlockService
	dag       ipld.DAGService
	gateway   string // base URLs
	api       string
	maxAdd    int64
	cancel    context.CancelFunc
	served    sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Start opens the node's store, adds the empty UnixFS directory (the object
// gateway probes ask for, which every kubo node holds from its first
// start), and serves the gateway and the RPC API. It returns once both
// listen.
func Start(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dir := filepath.Join(cfg.DataDir, "blocks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("devipfs: %w", err)
	}
	pebbleStore, err := pebbleds.NewDatastore(dir, pebbleds.WithCacheSize(storeCacheBytes),
		pebbleds.WithPebbleOpts(&pebble.Options{Logger: pebbleLogger{cfg.Log.Named("pebble").Sugar()}}))
	if err != nil {
		return nil, fmt.Errorf("devipfs: %w", err)
	}
	store := &guardedStore{ds: pebbleStore}
	// Blocks are keyed by multihash, so a block added under CIDv0 is
	// served under the CIDv1 of the same hash and codec too. The identity
	// store answers inline (identity-hash) CIDs without storing them.
	bs := blockstore.NewIdStore(blockstore.NewBlockstore(store))
	blocks := blockservice.New(bs, nil) // no exchange: offline
	n := &Node{store: store, blocks: blocks, dag: merkledag.NewDAGService(blocks), maxAdd: cfg.MaxAddBytes}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if err := n.start(ctx, cfg); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

// start adds the empty directory and starts both servers.
func (n *Node) start(ctx context.Context, cfg Config) error {
	if err := n.dag.Add(ctx, emptyDir()); err != nil {
		return fmt.Errorf("devipfs: adding the empty directory: %w", err)
	}
	if err := n.store.Sync(ctx, dsRoot); err != nil {
		return fmt.Errorf("devipfs: %w", err)
	}
	gateway, err := n.gatewayHandler()
	if err != nil {
		return fmt.Errorf("devipfs: gateway: %w", err)
	}
	var gwURL, apiURL string
	if gwURL, err = n.serve(ctx, cfg, "gateway", cfg.GatewayAddr, httpserver.Config{WriteTimeout: transferTimeout}, gateway); err != nil {
		return err
	}
	if apiURL, err = n.serve(ctx, cfg, "api", cfg.APIAddr, httpserver.Config{ReadTimeout: transferTimeout, WriteTimeout: transferTimeout},
		n.rpcHandler()); err != nil {
		return err
	}
	n.gateway, n.api = gwURL, apiURL
	return nil
}

// serve listens on addr and serves h there until ctx ends; it returns the
// listener's base URL.
func (n *Node) serve(ctx context.Context, cfg Config, name, addr string, scfg httpserver.Config, h http.Handler) (string, error) {
	srv, err := httpserver.New(scfg, h)
	if err != nil {
		return "", fmt.Errorf("devipfs: %s: %w", name, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("devipfs: %s: %w", name, err)
	}
	n.served.Go(func() {
		if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
			cfg.Log.Error("devipfs server stopped", zap.String("server", name), zap.Error(err))
		}
	})
	return "http://" + ln.Addr().String(), nil
}

// GatewayURL is the gateway's base URL, such as http://127.0.0.1:8080:
// /ipfs/{cid} is appended to it, and it is what SVC_VALIDATOR_IPFS_GATEWAY
// takes.
func (n *Node) GatewayURL() string { return n.gateway }

// APIURL is the RPC API's base URL, such as http://127.0.0.1:5001:
// /api/v0/add is appended to it.
func (n *Node) APIURL() string { return n.api }

// Close stops both servers, waiting up to lifecycle.ShutdownTimeout for
// the requests under way, and closes the store; an Add under way ends
// first, and one called later fails with ErrClosed. Calling Close again
// returns the first call's outcome.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		n.served.Wait()
		if err := n.store.Close(); err != nil {
			n.closeErr = fmt.Errorf("devipfs: closing the store: %w", err)
		}
	})
	return n.closeErr
}
