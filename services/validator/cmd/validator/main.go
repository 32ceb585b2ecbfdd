// Command validator runs one Content Ledger validator.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/services/validator/app"
)

func main() {
	showVersion := flag.Bool("version", false, "print the version and revision and exit")
	flag.Parse()
	if *showVersion {
		if err := buildinfo.Print(os.Stdout, "validator"); err != nil {
			os.Exit(1)
		}
		return
	}
	cfg, err := app.LoadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "validator: configuration:", err)
		os.Exit(2)
	}
	log, err := cfg.Logger()
	if err != nil {
		fmt.Fprintln(os.Stderr, "validator: logger:", err)
		os.Exit(1)
	}
	defer func() { _ = log.Sync() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg, log, nil); err != nil {
		log.Fatal("validator stopped", zap.Error(err))
	}
}
