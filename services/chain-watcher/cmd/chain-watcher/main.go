// Command chain-watcher publishes the payment contract's ProposalPaid and DebtPaid logs
// to NATS JetStream. It is configured through WATCHER_* environment
// variables; run it with -h to list them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/logging"

	"github.com/contentledger/contentledger/services/chain-watcher/app"
)

func main() {
	os.Exit(run())
}

func run() int {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s\n\nchain-watcher is configured through the environment. "+
			"WATCHER_MODE (MOCK, TESTNET or MAINNET) supplies the defaults given \"by MODE\";\n"+
			"a variable set explicitly overrides them.\n\n", os.Args[0])
		if err := app.Usage(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	showVersion := flag.Bool("version", false, "print the version and revision and exit")
	flag.Parse()
	if *showVersion {
		if err := buildinfo.Print(os.Stdout, "chain-watcher"); err != nil {
			return 1
		}
		return 0
	}

	cfg, err := app.LoadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chain-watcher:", err)
		return 2
	}
	log, err := logging.New(cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chain-watcher: logger:", err)
		return 1
	}
	defer func() { _ = log.Sync() }()

	// The first SIGINT/SIGTERM cancels ctx and Run stops cleanly; a second
	// one kills the process the default way, since stop() restores it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()

	if err := app.Run(ctx, cfg, log); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("chain-watcher failed", zap.Error(err))
		return 1
	}
	return 0
}
