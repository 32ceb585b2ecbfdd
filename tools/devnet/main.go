// Command devnet runs a whole Content Ledger network on this machine: a dev
// chain with the payment contract, an embedded NATS server with JetStream,
// an IPFS node (gateway and RPC API) the validators name as their gateway,
// the chain-watcher, the validator and the edge. `make run` starts it.
//
// The dev chain lives in memory, so every start is a fresh network: devnet
// wipes its data directory first, because validator state and the watcher's
// checkpoint would describe a chain that no longer exists.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/contentledger/contentledger/pkg/peercert"
	watcher "github.com/contentledger/contentledger/services/chain-watcher/app"
	edge "github.com/contentledger/contentledger/services/edge/app"
	validator "github.com/contentledger/contentledger/services/validator/app"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/devipfs"
	"github.com/contentledger/contentledger/tools/devnats"
)

func main() {
	dataDir := flag.String("data", ".data/devnet", "data directory, wiped at start")
	mode := flag.String("mode", "TESTNET", "validator mode: TESTNET verifies payments on the dev chain, MOCK does not")
	block := flag.Duration("block", time.Second, "dev chain block interval")
	confirmations := flag.Uint64("confirmations", 1, "confirmations the watcher waits for")
	verbose := flag.Bool("v", false, "log at info level (default: warnings and errors only)")
	flag.Parse()

	level := zapcore.WarnLevel
	if *verbose {
		level = zapcore.InfoLevel
	}
	logCfg := zap.NewDevelopmentConfig()
	logCfg.Level = zap.NewAtomicLevelAt(level)
	logCfg.DisableStacktrace = true
	log, err := logCfg.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devnet:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, options{dataDir: *dataDir, mode: validator.Mode(*mode), block: *block, confirmations: *confirmations}); err != nil {
		log.Error("devnet failed", zap.Error(err))
		os.Exit(1)
	}
}

type options struct {
	dataDir       string
	mode          validator.Mode
	block         time.Duration
	confirmations uint64
	// operatorToken guards the validators' operator lane: made afresh at
	// each start and printed with the tour. The submit and ops-read lanes
	// stay open: the validators listen on loopback only.
	operatorToken string
}

// newToken makes a random bearer token.
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// validators is the size of the local cluster.
const validators = 3

const (
	edgeAddr    = "127.0.0.1:8787"
	watcherAddr = "127.0.0.1:8091"
)

// validatorHTTP and validatorPeer are the addresses of validator i (1-based):
// 8090, 8190, 8290 for HTTP and 7090, 7190, 7290 for raft.
func validatorHTTP(i int) string { return fmt.Sprintf("127.0.0.1:%d", 8090+100*(i-1)) }
func validatorPeer(i int) string { return fmt.Sprintf("127.0.0.1:%d", 7090+100*(i-1)) }

// validatorURLs are the base URLs of the validators' HTTP APIs.
func validatorURLs() []string {
	var urls []string
	for i := 1; i <= validators; i++ {
		urls = append(urls, "http://"+validatorHTTP(i))
	}
	return urls
}

func run(ctx context.Context, log *zap.Logger, o options) error {
	if err := os.RemoveAll(o.dataDir); err != nil {
		return err
	}
	var err error
	if o.operatorToken, err = newToken(); err != nil {
		return err
	}
	// The peer port runs mutual TLS as outside MOCK it must: a throwaway
	// CA and node certificates, made afresh with the data directory.
	ids := make([]uint64, validators)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	certs, err := peercert.Provision(pkiDir(o), ids, "127.0.0.1", "localhost")
	if err != nil {
		return err
	}
	chain, err := devchain.Start(devchain.Config{BlockInterval: o.block})
	if err != nil {
		return fmt.Errorf("dev chain: %w", err)
	}
	defer chain.Close()

	// NATS runs with a user per role and their permissions, as a real
	// deployment must (deployments/README.md): only the watcher may publish
	// the chain feed.
	nats, err := devnats.Start(devnats.Config{Port: devnats.DefaultPort, StoreDir: filepath.Join(o.dataDir, "nats"), Auth: &devnats.Auth{}})
	if err != nil {
		return err
	}
	defer nats.Stop()
	natsURL := nats.ClientURL()
	watcherNATS, _ := nats.Credentials(devnats.Watcher)

	// The content-addressed store binaries live in: clients add files
	// through its RPC API, validators check and read them through its
	// gateway (SVC_VALIDATOR_IPFS_GATEWAY).
	ipfs, err := devipfs.Start(devipfs.Config{DataDir: ipfsDir(o), Log: log.Named("ipfs")})
	if err != nil {
		return err
	}
	defer ipfs.Close()
	validatorNATS, _ := nats.Credentials(devnats.Validator)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2+validators)
	start := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}

	start("chain-watcher", func(ctx context.Context) error {
		return watcher.Run(ctx, watcher.Config{
			RPCURL: chain.URL, ContractAddress: chain.PaymentLedger.Hex(), NATSURL: natsURL,
			Confirmations: o.confirmations, PollInterval: 250 * time.Millisecond, StartBlock: chain.DeployBlock,
			MaxBlockRange: 2000, Stream: "CHAIN_EVENTS", DuplicateWindow: 24 * time.Hour, Bucket: "CHAIN_WATCHER",
			Replicas: 1, HTTPAddr: watcherAddr, NATSUser: watcherNATS.User, NATSPassword: watcherNATS.Password,
			RangeGrowAfter: 4, RPCTimeout: 30 * time.Second, RPCAttempts: 3, RPCBackoff: 250 * time.Millisecond,
			RPCBackoffMax: 5 * time.Second, RPCCooldown: 5 * time.Second, RPCCooldownMax: 2 * time.Minute,
		}, log.Named("watcher"))
	})
	urls := validatorURLs()
	var initial []string
	for i, u := range urls {
		initial = append(initial, fmt.Sprintf("%d=%s=%s", i+1, validatorPeer(i+1), u))
	}
	for i := 1; i <= validators; i++ {
		name := fmt.Sprintf("validator-%d", i)
		vcfg := validator.Config{
			PeerTLSCert: certs[uint64(i)].Cert, PeerTLSKey: certs[uint64(i)].Key, PeerTLSCA: certs[uint64(i)].CA,
			Mode: o.mode, NodeID: uint64(i), ClusterID: "contentledger-dev", DataDir: filepath.Join(o.dataDir, name),
			HTTPAddr: validatorHTTP(i), PeerAddr: validatorPeer(i), InitialCluster: strings.Join(initial, ","),
			ChainID: chain.ChainID, ContractAddress: chain.PaymentLedger.Hex(),
			USDCAddress: chain.DevUSDC.Hex(), Confirmations: o.confirmations, NATSURL: natsURL, PaymentStream: "CHAIN_EVENTS",
			PaymentWait: time.Minute, ContentRoot: "ledger", MaxMessageBytes: 1 << 20, EpochLength: 384 * time.Second,
			TickInterval: 100 * time.Millisecond, MaxPending: 10_000, MaxBatch: 512, MaxPendingMessages: 2048, MicroBatch: 64, MicroBatchBytes: 256 << 10, ClassAging: 2 * time.Second,
			OperatorTokens: o.operatorToken, NATSUser: validatorNATS.User, NATSPassword: validatorNATS.Password,
			IPFSGateway: ipfs.GatewayURL(),
		}
		start(name, func(ctx context.Context) error { return validator.Run(ctx, vcfg, log.Named(name), nil) })
	}
	start("edge", func(ctx context.Context) error {
		return edge.Run(ctx, edge.Config{
			HTTPAddr: edgeAddr, Validators: urls, ClusterID: "contentledger-dev",
			UpstreamTimeout: 2 * time.Second, PerValidator: 16, CacheTTL: 500 * time.Millisecond, CacheEntries: 4096,
			LeaderRefresh: time.Second,
		}, log.Named("edge"), nil)
	})

	health := []string{"http://" + watcherAddr + "/health", "http://" + edgeAddr + "/health"}
	for _, u := range urls {
		health = append(health, u+"/health")
	}
	if err := waitHealthy(ctx, health...); err != nil {
		cancel()
		wg.Wait()
		select {
		case e := <-errc:
			return e
		default:
		}
		if ctx.Err() != nil {
			return nil // interrupted while starting: a clean stop
		}
		return err
	}
	indexer, _ := nats.Credentials(devnats.Indexer)
	printTour(chain, natsURL, indexer, ipfs, o)

	select {
	case <-ctx.Done():
		log.Info("stopping")
	case err = <-errc:
	}
	cancel()
	wg.Wait()
	return err
}

// waitHealthy polls the health routes until all answer 200.
func waitHealthy(ctx context.Context, urls ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range urls {
		for {
			resp, err := http.Get(u)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return errors.New("devnet: services not healthy within 30s: " + u)
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// pkiDir holds the validators' throwaway peer certificates.
func pkiDir(o options) string { return filepath.Join(o.dataDir, "pki") }

// ipfsDir holds the IPFS node's blocks.
func ipfsDir(o options) string { return filepath.Join(o.dataDir, "ipfs") }

func printTour(chain *devchain.Chain, natsURL string, indexer devnats.Credentials, ipfs *devipfs.Node, o options) {
	fmt.Printf(`
Content Ledger devnet is running (Ctrl-C stops it; data in %s is wiped at each start)

  dev chain      %s   chain id %d, a block every %s
  payment ledger %s
  dev USDC       %s
  NATS           %s   JetStream, streams CHAIN_EVENTS and LEDGER_EVENTS; users watcher,
                 validator and indexer with their permissions (indexer reads LEDGER_EVENTS:
                 nats --user %s --password %s sub --stream LEDGER_EVENTS 'ledger.events.>')
  IPFS gateway   %s/ipfs/<cid>   deserialized, ?format=raw and ?format=car; the validators' gateway
  IPFS RPC API   %s/api/v0/add and /api/v0/cat   offline node, blocks in %s
  chain-watcher  http://%s/health   %d confirmation(s)
  validators     %s   mode %s, raft peers on 7090, 7190, 7290
  peer mTLS      %s   throwaway CA and node certificates (ledgerctl certs makes real ones)
  edge           http://%s/ops/v1/health

Well-known dev accounts (10,000 ETH each; never use these keys on a real network):
`, o.dataDir, chain.URL, chain.ChainID, o.block, chain.PaymentLedger.Hex(), chain.DevUSDC.Hex(), natsURL, indexer.User, indexer.Password,
		ipfs.GatewayURL(), ipfs.APIURL(), ipfsDir(o), watcherAddr, o.confirmations, strings.Join(validatorURLs(), " "), o.mode, pkiDir(o), edgeAddr)
	for i, a := range devchain.DevAccounts {
		fmt.Printf("  %-2s %s  %s\n", strconv.Itoa(i), a.Address.Hex(), "0x"+a.PrivateKeyHex)
	}
	fmt.Printf(`
Access lanes: submit and ops-read are open (loopback only); the operator lane (membership, GC
limits, manual pay) takes this token, made for this run:
  export LEDGER_OPERATOR_TOKEN=%s

Try it:
  export LEDGER_KEY=%s
  go run ./tools/ledgerctl write --type page '{"jcr:primaryType":"cq:Page","title":"Hello"}'
  go run ./tools/ledgerctl status <proposalId>
  curl -s 'http://%s/api/explore?path=<path printed by write>'
  curl -s http://%s/ops/v1/explorer/proposal/<proposalId>
  curl -s http://%s/health/cluster
  curl -s -F file=@README.md '%s/api/v0/add?cid-version=1'   # then %s/ipfs/<Hash>
`, o.operatorToken, "0x"+devchain.DevAccounts[1].PrivateKeyHex, validatorHTTP(1), edgeAddr, validatorHTTP(2), ipfs.APIURL(), ipfs.GatewayURL())
}
