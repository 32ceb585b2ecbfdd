package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/contentledger/contentledger/pkg/peercert"
)

// certs makes the raft peer port's PKI (ADR 0025): a CA, and node
// certificates that name their validator's NODE_ID.
func certs(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("certs: say ca or node")
	}
	switch args[0] {
	case "ca":
		return certsCA(args[1:], out)
	case "node":
		return certsNode(args[1:], out)
	}
	return fmt.Errorf("certs: unknown subcommand %q (ca, node)", args[0])
}

func certsCA(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("certs ca", flag.ContinueOnError)
	dir := fs.String("out", "", "directory to write ca.crt and ca.key to (required; an existing CA is never overwritten)")
	name := fs.String("name", "contentledger peer CA", "the CA's common name")
	validFor := fs.Duration("valid", peercert.DefaultCAValidity, "validity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("certs ca: --out DIR is required")
	}
	ca, err := peercert.NewCA(*name, *validFor)
	if err != nil {
		return err
	}
	if err := peercert.WriteCA(*dir, ca); err != nil {
		return fmt.Errorf("certs ca: %w", err)
	}
	fmt.Fprintf(out, "CA written: %s (give it to every validator as SVC_VALIDATOR_PEER_TLS_CA)\n"+
		"            %s (keep it off the validators; it signs node certificates)\n",
		filepath.Join(*dir, peercert.CACertFile), filepath.Join(*dir, peercert.CAKeyFile))
	return nil
}

func certsNode(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("certs node", flag.ContinueOnError)
	caDir := fs.String("ca", "", "directory of the CA (ca.crt, ca.key; required)")
	id := fs.Uint64("id", 0, "the validator's raft node id, its SVC_VALIDATOR_NODE_ID (required)")
	hosts := fs.String("host", "", "comma-separated DNS names or IPs to add as SANs (optional: peers check the node id, not these)")
	dir := fs.String("out", "", "directory to write node-<id>.crt and node-<id>.key to (default: the CA's)")
	validFor := fs.Duration("valid", peercert.DefaultNodeValidity, "validity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *caDir == "" || *id == 0 {
		return errors.New("certs node: --ca DIR and --id N are required")
	}
	if *dir == "" {
		*dir = *caDir
	}
	ca, err := peercert.ReadCA(*caDir)
	if err != nil {
		return fmt.Errorf("certs node: %w", err)
	}
	var hostList []string
	if *hosts != "" {
		hostList = strings.Split(*hosts, ",")
	}
	n, err := ca.IssueNode(*id, hostList, *validFor)
	if err != nil {
		return err
	}
	leaf, err := peercert.ParseCertificate(n.CertPEM)
	if err != nil {
		return err
	}
	cert, key, err := peercert.WriteNode(*dir, *id, n)
	if err != nil {
		return fmt.Errorf("certs node: %w", err)
	}
	fmt.Fprintf(out, "node %d (%s), valid until %s:\n  SVC_VALIDATOR_PEER_TLS_CERT=%s\n  SVC_VALIDATOR_PEER_TLS_KEY=%s\n  SVC_VALIDATOR_PEER_TLS_CA=%s\n",
		*id, peercert.NodeURI(*id), leaf.NotAfter.UTC().Format(time.DateOnly), cert, key, filepath.Join(*caDir, peercert.CACertFile))
	return nil
}
