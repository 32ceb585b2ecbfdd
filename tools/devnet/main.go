// Command devnet runs a whole Content Ledger network on this machine: a dev
// chain with the payment contract, an embedded NATS server with JetStream,
// the chain-watcher, the validator and the edge. `make run` starts it.
//
// The dev chain lives in memory, so every start is a fresh network: devnet
// wipes its data directory first, because validator state and the watcher's
// checkpoint would describe a chain that no longer exists.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	watcher "github.com/contentledger/contentledger/services/chain-watcher/app"
	edge "github.com/contentledger/contentledger/services/edge/app"
	validator "github.com/contentledger/contentledger/services/validator/app"
	"github.com/contentledger/contentledger/tools/devchain"
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
}

const (
	validatorAddr = "127.0.0.1:8090"
	edgeAddr      = "127.0.0.1:8787"
	watcherAddr   = "127.0.0.1:8091"
)

func run(ctx context.Context, log *zap.Logger, o options) error {
	if err := os.RemoveAll(o.dataDir); err != nil {
		return err
	}
	chain, err := devchain.Start(devchain.Config{BlockInterval: o.block})
	if err != nil {
		return fmt.Errorf("dev chain: %w", err)
	}
	defer chain.Close()

	nats, err := devnats.Start(devnats.Config{Port: devnats.DefaultPort, StoreDir: filepath.Join(o.dataDir, "nats")})
	if err != nil {
		return err
	}
	defer nats.Stop()
	natsURL := nats.ClientURL()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
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
			Replicas: 1, HTTPAddr: watcherAddr,
		}, log.Named("watcher"))
	})
	vcfg := validator.Config{
		Mode: o.mode, NodeID: 1, ClusterID: "contentledger-dev", DataDir: filepath.Join(o.dataDir, "validator-1"),
		HTTPAddr: validatorAddr, ChainID: chain.ChainID, ContractAddress: chain.PaymentLedger.Hex(),
		USDCAddress: chain.DevUSDC.Hex(), Confirmations: o.confirmations, NATSURL: natsURL, PaymentStream: "CHAIN_EVENTS",
		PaymentWait: 2 * time.Minute, ContentRoot: "ledger", MaxMessageBytes: 1 << 20, EpochLength: 384 * time.Second,
		TickInterval: 100 * time.Millisecond, MaxPending: 10_000, MaxBatch: 512,
	}
	start("validator-1", func(ctx context.Context) error { return validator.Run(ctx, vcfg, log.Named("validator-1"), nil) })
	start("edge", func(ctx context.Context) error {
		return edge.Run(ctx, edge.Config{
			HTTPAddr: edgeAddr, Validators: []string{"http://" + validatorAddr}, ClusterID: "contentledger-dev",
			UpstreamTimeout: 2 * time.Second,
		}, log.Named("edge"), nil)
	})

	if err := waitHealthy(ctx, "http://"+watcherAddr+"/health", "http://"+validatorAddr+"/health", "http://"+edgeAddr+"/health"); err != nil {
		cancel()
		wg.Wait()
		select {
		case e := <-errc:
			return e
		default:
			return err
		}
	}
	printTour(chain, natsURL, o)

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

func printTour(chain *devchain.Chain, natsURL string, o options) {
	fmt.Printf(`
Content Ledger devnet is running (Ctrl-C stops it; data in %s is wiped at each start)

  dev chain      %s   chain id %d, a block every %s
  payment ledger %s
  dev USDC       %s
  NATS           %s   JetStream, stream CHAIN_EVENTS
  chain-watcher  http://%s/health   %d confirmation(s)
  validator-1    http://%s   mode %s
  edge           http://%s/ops/v1/health

Well-known dev accounts (10,000 ETH each; never use these keys on a real network):
`, o.dataDir, chain.URL, chain.ChainID, o.block, chain.PaymentLedger.Hex(), chain.DevUSDC.Hex(), natsURL,
		watcherAddr, o.confirmations, validatorAddr, o.mode, edgeAddr)
	for i, a := range devchain.DevAccounts {
		fmt.Printf("  %-2s %s  %s\n", strconv.Itoa(i), a.Address.Hex(), "0x"+a.PrivateKeyHex)
	}
	fmt.Printf(`
Try it:
  export LEDGER_KEY=%s
  go run ./tools/ledgerctl write --type page '{"jcr:primaryType":"cq:Page","title":"Hello"}'
  go run ./tools/ledgerctl status <proposalId>
  curl -s 'http://%s/api/explore?path=<path printed by write>'
  curl -s http://%s/ops/v1/explorer/proposal/<proposalId>
`, "0x"+devchain.DevAccounts[1].PrivateKeyHex, validatorAddr, edgeAddr)
}
