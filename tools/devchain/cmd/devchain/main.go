// Command devchain serves the development chain of tools/devchain alone: the
// simulated backend's JSON-RPC (HTTP and WebSocket on one port), the dev
// accounts funded, the payment contract and its dev stablecoin deployed, a
// block sealed every -block. make run starts the same chain in-process; this
// command is for deployments that run each part on its own (the dev chain's
// container image). Its keys are public and its state lives in memory: it is
// never a real network.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/tools/devchain"
)

func main() {
	os.Exit(run())
}

func run() int {
	addr := flag.String("addr", devchain.DefaultAddr, "host:port of the JSON-RPC server (HTTP and WebSocket)")
	block := flag.Duration("block", time.Second, "block interval (0: no blocks are sealed)")
	showVersion := flag.Bool("version", false, "print the version and revision and exit")
	flag.Parse()
	if *showVersion {
		if err := buildinfo.Print(os.Stdout, "devchain"); err != nil {
			return 1
		}
		return 0
	}

	chain, err := devchain.Start(devchain.Config{Addr: *addr, BlockInterval: *block})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devchain:", err)
		return 1
	}
	// The contract addresses are what the watcher and the validators are
	// configured with; they are the same at every start (deployed from the
	// first dev account at its first nonces).
	fmt.Printf("devchain %s: JSON-RPC %s, chain id %d, PaymentLedger %s, DevUSDC %s, deploy block %d\n",
		buildinfo.Version(), chain.URL, chain.ChainID, chain.PaymentLedger.Hex(), chain.DevUSDC.Hex(), chain.DeployBlock)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if err := chain.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "devchain:", err)
		return 1
	}
	return 0
}
