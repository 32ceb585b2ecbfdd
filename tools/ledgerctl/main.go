// Command ledgerctl is the author and operator CLI of Content Ledger.
//
//	ledgerctl keygen                       make a new wallet key
//	ledgerctl write  [flags] MESSAGE       pay, sign, submit and wait for COMMITTED
//	ledgerctl delete [flags] --path P      the same for a delete
//	ledgerctl status [flags] PROPOSAL_ID   show a proposal's status
//	ledgerctl put [flags] FILE             add a file to IPFS, record it (upload intent) and write an asset node
//	ledgerctl get [flags] PATH             read a node; an asset's bytes through /api/blob
//	ledgerctl pay-debt [flags]             pay a wallet's GC debt (payDebt on chain, then the pay route)
//	ledgerctl watch [flags]                follow the event stream, failing over between validators
//	ledgerctl segments list|fetch|verify   the segment chain's TAR files: listed, downloaded, checked offline
//	ledgerctl certs ca|node                the raft peer port's CA and node certificates (ADR 0025)
//
// Every command takes --json for machine-readable output.
package main

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

const usage = `ledgerctl: the Content Ledger CLI

usage:
  ledgerctl keygen [--json]
  ledgerctl write  [--key HEX] [--org ORG] [--type TYPE] [--path PATH] [--tier CLASS] [--file F] [MESSAGE]
  ledgerctl delete [--key HEX] [--org ORG] [--tier CLASS] --path PATH
  ledgerctl status [--wait 30s] PROPOSAL_ID
  ledgerctl put [--key HEX] [--ipfs-api URL] [--cid-version 0|1] [--mime TYPE] [--org ORG] [--path PATH] [--tier CLASS] FILE
                   add FILE to IPFS, declare and complete its upload intent, write an asset node naming its CID
  ledgerctl get [--out FILE] PATH   print the node at PATH (full, or below your wallet's organization with --key);
                   for an asset, write its bytes (read through the validator, checked) to --out
  ledgerctl pay-debt [--key HEX] [--wallet ADDR] [--eth 0.001 | --amount 1.50]
  ledgerctl cluster list
  ledgerctl cluster add     --id N --peer HOST:PORT --api URL   joins as a learner, a voter once caught up
  ledgerctl cluster promote --id N                            make a caught-up learner a voter now
  ledgerctl cluster remove  --id N
  ledgerctl watch [--validator URL,URL...] [--wallet ADDR]... [--org ORG]... [--path PREFIX]
                  [--last-event-id ID] [--count N] [--backoff 500ms] [--max-backoff 30s] [--idle-timeout 60s]
  ledgerctl segments list
  ledgerctl segments fetch [--dir DIR] [NAME...]   download TAR files (all by default), each verified
  ledgerctl segments verify FILE...                check archives offline, as one chain in the order given
  ledgerctl certs ca   --out DIR [--name CN] [--valid 87600h]      a CA for the raft peer port (never overwritten)
  ledgerctl certs node --ca DIR --id N [--host H,...] [--out DIR] [--valid 8760h]
                       a validator's certificate naming node N (urn:contentledger:node:N), server and client;
                       writing over an older one rotates it (the validator re-reads its files)

common flags:
  --validator URL   validator HTTP API (env LEDGER_VALIDATOR, default http://127.0.0.1:8090);
                    watch takes a comma-separated list and fails over along it
  --rpc URL         Ethereum JSON-RPC for payments (env LEDGER_RPC, default http://127.0.0.1:8545)
  --token T         bearer token of the validator's submit and ops-read lanes (env LEDGER_TOKEN)
  --operator-token T  bearer token of its operator lane: cluster changes, the GC pay route
                    (env LEDGER_OPERATOR_TOKEN; default: --token)
  --key HEX         wallet private key (env LEDGER_KEY)
  --json            print JSON
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "keygen":
		err = keygen(os.Args[2:], os.Stdout)
	case "write":
		err = propose(ctx, proposal.Write, os.Args[2:], os.Stdout, os.Stderr)
	case "delete":
		err = propose(ctx, proposal.Delete, os.Args[2:], os.Stdout, os.Stderr)
	case "status":
		err = status(ctx, os.Args[2:], os.Stdout)
	case "put":
		err = put(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "get":
		err = get(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "pay-debt":
		err = payDebt(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "cluster":
		err = cluster(ctx, os.Args[2:], os.Stdout)
	case "watch":
		err = watch(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "segments":
		err = segments(ctx, os.Args[2:], os.Stdout)
	case "certs":
		err = certs(os.Args[2:], os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q\n\n%s", os.Args[1], usage)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledgerctl:", err)
		os.Exit(1)
	}
}

// commonFlags holds the flags every command shares.
type commonFlags struct {
	validator, rpc, token, operatorToken, key string
	json                                      bool
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.validator, "validator", envOr("LEDGER_VALIDATOR", "http://127.0.0.1:8090"), "validator HTTP API")
	fs.StringVar(&c.rpc, "rpc", envOr("LEDGER_RPC", "http://127.0.0.1:8545"), "Ethereum JSON-RPC endpoint")
	fs.StringVar(&c.token, "token", os.Getenv("LEDGER_TOKEN"), "validator bearer token (submit and ops-read lanes)")
	fs.StringVar(&c.operatorToken, "operator-token", os.Getenv("LEDGER_OPERATOR_TOKEN"), "validator bearer token of the operator lane (default: --token)")
	fs.StringVar(&c.key, "key", os.Getenv("LEDGER_KEY"), "wallet private key, hex")
	fs.BoolVar(&c.json, "json", false, "print JSON")
}

// paymentRetry is how long ledgerctl resubmits a proposal whose payment
// the validators have not observed yet: a payment is published after its
// confirmations, 12 blocks of 12 s on mainnet, and a chain-watcher that was
// stopped may take longer to catch up.
const paymentRetry = 10 * time.Minute

func (c *commonFlags) client() *ledgerclient.Client {
	return &ledgerclient.Client{BaseURL: c.validator, Token: c.token, PaymentRetry: paymentRetry}
}

// operatorClient calls the validator's operator lane.
func (c *commonFlags) operatorClient() *ledgerclient.Client {
	return &ledgerclient.Client{BaseURL: c.validator, Token: cmp.Or(c.operatorToken, c.token)}
}

// progress returns a printer of progress lines to w, silent with --json.
func (c *commonFlags) progress(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if !c.json {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}

// blockchainConfig reads the validator's mode, chain and contract, which
// signing and paying need.
func blockchainConfig(ctx context.Context, client *ledgerclient.Client) (api.BlockchainConfig, error) {
	cfg, err := client.BlockchainConfig(ctx)
	if err != nil {
		return cfg, fmt.Errorf("reading the validator's blockchain config: %w", err)
	}
	return cfg, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func keygen(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		return err
	}
	addr := crypto.PubkeyToAddress(key.PublicKey).Hex()
	priv := hexutil.Encode(crypto.FromECDSA(key))
	if c.json {
		return printJSON(out, map[string]string{"address": addr, "privateKey": priv})
	}
	_, err = fmt.Fprintf(out, "address:     %s\nprivate key: %s\nkeep the private key secret; pass it as --key or LEDGER_KEY\n", addr, priv)
	return err
}

func parseKey(s string) (*ecdsa.PrivateKey, error) {
	if s == "" {
		return nil, errors.New("no wallet key: pass --key or set LEDGER_KEY (ledgerctl keygen makes one)")
	}
	key, err := crypto.HexToECDSA(strings.TrimPrefix(s, "0x"))
	if err != nil {
		return nil, fmt.Errorf("wallet key: %w", err)
	}
	return key, nil
}

// result is the JSON output of write and delete.
type result struct {
	ProposalID string             `json:"proposalId"`
	Path       string             `json:"path"`
	TxHash     string             `json:"ethereumTxHash,omitempty"`
	Status     api.ProposalStatus `json:"status"`
	// Binary is the upload a put recorded before writing the node.
	Binary *api.BlobIntent `json:"binary,omitempty"`
}

func propose(ctx context.Context, action proposal.Action, args []string, out, progressOut io.Writer) error {
	fs := flag.NewFlagSet(string(action), flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	org := fs.String("org", "", "organization (default \"default\")")
	contentType := fs.String("type", "", "content type label")
	path := fs.String("path", "", "node path below the organization")
	tier := fs.String("tier", "standard", "payment class: standard, express or priority")
	file := fs.String("file", "", "read the message from this file (- for stdin)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key, err := parseKey(c.key)
	if err != nil {
		return err
	}
	class, err := payment.ParseClass(*tier)
	if err != nil {
		return err
	}
	p := &ledgerclient.Proposal{Action: action, Organization: *org, ContentType: *contentType, Path: *path, Class: class}
	if action == proposal.Write {
		if p.Message, err = readMessage(*file, fs.Args()); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	progress := c.progress(progressOut)
	client := c.client()
	cfg, err := blockchainConfig(ctx, client)
	if err != nil {
		return err
	}
	progress("validator %s: %s mode, chain %d, contract %s", c.validator, cfg.Mode, cfg.ChainID, cfg.ContractAddress)
	return submit(ctx, &c, cfg, key, p, nil, out, progress)
}

// submit pays for (on a chain-backed network), signs and submits p, and
// waits until it is decided.
func submit(ctx context.Context, c *commonFlags, cfg api.BlockchainConfig, key *ecdsa.PrivateKey, p *ledgerclient.Proposal,
	binary *api.BlobIntent, out io.Writer, progress func(format string, a ...any)) error {
	client := c.client()
	class := p.Class

	if p.ID == (common.Hash{}) {
		p.ID = ledgerclient.NewProposalID()
	}
	var txHash common.Hash
	if cfg.PaymentsVerified {
		eth, err := ethclient.DialContext(ctx, c.rpc)
		if err != nil {
			return fmt.Errorf("connecting to %s: %w", c.rpc, err)
		}
		defer eth.Close()
		progress("paying %s ETH (%s) for proposal %s ...", payment.FormatAmount(class.Price(payment.ETH), payment.ETH), class.Name(), p.ID.Hex())
		receipt, err := ledgerclient.Pay(ctx, eth, key, cfg.ChainID, common.HexToAddress(cfg.ContractAddress), p.ID, class)
		if err != nil {
			return err
		}
		txHash = receipt.TxHash
		progress("paid in transaction %s (block %d)", txHash.Hex(), receipt.BlockNumber)
	}

	form, fullPath, err := ledgerclient.Form(cfg, key, p, txHash)
	if err != nil {
		return err
	}
	sub, err := client.Submit(ctx, p.Action, form)
	if err != nil {
		return describe(err)
	}
	progress("submitted %s to %s: HTTP %d", p.ID.Hex(), fullPath, sub.HTTPStatus)
	final, err := client.WaitFinal(ctx, p.ID, func(s api.ProposalStatus) {
		line := "status " + s.Status
		if s.Reason != "" {
			line += " (" + s.Reason + ")"
		}
		if s.CommitIndex > 0 {
			line += fmt.Sprintf(" at raft index %d", s.CommitIndex)
		}
		progress("%s", line)
	})
	if err != nil {
		return describe(err)
	}
	if c.json {
		if err := printJSON(out, result{ProposalID: p.ID.Hex(), Path: fullPath, TxHash: hexOrEmpty(txHash), Status: final, Binary: binary}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "%s %s\n", final.Status, fullPath)
	}
	if final.Status == api.StatusRejected {
		return fmt.Errorf("proposal rejected: %s", final.Reason)
	}
	return nil
}

func hexOrEmpty(h common.Hash) string {
	if h == (common.Hash{}) {
		return ""
	}
	return h.Hex()
}

func readMessage(file string, args []string) ([]byte, error) {
	switch {
	case file == "-":
		return io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	case file != "":
		return os.ReadFile(file)
	case len(args) == 1:
		return []byte(args[0]), nil
	}
	return nil, errors.New("give the message as one argument or with --file")
}

// describe makes an API error read well on a terminal.
func describe(err error) error {
	if e := apierror.As(err); e != nil {
		msg := fmt.Sprintf("%s: %s", e.Code, e.Message)
		if e.Retryable {
			msg += " (retryable)"
		}
		return errors.New(msg)
	}
	return err
}

// formatAmount renders an amount of a token's smallest unit in whole units.
func formatAmount(amount, token string) string {
	v, ok := new(big.Int).SetString(amount, 10)
	if !ok {
		return amount
	}
	t := payment.ETH
	if token == payment.USDC.String() {
		t = payment.USDC
	}
	return payment.FormatAmount(v, t)
}

func status(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	wait := fs.Duration("wait", 0, "wait up to this long for the status to change")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("give one proposal id")
	}
	id := fs.Arg(0)
	if len(id) != 66 || !strings.HasPrefix(id, "0x") {
		return fmt.Errorf("proposal id %q is not 0x followed by 64 hex digits", id)
	}
	s, err := c.client().Status(ctx, common.HexToHash(id), *wait)
	if err != nil {
		return describe(err)
	}
	if c.json {
		return printJSON(out, s)
	}
	fmt.Fprintf(out, "proposal   %s\nstatus     %s\n", s.ProposalID, s.Status)
	if s.Reason != "" {
		fmt.Fprintf(out, "reason     %s\n", s.Reason)
	}
	fmt.Fprintf(out, "action     %s\nwallet     %s\npath       %s\ntier       %s\nepoch      %d\naccepted   %s\n",
		s.Action, s.Wallet, s.Path, s.Tier, s.Epoch, s.AcceptedAt.Format(time.RFC3339))
	if s.CommitIndex > 0 {
		fmt.Fprintf(out, "index      %d\n", s.CommitIndex)
	}
	if s.CommittedAt != nil {
		fmt.Fprintf(out, "committed  %s\n", s.CommittedAt.Format(time.RFC3339))
	}
	if s.Payment != nil {
		fmt.Fprintf(out, "payment    %s (block %d, %s %s)\n", s.Payment.TxHash, s.Payment.BlockNumber, formatAmount(s.Payment.Amount, s.Payment.Token), s.Payment.Token)
	}
	return nil
}

// awaitDebtPaid waits until the validators have applied the payment of
// transaction tx. With an operator's token it asks the pay route for it
// (payment_not_found until the chain-watcher has published the log); with
// any other it waits for the leader, which pays an observed log by itself,
// to raise the account's paid figure above before's.
func awaitDebtPaid(ctx context.Context, client, operator *ledgerclient.Client, wallet common.Address, tx common.Hash, before api.GcAccount) (api.GcAccount, error) {
	byRoute := true
	for {
		var acc api.GcAccount
		var err error
		if byRoute {
			acc, err = operator.PayDebt(ctx, wallet, tx, 0)
			switch apierror.CodeOf(err) {
			case apierror.Unauthorized, apierror.Forbidden:
				byRoute = false // not an operator: the leader pays it by itself
			case apierror.PaymentNotFound:
			default:
				return acc, err
			}
		} else {
			acc, err = client.GcAccount(ctx, wallet)
			if err != nil || acc.PaidMicros > before.PaidMicros {
				return acc, err
			}
		}
		select { // the watcher publishes after the configured confirmations
		case <-time.After(time.Second):
		case <-ctx.Done():
			return acc, cmp.Or(err, ctx.Err())
		}
	}
}

// payDebt pays a wallet's GC debt (ADR 0011). On a chain-backed network
// it calls the contract's payDebt with --eth and then the validator's pay
// route with the transaction, until the chain-watcher has published it; the
// leader would pay the observed log by itself, the route waits for it. In
// MOCK mode it pays --amount debt units through the route alone.
func payDebt(ctx context.Context, args []string, out, progressOut io.Writer) error {
	fs := flag.NewFlagSet("pay-debt", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	walletFlag := fs.String("wallet", "", "wallet whose debt to pay (default: the key's)")
	eth := fs.String("eth", "0.001", "ETH to pay on chain (0.001 ETH pays 3.25 debt units)")
	amount := fs.String("amount", "", "debt units to pay in MOCK mode, e.g. 1.50")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	progress := c.progress(progressOut)
	client := c.client()
	cfg, err := blockchainConfig(ctx, client)
	if err != nil {
		return err
	}
	var key *ecdsa.PrivateKey
	if cfg.PaymentsVerified || *walletFlag == "" {
		if key, err = parseKey(c.key); err != nil {
			return err
		}
	}
	var wallet common.Address
	switch {
	case *walletFlag == "":
		wallet = crypto.PubkeyToAddress(key.PublicKey)
	case common.IsHexAddress(*walletFlag):
		wallet = common.HexToAddress(*walletFlag)
	default:
		return fmt.Errorf("--wallet %q is not an address", *walletFlag)
	}

	var acc api.GcAccount
	if !cfg.PaymentsVerified {
		micros, ok := api.ParseDebt(*amount)
		if !ok || micros == 0 {
			return errors.New("MOCK mode pays without a chain: give --amount, e.g. 1.50")
		}
		if acc, err = c.operatorClient().PayDebt(ctx, wallet, common.Hash{}, micros); err != nil {
			return describe(err)
		}
	} else {
		wei, err := parseEther(*eth)
		if err != nil {
			return err
		}
		before, err := client.GcAccount(ctx, wallet)
		if err != nil {
			return describe(err)
		}
		chain, err := ethclient.DialContext(ctx, c.rpc)
		if err != nil {
			return fmt.Errorf("connecting to %s: %w", c.rpc, err)
		}
		defer chain.Close()
		progress("paying %s ETH towards the GC debt of %s ...", *eth, wallet.Hex())
		receipt, err := ledgerclient.PayDebt(ctx, chain, key, cfg.ChainID, common.HexToAddress(cfg.ContractAddress), wallet, wei)
		if err != nil {
			return err
		}
		progress("paid in transaction %s (block %d); waiting for the validators to observe it", receipt.TxHash.Hex(), receipt.BlockNumber)
		if acc, err = awaitDebtPaid(ctx, client, c.operatorClient(), wallet, receipt.TxHash, before); err != nil {
			return describe(err)
		}
	}
	if c.json {
		return printJSON(out, acc)
	}
	_, err = fmt.Fprintf(out, "wallet          %s\npending debt    %s\nexecuted debt   %s\nlimit           %s\npaid            %s\nwrites blocked  %t\n",
		acc.Wallet, acc.PendingDebt, acc.ExecutedDebt, acc.Limit, acc.Paid, acc.WritesBlocked)
	return err
}

// parseEther reads a decimal ETH amount into wei.
func parseEther(s string) (*big.Int, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() <= 0 {
		return nil, fmt.Errorf("ETH amount %q is not a positive decimal", s)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)))
	if !r.IsInt() {
		return nil, fmt.Errorf("ETH amount %q has more than 18 decimals", s)
	}
	return r.Num(), nil
}

// cluster lists, adds, promotes and removes validators
// (docs/runbooks/membership.md).
func cluster(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("cluster needs list, add, promote or remove")
	}
	fs := flag.NewFlagSet("cluster "+args[0], flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	id := fs.Uint64("id", 0, "raft id of the validator (never reuse one)")
	peer := fs.String("peer", "", "host:port of the validator's raft peer port")
	apiURL := fs.String("api", "", "base URL of the validator's HTTP API")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	client := c.client()
	if args[0] != "list" {
		client = c.operatorClient() // changes are the operator lane's
	}
	var m ledgerclient.Members
	var err error
	switch args[0] {
	case "list":
		m, err = client.ClusterMembers(ctx)
	case "add":
		if *id == 0 || *peer == "" || *apiURL == "" {
			return errors.New("cluster add needs --id, --peer and --api")
		}
		m, err = client.AddMember(ctx, api.Member{ID: *id, PeerAddr: *peer, APIURL: *apiURL})
	case "remove":
		if *id == 0 {
			return errors.New("cluster remove needs --id")
		}
		m, err = client.RemoveMember(ctx, *id)
	case "promote":
		if *id == 0 {
			return errors.New("cluster promote needs --id")
		}
		m, err = client.PromoteMember(ctx, *id)
	default:
		return fmt.Errorf("unknown cluster command %q (list, add, promote, remove)", args[0])
	}
	if e := apierror.As(err); e != nil && e.Details["reason"] != nil {
		// The membership rule that refused the change (ADR 0027).
		return fmt.Errorf("%w [%v]", describe(err), e.Details["reason"])
	}
	if err != nil {
		return describe(err)
	}
	if c.json {
		return printJSON(out, m)
	}
	fmt.Fprintf(out, "%-4s %-22s %-30s %s\n", "ID", "PEER", "API", "ROLE")
	for _, mem := range m.Members {
		role := "member"
		switch {
		case slices.Contains(m.Voters, mem.ID):
			role = "voter"
		case slices.Contains(m.Learners, mem.ID):
			role = "learner"
		}
		fmt.Fprintf(out, "%-4d %-22s %-30s %s\n", mem.ID, mem.PeerAddr, mem.APIURL, role)
	}
	return nil
}
