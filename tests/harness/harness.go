// Package harness starts a whole Content Ledger network in one process for
// tests and benchmarks: go-ethereum's simulated chain running the compiled
// payment contract, an embedded NATS server with JetStream, the
// chain-watcher, a validator and the edge, and when asked (Options.IPFS) the
// devnet's IPFS node as the validator's gateway, each on loopback ports. Nothing
// is mocked: the services are started through the same Run functions as
// their binaries. A test may stop the chain-watcher and start it again
// (Backing.StopWatcher, StartWatcher), as an outage of the watcher would.
package harness

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/peercert"
	watcher "github.com/contentledger/contentledger/services/chain-watcher/app"
	edge "github.com/contentledger/contentledger/services/edge/app"
	validator "github.com/contentledger/contentledger/services/validator/app"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/devipfs"
	"github.com/contentledger/contentledger/tools/devnats"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// OperatorToken is the token of the validators' operator lane in every
// network the harness starts (outside MOCK mode the lane must be guarded).
const OperatorToken = "harness-operator-token-0123456789"

// Options shape the network. Zero values take the defaults noted.
type Options struct {
	Mode          validator.Mode // default TESTNET
	PaymentWait   time.Duration  // default 10s
	Confirmations uint64         // default 1
	BlockInterval time.Duration  // default 100ms
	// ChainStatusStale is the validator's CHAIN_STATUS_STALE: the age of
	// the chain-watcher's last status past which the feed counts as
	// stopped. Default: the validator's. The watcher of a test network
	// writes its status at every poll (the dev chain seals a block each
	// BlockInterval), so a second or two tells a stopped watcher.
	ChainStatusStale time.Duration
	Quiet            bool // discard service logs (benchmarks)
	// IPFS starts the IPFS node of make run (tools/devipfs) with the
	// backing, and names its gateway as the validator's
	// SVC_VALIDATOR_IPFS_GATEWAY. Backing.IPFS adds files to it.
	IPFS bool
	// IntentTTL is the validator's INTENT_TTL: how long an upload intent
	// waits for its upload. Default: the validator's.
	IntentTTL time.Duration
}

// Backing is the part of a network validators depend on: the chain with
// the payment contract, NATS with JetStream, and the chain-watcher. NATS
// runs with users and permissions (devnats.Auth): each service connects as
// its role.
type Backing struct {
	Chain   *devchain.Chain
	NATSURL string
	NATS    *devnats.Server
	// IPFS is the IPFS node when Options.IPFS asked for one; nil otherwise.
	IPFS *devipfs.Node

	watcher *watcherProcess
}

// watcherProcess runs the chain-watcher in-process (watcher.Run) and can
// stop and start it again, as an operator would restart the binary: a new
// run resumes from the cursor it checkpointed in NATS.
type watcherProcess struct {
	t   testing.TB
	cfg watcher.Config
	log *zap.Logger

	mu     sync.Mutex
	cancel context.CancelFunc // nil while stopped
	done   chan struct{}
}

// Refusals of StartWatcher and StopWatcher.
var (
	errWatcherRunning = errors.New("harness: the chain-watcher is already running")
	errWatcherStopped = errors.New("harness: the chain-watcher is not running")
)

func (w *watcherProcess) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return errWatcherRunning
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := watcher.Run(ctx, w.cfg, w.log)
		if err != nil && ctx.Err() == nil {
			w.t.Errorf("chain-watcher stopped: %v", err)
		}
	}()
	w.cancel, w.done = cancel, done
	return nil
}

// stop ends the running watcher and returns once watcher.Run has
// returned: nothing of it publishes afterwards.
func (w *watcherProcess) stop() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel == nil {
		return errWatcherStopped
	}
	w.cancel()
	<-w.done
	w.cancel, w.done = nil, nil
	return nil
}

// StopWatcher stops the chain-watcher, as a crash or an operator would:
// it publishes no payment, epoch or status until StartWatcher. It fails
// the test if the watcher is not running.
func (b *Backing) StopWatcher(t testing.TB) {
	t.Helper()
	if err := b.watcher.stop(); err != nil {
		t.Fatal(err)
	}
}

// StartWatcher starts the chain-watcher StopWatcher stopped, with the same
// configuration; it resumes from the cursor it checkpointed in NATS. It
// fails the test if the watcher is running.
func (b *Backing) StartWatcher(t testing.TB) {
	t.Helper()
	if err := b.watcher.start(); err != nil {
		t.Fatal(err)
	}
}

// NATSCredentials are the NATS user and password of role.
func (b *Backing) NATSCredentials(role devnats.Role) devnats.Credentials {
	c, _ := b.NATS.Credentials(role)
	return c
}

// ValidatorNATSEnv is the environment that makes a validator process
// connect to NATS as a validator.
func (b *Backing) ValidatorNATSEnv() []string {
	c := b.NATSCredentials(devnats.Validator)
	return []string{"SVC_VALIDATOR_NATS_URL=" + b.NATSURL, "SVC_VALIDATOR_NATS_USER=" + c.User,
		"SVC_VALIDATOR_NATS_PASSWORD=" + c.Password, "SVC_VALIDATOR_EPOCH_MAX_AHEAD=" + strconv.Itoa(EpochMaxAhead)}
}

// ValidatorIPFSEnv is the environment that names the backing's IPFS
// gateway to a validator process; empty without Options.IPFS.
func (b *Backing) ValidatorIPFSEnv() []string {
	if b.IPFS == nil {
		return nil
	}
	return []string{"SVC_VALIDATOR_IPFS_GATEWAY=" + b.IPFS.GatewayURL()}
}

// EpochMaxAhead is the validators' EPOCH_MAX_AHEAD in test networks: the
// dev chain seals blocks faster than one a second, each a second after
// its parent at least, so its timestamps (and the watcher's epochs) run
// ahead of the wall clock, about 9 s per second at 100 ms blocks. A
// hundred epochs of 384 s cover an hour of such a test.
const EpochMaxAhead = 100

// Network is a running network.
type Network struct {
	*Backing
	ValidatorURL string
	EdgeURL      string
	Client       *ledgerclient.Client
	Config       api.BlockchainConfig
}

func (o *Options) defaults() {
	if o.Mode == "" {
		o.Mode = validator.Testnet
	}
	if o.PaymentWait == 0 {
		o.PaymentWait = 10 * time.Second
	}
	if o.Confirmations == 0 {
		o.Confirmations = 1
	}
	if o.BlockInterval == 0 {
		o.BlockInterval = 100 * time.Millisecond
	}
}

func (o Options) logger(t testing.TB) *zap.Logger {
	if o.Quiet {
		return zap.NewNop()
	}
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

// StartBacking starts the chain, NATS and the chain-watcher, and stops them
// when the test ends.
func StartBacking(t testing.TB, o Options) *Backing {
	t.Helper()
	o.defaults()
	log := o.logger(t)
	chain, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0", BlockInterval: o.BlockInterval})
	if err != nil {
		t.Fatalf("dev chain: %v", err)
	}
	nats, err := devnats.Start(devnats.Config{Port: -1, StoreDir: filepath.Join(t.TempDir(), "nats"), Auth: &devnats.Auth{}})
	if err != nil {
		_ = chain.Close()
		t.Fatalf("nats: %v", err)
	}
	b := &Backing{Chain: chain, NATSURL: nats.ClientURL(), NATS: nats}
	if o.IPFS {
		if b.IPFS, err = devipfs.Start(devipfs.Config{DataDir: filepath.Join(t.TempDir(), "ipfs"), GatewayAddr: "127.0.0.1:0",
			APIAddr: "127.0.0.1:0", Log: log.Named("ipfs")}); err != nil {
			nats.Stop()
			_ = chain.Close()
			t.Fatalf("ipfs: %v", err)
		}
	}
	wcfg := WatcherConfig(chain, b.NATSURL, o.Confirmations)
	wnats := b.NATSCredentials(devnats.Watcher)
	wcfg.NATSUser, wcfg.NATSPassword = wnats.User, wnats.Password
	b.watcher = &watcherProcess{t: t, cfg: wcfg, log: log.Named("watcher")}
	_ = b.watcher.start() // a new process: not running yet
	t.Cleanup(func() {
		_ = b.watcher.stop() // a test may have left it stopped
		if b.IPFS != nil {
			_ = b.IPFS.Close()
		}
		nats.Stop()
		_ = chain.Close()
	})
	return b
}

// WatcherConfig is the chain-watcher configuration of a test network:
// chain's contract from its deployment block, published on the
// CHAIN_EVENTS stream of the NATS server at natsURL, polled every 50 ms.
func WatcherConfig(chain *devchain.Chain, natsURL string, confirmations uint64) watcher.Config {
	return watcher.Config{
		RPCURL: chain.URL, ContractAddress: chain.PaymentLedger.Hex(), NATSURL: natsURL,
		Confirmations: confirmations, PollInterval: 50 * time.Millisecond, StartBlock: chain.DeployBlock,
		MaxBlockRange: 2000, Stream: "CHAIN_EVENTS", DuplicateWindow: time.Hour, Bucket: "CHAIN_WATCHER", Replicas: 1,
		RangeGrowAfter: 4, RPCTimeout: 10 * time.Second, RPCAttempts: 3, RPCBackoff: 50 * time.Millisecond,
		RPCBackoffMax: time.Second, RPCCooldown: time.Second, RPCCooldownMax: 10 * time.Second,
	}
}

// Start starts a network and stops it when the test ends.
func Start(t testing.TB, o Options) *Network {
	t.Helper()
	o.defaults()
	log := o.logger(t)
	n := &Network{Backing: StartBacking(t, o)}
	dir := t.TempDir()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	failed := make(chan error, 2)
	run := func(name string, fn func() error) {
		wg.Go(func() {
			if err := fn(); err != nil && ctx.Err() == nil {
				failed <- err
				t.Errorf("%s stopped: %v", name, err)
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	chain := n.Chain
	// The peer port runs mutual TLS, as outside MOCK it must.
	certs, err := peercert.Provision(filepath.Join(dir, "pki"), []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	vready := make(chan string, 1)
	vnats := n.NATSCredentials(devnats.Validator)
	var gateway string
	if n.IPFS != nil {
		gateway = n.IPFS.GatewayURL()
	}
	run("validator", func() error {
		return validator.Run(ctx, validator.Config{
			PeerTLSCert: certs[1].Cert, PeerTLSKey: certs[1].Key, PeerTLSCA: certs[1].CA,
			Mode: o.Mode, NodeID: 1, ClusterID: "test", DataDir: filepath.Join(dir, "validator-1"), HTTPAddr: "127.0.0.1:0",
			PeerAddr: "127.0.0.1:0", ChainID: chain.ChainID, ContractAddress: chain.PaymentLedger.Hex(), USDCAddress: chain.DevUSDC.Hex(),
			Confirmations: o.Confirmations, NATSURL: n.NATSURL, PaymentStream: "CHAIN_EVENTS", PaymentWait: o.PaymentWait,
			ContentRoot: "ledger", MaxMessageBytes: 1 << 20, EpochLength: 384 * time.Second, TickInterval: 50 * time.Millisecond,
			MaxPending: 10_000, MaxBatch: 512, MaxPendingMessages: 2048, MicroBatch: 64, MicroBatchBytes: 256 << 10, ClassAging: 2 * time.Second,
			OperatorTokens: OperatorToken, NATSUser: vnats.User, NATSPassword: vnats.Password, EpochMaxAhead: EpochMaxAhead,
			ChainStatusStale: o.ChainStatusStale, IntentTTL: o.IntentTTL, IPFSGateway: gateway,
		}, log.Named("validator"), vready)
	})
	n.ValidatorURL = "http://" + receive(t, vready, failed)

	eready := make(chan string, 1)
	run("edge", func() error {
		return edge.Run(ctx, edge.Config{
			HTTPAddr: "127.0.0.1:0", Validators: []string{n.ValidatorURL}, ClusterID: "test", UpstreamTimeout: 2 * time.Second,
			// Answers are not reused (CacheTTL 0), so a test reads through the
			// edge what it has just written; identical reads still share a call.
			PerValidator: 16, CacheEntries: 4096, LeaderRefresh: time.Second,
		}, log.Named("edge"), eready)
	})
	n.EdgeURL = "http://" + receive(t, eready, failed)

	n.Client = &ledgerclient.Client{BaseURL: n.ValidatorURL}
	// /health answers 200 once raft has a leader, the storage is open and,
	// with payments verified, NATS is connected.
	Eventually(t, 15*time.Second, func() bool {
		resp, err := http.Get(n.ValidatorURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	cfg, err := n.Client.BlockchainConfig(ctx)
	if err != nil {
		t.Fatalf("blockchain config: %v", err)
	}
	n.Config = cfg
	return n
}

func receive(t testing.TB, ready <-chan string, failed <-chan error) string {
	t.Helper()
	select {
	case addr := <-ready:
		return addr
	case err := <-failed:
		t.Fatalf("service failed to start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("service did not start within 30s")
	}
	return ""
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t testing.TB, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
