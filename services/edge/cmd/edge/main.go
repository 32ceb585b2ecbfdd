// Command edge serves the /ops/v1/* contract of a Content Ledger cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/logging"

	"github.com/contentledger/contentledger/services/edge/app"
)

func main() {
	showVersion := flag.Bool("version", false, "print the version and revision and exit")
	flag.Parse()
	if *showVersion {
		if err := buildinfo.Print(os.Stdout, "edge"); err != nil {
			os.Exit(1)
		}
		return
	}
	var cfg app.Config
	if err := envconfig.Process("OPS", &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "edge: configuration:", err)
		os.Exit(2)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "edge: configuration:", err)
		os.Exit(2)
	}
	log, err := logging.New(cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "edge: logger:", err)
		os.Exit(1)
	}
	defer func() { _ = log.Sync() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg, log, nil); err != nil {
		log.Fatal("edge stopped", zap.Error(err))
	}
}
