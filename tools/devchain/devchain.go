// Package devchain runs a local Ethereum development chain in-process: the
// go-ethereum simulated backend (ethclient/simulated) with its JSON-RPC API
// served over HTTP, the well-known dev accounts funded in genesis, and the
// payment contract (PaymentLedger) and its dev stablecoin (DevUSDC) deployed
// at start.
//
// The simulated backend mines nothing on its own: a block is sealed by
// Commit, or every Config.BlockInterval when that is set. Its chain id is
// always 1337.
//
// It is for development and tests only: the accounts' keys are public, CORS
// and virtual hosts are open, and the state lives in memory.
package devchain

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
)

const (
	// DefaultAddr is where the JSON-RPC HTTP server listens when Config.Addr
	// is empty (ADR 0008: dev chain JSON-RPC 8545).
	DefaultAddr = "127.0.0.1:8545"
	// ChainID is the simulated backend's chain id; it cannot be changed.
	ChainID uint64 = 1337
	// DefaultUSDCPerAccount is how many whole DevUSDC each dev account is
	// minted at start when Config.USDCPerAccount is 0.
	DefaultUSDCPerAccount = 1_000_000
	// devAccountEther is each dev account's genesis balance in ether, as
	// Hardhat and Anvil fund them.
	devAccountEther = 10_000
	// pollInterval is how often WaitMined asks for a receipt. The chain is
	// in-process, so asking is cheap and short waits keep tests fast.
	pollInterval = 10 * time.Millisecond
)

var (
	// ErrClosed is returned by the methods of a closed Chain.
	ErrClosed = errors.New("devchain: chain closed")
	// ErrTxFailed is returned by WaitMined for a transaction that was mined
	// but reverted (receipt status 0).
	ErrTxFailed = errors.New("devchain: transaction reverted")
	// ErrInvalidClass is returned by PayForProposal for a class the contract
	// does not have.
	ErrInvalidClass = errors.New("devchain: invalid payment class")
)

// DevAccountBalance returns each dev account's genesis balance in wei
// (10,000 ETH). The value is fresh: the caller may modify it.
func DevAccountBalance() *big.Int {
	return new(big.Int).Mul(big.NewInt(devAccountEther), big.NewInt(params.Ether))
}

// Config configures a dev chain. The zero value is a valid configuration:
// RPC on DefaultAddr, manual blocks, DefaultUSDCPerAccount, no node log.
type Config struct {
	// Addr is the host:port of the JSON-RPC server, HTTP and WebSocket on
	// the same port. Empty means DefaultAddr; port 0 picks a free port
	// (tests), reported in Chain.URL and Chain.WSURL.
	Addr string
	// BlockInterval seals a block every interval when positive. Zero means
	// nothing is mined until Commit is called.
	BlockInterval time.Duration
	// USDCPerAccount is the number of whole DevUSDC (6 decimals) minted to
	// each dev account at start; 0 means DefaultUSDCPerAccount.
	USDCPerAccount uint64
	// Logger receives the go-ethereum node's log; nil discards it.
	Logger *slog.Logger
}

// Chain is a running dev chain. Its exported fields are set by Start and
// must be treated as read-only.
type Chain struct {
	// URL is the JSON-RPC HTTP endpoint, e.g. "http://127.0.0.1:8545".
	URL string
	// WSURL is the same endpoint over WebSocket, e.g. "ws://127.0.0.1:8545",
	// which also serves subscriptions (eth_subscribe newHeads, logs).
	WSURL string
	// ChainID is the chain id (always 1337).
	ChainID uint64
	// PaymentLedger is the address of the deployed payment contract.
	PaymentLedger common.Address
	// DevUSDC is the address of the deployed dev stablecoin, which the
	// payment contract takes as USDC.
	DevUSDC common.Address
	// DeployBlock is the number of the block holding both deployments:
	// no payment log can be older, so a watcher may start there.
	DeployBlock uint64

	backend *simulated.Backend
	client  simulated.Client

	// mu serializes Commit with Close (the backend panics when committing
	// after Close) and with the block ticker.
	mu     sync.Mutex
	closed bool
	stop   chan struct{}
	done   chan struct{} // closed when the ticker exits; nil without one

	// sendMu guards nonces. The transaction pool promotes a sent
	// transaction asynchronously, so the pending nonce it reports can lag
	// behind a transaction just sent; back-to-back sends from one account
	// would then reuse a nonce. nonces holds the next nonce per sender.
	sendMu sync.Mutex
	nonces map[common.Address]uint64
}

// Start starts a dev chain: genesis with the dev accounts funded, the JSON-RPC
// HTTP server listening, DevUSDC and PaymentLedger deployed from
// DevAccounts[0] (block 1), DevUSDC minted to every dev account (block 2),
// then the block ticker if configured. Close releases it.
func Start(cfg Config) (*Chain, error) {
	if cfg.BlockInterval < 0 {
		return nil, fmt.Errorf("devchain: negative block interval %s", cfg.BlockInterval)
	}
	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("devchain: rpc address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("devchain: rpc address %q: bad port", addr)
	}
	if host == "" {
		// node.Config treats an empty HTTPHost as "HTTP off"; for
		// net.Listen an empty host means every interface.
		host = "0.0.0.0"
	}
	usdc := cfg.USDCPerAccount
	if usdc == 0 {
		usdc = DefaultUSDCPerAccount
	}
	next := slog.DiscardHandler
	if cfg.Logger != nil {
		next = cfg.Logger.Handler()
	}
	capture := newEndpointCapture(next)

	alloc := make(types.GenesisAlloc, len(DevAccounts))
	for _, a := range DevAccounts {
		alloc[a.Address] = types.Account{Balance: DevAccountBalance()}
	}
	backend, err := newBackend(alloc, func(nc *node.Config, _ *ethconfig.Config) {
		nc.Logger = log.NewLogger(capture)
		nc.HTTPHost = host
		nc.HTTPPort = port
		nc.HTTPModules = []string{"eth", "net", "web3"}
		// Open for containers (Host: devchain:8545) and browser wallets.
		nc.HTTPVirtualHosts = []string{"*"}
		nc.HTTPCors = []string{"*"}
		// WebSocket on the same host and port: the node serves both
		// from one listener.
		nc.WSHost = host
		nc.WSPort = port
		nc.WSModules = nc.HTTPModules
		nc.WSOrigins = []string{"*"}
	})
	if err != nil {
		return nil, err
	}
	c := &Chain{
		ChainID: ChainID,
		backend: backend,
		client:  backend.Client(),
		stop:    make(chan struct{}),
		nonces:  make(map[common.Address]uint64),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.setup(ctx, capture.Endpoint(), port, addr, usdc); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if cfg.BlockInterval > 0 {
		c.done = make(chan struct{})
		go c.tick(cfg.BlockInterval)
	}
	return c, nil
}

// newBackend wraps simulated.NewBackend, which panics when the node cannot
// start, e.g. when the RPC port is taken: for a dev tool that is an ordinary
// error, not a crash.
func newBackend(alloc types.GenesisAlloc, opt func(*node.Config, *ethconfig.Config)) (b *simulated.Backend, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("devchain: start simulated backend: %v", r)
		}
	}()
	return simulated.NewBackend(alloc, opt), nil
}

func (c *Chain) setup(ctx context.Context, endpoint string, port int, addr string, usdcPerAccount uint64) error {
	switch {
	case endpoint != "":
		c.URL = dialURL(endpoint)
	case port != 0:
		c.URL = dialURL(addr)
	default:
		return errors.New("devchain: the RPC server's port is unknown (go-ethereum no longer logs it)")
	}
	c.WSURL = "ws://" + strings.TrimPrefix(c.URL, "http://")
	for _, u := range []string{c.URL, c.WSURL} {
		if err := checkRPC(ctx, u); err != nil {
			return err
		}
	}
	if err := c.deploy(ctx, usdcPerAccount); err != nil {
		return fmt.Errorf("devchain: deploy contracts: %w", err)
	}
	return nil
}

// dialURL turns a listen address into a URL clients can dial: a server on
// every interface (0.0.0.0, ::) is reached on loopback.
func dialURL(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "http://" + hostport
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// checkRPC proves that URL serves this chain's JSON-RPC API.
func checkRPC(ctx context.Context, url string) error {
	rc, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return fmt.Errorf("devchain: dial %s: %w", url, err)
	}
	defer rc.Close()
	id, err := rc.ChainID(ctx)
	if err != nil {
		return fmt.Errorf("devchain: eth_chainId over %s: %w", url, err)
	}
	if !id.IsUint64() || id.Uint64() != ChainID {
		return fmt.Errorf("devchain: %s serves chain %s, want %d", url, id, ChainID)
	}
	return nil
}

func (c *Chain) deploy(ctx context.Context, usdcPerAccount uint64) error {
	deployer, err := DevAccounts[0].Key()
	if err != nil {
		return err
	}
	opts := c.transactor(ctx, deployer)
	opts.Nonce = new(big.Int)
	usdcAddr, usdcTx, err := bind.DeployContract(opts, common.FromHex(paycontract.DevUSDCMetaData.Bin), c.client, nil)
	if err != nil {
		return fmt.Errorf("DevUSDC: %w", err)
	}
	// Packing a single address cannot fail (PackConstructor has no Try form).
	ctor := paycontract.NewPaymentLedger().PackConstructor(usdcAddr)
	opts.Nonce = big.NewInt(1)
	ledgerAddr, ledgerTx, err := bind.DeployContract(opts, common.FromHex(paycontract.PaymentLedgerMetaData.Bin), c.client, ctor)
	if err != nil {
		return fmt.Errorf("PaymentLedger: %w", err)
	}
	c.nonces[DevAccounts[0].Address] = 2
	// Mints are estimated against the latest block, where DevUSDC must
	// already have code: seal the deployments first.
	block, err := c.commitAndCheck(ctx, usdcTx.Hash(), ledgerTx.Hash())
	if err != nil {
		return err
	}
	c.PaymentLedger, c.DevUSDC, c.DeployBlock = ledgerAddr, usdcAddr, block

	amount := new(big.Int).Mul(new(big.Int).SetUint64(usdcPerAccount), big.NewInt(1_000_000))
	token := paycontract.NewDevUSDC()
	var mints []common.Hash
	for _, a := range DevAccounts {
		data, err := token.TryPackMint(a.Address, amount)
		if err != nil {
			return fmt.Errorf("pack mint: %w", err)
		}
		h, err := c.SendTx(ctx, deployer, usdcAddr, nil, data)
		if err != nil {
			return fmt.Errorf("mint DevUSDC to %s: %w", a.Address.Hex(), err)
		}
		mints = append(mints, h)
	}
	_, err = c.commitAndCheck(ctx, mints...)
	return err
}

// commitAndCheck seals a block and checks that every tx in it succeeded. It
// returns the block's number.
func (c *Chain) commitAndCheck(ctx context.Context, txs ...common.Hash) (uint64, error) {
	// The pool promotes a sent transaction asynchronously, so a block sealed
	// right after the send may not hold it: seal again until every
	// transaction is mined (empty blocks on a dev chain cost nothing).
	var block uint64
	for _, h := range txs {
		for {
			if _, err := c.Commit(); err != nil {
				return 0, err
			}
			wait, cancel := context.WithTimeout(ctx, time.Second)
			r, err := c.WaitMined(wait, h)
			cancel()
			if err == nil {
				block = max(block, r.BlockNumber.Uint64())
				break
			}
			if errors.Is(err, ErrTxFailed) || ctx.Err() != nil {
				return 0, err
			}
		}
	}
	return block, nil
}

func (c *Chain) tick(interval time.Duration) {
	defer close(c.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if _, err := c.Commit(); err != nil {
				return
			}
		}
	}
}

// Commit seals a block with the pending transactions and returns its hash.
// It is safe to call concurrently with the block ticker.
func (c *Chain) Commit() (common.Hash, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return common.Hash{}, ErrClosed
	}
	return c.backend.Commit(), nil
}

// Fork makes the block parent the head of the chain at once, so that the
// next Commit seals a competing branch on top of it: a reorg, for tests. The
// transactions of the dropped blocks return to the pool and are mined again
// by the next Commit, in a block with another hash. There must be no pending
// transactions. The nonces remembered per sender are forgotten, since
// ForkDropping's transactions are never mined.
func (c *Chain) Fork(parent common.Hash) error { return c.fork(parent, false) }

// ForkDropping is Fork, except that the dropped blocks' transactions leave
// the pool too, before any block (of the ticker, say) can mine them again:
// the new branch never carries them.
func (c *Chain) ForkDropping(parent common.Hash) error { return c.fork(parent, true) }

func (c *Chain) fork(parent common.Hash, drop bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.backend.Fork(parent); err != nil {
		return fmt.Errorf("devchain: fork at %s: %w", parent.Hex(), err)
	}
	if drop {
		// The pool takes the dropped transactions back on the head change;
		// Rollback waits for that before it clears the pool.
		c.backend.Rollback()
	}
	c.sendMu.Lock()
	clear(c.nonces)
	c.sendMu.Unlock()
	return nil
}

// Client returns an in-process client of the chain (no HTTP). It satisfies
// the go-ethereum interfaces (ethereum.LogFilterer, bind.ContractBackend...).
func (c *Chain) Client() simulated.Client { return c.client }

// Close stops the ticker and the chain, and the RPC server with it. It is
// safe to call more than once.
func (c *Chain) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	if c.done != nil {
		<-c.done
	}
	if err := c.backend.Close(); err != nil {
		return fmt.Errorf("devchain: close: %w", err)
	}
	return nil
}

// Transactor returns signing options for key on this chain, bound to ctx.
// Sends through them take their nonce from the pool, which lags behind a
// transaction just sent: for several transactions from one account in one
// block use SendTx, or set Nonce.
func (c *Chain) Transactor(ctx context.Context, key *ecdsa.PrivateKey) *bind.TransactOpts {
	return c.transactor(ctx, key)
}

func (c *Chain) transactor(ctx context.Context, key *ecdsa.PrivateKey) *bind.TransactOpts {
	opts := bind.NewKeyedTransactor(key, new(big.Int).SetUint64(ChainID))
	opts.Context = ctx
	return opts
}

// SendTx signs and sends a call of contract `to` with calldata and value
// (nil for none) from key, and returns the transaction hash. Gas is estimated
// against the latest block, so a call that would revert there fails here
// with the revert data (an rpc.DataError). Nonces are tracked per sender, so
// back-to-back sends from one account are safe. The transaction is mined by
// the next Commit (or tick): see WaitMined.
func (c *Chain) SendTx(ctx context.Context, key *ecdsa.PrivateKey, to common.Address, value *big.Int, data []byte) (common.Hash, error) {
	if key == nil {
		return common.Hash{}, errors.New("devchain: no key")
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	opts := c.transactor(ctx, key)
	opts.Value = value
	pending, err := c.client.PendingNonceAt(ctx, opts.From)
	if err != nil {
		return common.Hash{}, fmt.Errorf("devchain: nonce of %s: %w", opts.From.Hex(), err)
	}
	nonce := max(pending, c.nonces[opts.From])
	opts.Nonce = new(big.Int).SetUint64(nonce)
	tx, err := bind.NewBoundContract(to, abi.ABI{}, c.client, c.client, c.client).RawTransact(opts, data)
	if err != nil {
		return common.Hash{}, err
	}
	c.nonces[opts.From] = nonce + 1
	return tx.Hash(), nil
}

// PayForProposal pays for a proposal in ETH at the class's exact price from
// key, calling payForProposal on the deployed PaymentLedger. It returns the
// transaction hash once the transaction is in the pool; it is mined by the
// next block: with a manual chain (BlockInterval 0) call Commit, with a
// ticker wait for it with WaitMined.
func (c *Chain) PayForProposal(ctx context.Context, key *ecdsa.PrivateKey, proposalID common.Hash, class payment.Class) (common.Hash, error) {
	if !class.Valid() {
		return common.Hash{}, fmt.Errorf("%w: %d", ErrInvalidClass, uint8(class))
	}
	data, err := paycontract.NewPaymentLedger().TryPackPayForProposal(proposalID, uint8(class))
	if err != nil {
		return common.Hash{}, fmt.Errorf("devchain: pack payForProposal: %w", err)
	}
	h, err := c.SendTx(ctx, key, c.PaymentLedger, class.Price(payment.ETH), data)
	if err != nil {
		return common.Hash{}, fmt.Errorf("devchain: payForProposal %s: %w", proposalID.Hex(), err)
	}
	return h, nil
}

// PayDebt pays wei towards wallet's GC debt from key, calling payDebt on the
// deployed PaymentLedger (its DebtPaid log names wallet, and key's address
// as the payer). Like PayForProposal it returns once the transaction is in
// the pool; a zero amount reverts in gas estimation and sends nothing.
func (c *Chain) PayDebt(ctx context.Context, key *ecdsa.PrivateKey, wallet common.Address, wei *big.Int) (common.Hash, error) {
	data, err := paycontract.NewPaymentLedger().TryPackPayDebt(wallet)
	if err != nil {
		return common.Hash{}, fmt.Errorf("devchain: pack payDebt: %w", err)
	}
	h, err := c.SendTx(ctx, key, c.PaymentLedger, wei, data)
	if err != nil {
		return common.Hash{}, fmt.Errorf("devchain: payDebt for %s: %w", wallet.Hex(), err)
	}
	return h, nil
}

// WaitMined waits until the transaction is in a block and returns its
// receipt; for a reverted transaction it returns the receipt and an error
// wrapping ErrTxFailed. On a manual chain it waits for someone to Commit:
// bound ctx. Use it rather than asking for the receipt once after Commit:
// go-ethereum indexes transactions in the background, so a receipt can be
// missing for a moment after its block.
func (c *Chain) WaitMined(ctx context.Context, tx common.Hash) (*types.Receipt, error) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var lastErr error
	for {
		r, err := c.client.TransactionReceipt(ctx, tx)
		switch {
		case err == nil && r.Status != types.ReceiptStatusSuccessful:
			return r, fmt.Errorf("%w: %s in block %d", ErrTxFailed, tx.Hex(), r.BlockNumber)
		case err == nil:
			return r, nil
		}
		// ethereum.NotFound: not mined yet. Anything else, such as
		// "transaction indexing is in progress" just after a block, is
		// transient on an in-process chain: ask again until ctx ends.
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("devchain: wait for %s: %w (last answer: %v)", tx.Hex(), ctx.Err(), lastErr)
		case <-t.C:
		}
	}
}
