package devchain_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tools/devchain"
)

func start(t *testing.T, cfg devchain.Config) *devchain.Chain {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	c, err := devchain.Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestDevAccountsKeysMatchAddresses(t *testing.T) {
	seen := map[common.Address]bool{}
	for i, a := range devchain.DevAccounts {
		k, err := a.Key()
		if err != nil {
			t.Fatalf("account %d: %v", i, err)
		}
		if got := crypto.PubkeyToAddress(k.PublicKey); got != a.Address {
			t.Errorf("account %d: key gives %s, table says %s", i, got.Hex(), a.Address.Hex())
		}
		if seen[a.Address] {
			t.Errorf("account %d: duplicate %s", i, a.Address.Hex())
		}
		seen[a.Address] = true
	}
	if got := devchain.DevAccounts[0].Address.Hex(); got != "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" {
		t.Errorf("first dev account %s", got)
	}
	bad := devchain.DevAccount{PrivateKeyHex: "zz", Address: devchain.DevAccounts[0].Address}
	if _, err := bad.Key(); err == nil {
		t.Error("Key accepted a malformed private key")
	}
}

// TestStartOverHTTP checks what a separate process sees through the RPC URL:
// chain id, funded accounts, deployed contracts, minted DevUSDC.
func TestStartOverHTTP(t *testing.T) {
	chain := start(t, devchain.Config{USDCPerAccount: 5})
	ctx := ctx(t)
	rc, err := ethclient.DialContext(ctx, chain.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	id, err := rc.ChainID(ctx)
	if err != nil || id.Uint64() != devchain.ChainID || chain.ChainID != devchain.ChainID {
		t.Fatalf("chain id %v (%v), field %d", id, err, chain.ChainID)
	}
	for _, a := range []common.Address{chain.PaymentLedger, chain.DevUSDC} {
		code, err := rc.CodeAt(ctx, a, nil)
		if err != nil || len(code) == 0 {
			t.Fatalf("no code at %s: %v", a.Hex(), err)
		}
	}
	if chain.DeployBlock != 1 {
		t.Errorf("DeployBlock = %d, want 1", chain.DeployBlock)
	}
	ledger := paycontract.NewPaymentLedger().Instance(rc, chain.PaymentLedger)
	usdcAddr, err := bind.Call(ledger, &bind.CallOpts{Context: ctx}, paycontract.NewPaymentLedger().PackUsdc(), paycontract.NewPaymentLedger().UnpackUsdc)
	if err != nil || usdcAddr != chain.DevUSDC {
		t.Fatalf("ledger.usdc() = %s (%v), want %s", usdcAddr.Hex(), err, chain.DevUSDC.Hex())
	}
	token := paycontract.NewDevUSDC()
	usdc := token.Instance(rc, chain.DevUSDC)
	for i, a := range devchain.DevAccounts {
		bal, err := bind.Call(usdc, &bind.CallOpts{Context: ctx}, token.PackBalanceOf(a.Address), token.UnpackBalanceOf)
		if err != nil || bal.Cmp(big.NewInt(5_000_000)) != 0 {
			t.Errorf("account %d USDC balance %v (%v), want 5000000", i, bal, err)
		}
		eth, err := rc.BalanceAt(ctx, a.Address, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && eth.Cmp(devchain.DevAccountBalance()) != 0 {
			// Account 0 paid for the deployments.
			t.Errorf("account %d ETH balance %v, want %v", i, eth, devchain.DevAccountBalance())
		}
	}
}

func TestPayForProposalManualCommit(t *testing.T) {
	chain := start(t, devchain.Config{})
	ctx := ctx(t)
	key := devchain.DevAccounts[3].MustKey()
	// Two payments from one account before a block: nonces must not clash.
	h1, err := chain.PayForProposal(ctx, key, common.HexToHash("0x01"), payment.Standard)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := chain.PayForProposal(ctx, key, common.HexToHash("0x02"), payment.Priority)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Client().TransactionReceipt(ctx, h1); err == nil {
		t.Fatal("receipt before Commit: the chain mined on its own")
	}
	head, err := chain.Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []common.Hash{h1, h2} {
		r, err := chain.WaitMined(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if r.BlockHash != head {
			t.Errorf("tx %s in block %s, want the committed %s", h.Hex(), r.BlockHash.Hex(), head.Hex())
		}
		if len(r.Logs) != 1 {
			t.Fatalf("tx %s has %d logs", h.Hex(), len(r.Logs))
		}
	}

	if _, err := chain.PayForProposal(ctx, key, common.HexToHash("0x03"), payment.Class(9)); !errors.Is(err, devchain.ErrInvalidClass) {
		t.Errorf("class 9: %v, want ErrInvalidClass", err)
	}
	if _, err := chain.PayForProposal(ctx, nil, common.HexToHash("0x03"), payment.Standard); err == nil {
		t.Error("nil key accepted")
	}
	// Paying a proposal again reverts in gas estimation: nothing is sent.
	if _, err := chain.PayForProposal(ctx, key, common.HexToHash("0x01"), payment.Standard); err == nil {
		t.Error("second payment for the same proposal was sent")
	}
}

func TestBlockTicker(t *testing.T) {
	chain := start(t, devchain.Config{BlockInterval: 20 * time.Millisecond})
	ctx := ctx(t)
	h, err := chain.PayForProposal(ctx, devchain.DevAccounts[1].MustKey(), common.HexToHash("0xaa"), payment.Express)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody commits: the ticker must mine it.
	r, err := chain.WaitMined(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := chain.Client().BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n >= r.BlockNumber.Uint64()+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("head stuck at %d", n)
		}
		time.Sleep(5 * time.Millisecond) // polling the head, not waiting for a guess
	}
}

func TestCloseStopsEverything(t *testing.T) {
	chain, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0", BlockInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	url := chain.URL
	if err := chain.Close(); err != nil {
		t.Fatal(err)
	}
	if err := chain.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := chain.Commit(); !errors.Is(err, devchain.ErrClosed) {
		t.Errorf("Commit after Close: %v, want ErrClosed", err)
	}
	ctx := ctx(t)
	rc, err := ethclient.DialContext(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := rc.ChainID(ctx); err == nil {
		t.Error("RPC still answers after Close")
	}
}

func TestStartErrors(t *testing.T) {
	chain := start(t, devchain.Config{})
	// The port is taken: an error, not the backend's panic.
	if c, err := devchain.Start(devchain.Config{Addr: chain.URL[len("http://"):]}); err == nil {
		_ = c.Close()
		t.Error("second chain on a taken port started")
	}
	for _, addr := range []string{"no-port", "127.0.0.1:x", "127.0.0.1:70000"} {
		if c, err := devchain.Start(devchain.Config{Addr: addr}); err == nil {
			_ = c.Close()
			t.Errorf("Start(%q) succeeded", addr)
		}
	}
	if _, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0", BlockInterval: -time.Second}); err == nil {
		t.Error("negative block interval accepted")
	}
}

func TestAllInterfacesReportsLoopbackURL(t *testing.T) {
	chain := start(t, devchain.Config{Addr: ":0"})
	if !strings.HasPrefix(chain.URL, "http://127.0.0.1:") {
		t.Errorf("URL %q, want loopback", chain.URL)
	}
}

func TestPayDebt(t *testing.T) {
	chain := start(t, devchain.Config{})
	ctx := ctx(t)
	payer, wallet := devchain.DevAccounts[4], devchain.DevAccounts[5].Address
	h, err := chain.PayDebt(ctx, payer.MustKey(), wallet, payment.Standard.Price(payment.ETH))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := chain.WaitMined(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Logs) != 1 {
		t.Fatalf("%d logs, want 1", len(r.Logs))
	}
	d, err := paycontract.Decoder{ChainID: chain.ChainID, Contract: chain.PaymentLedger}.DebtPaid(*r.Logs[0])
	if err != nil {
		t.Fatal(err)
	}
	if d.Wallet != wallet || d.Payer != payer.Address || d.Amount.Cmp(payment.Standard.Price(payment.ETH)) != 0 || d.TxHash != h {
		t.Fatalf("DebtPaid %+v", d)
	}
	if _, err := chain.PayDebt(ctx, payer.MustKey(), wallet, nil); err == nil {
		t.Error("a payment of nothing was sent")
	}
}

// TestWebSocketSubscriptions: the WebSocket endpoint serves newHeads
// subscriptions, which a watcher uses to read a new block at once.
func TestWebSocketSubscriptions(t *testing.T) {
	chain, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ethclient.DialContext(ctx, chain.WSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	heads := make(chan *types.Header, 4)
	sub, err := c.SubscribeNewHead(ctx, heads)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	want, err := chain.Commit()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-heads:
		if h.Hash() != want {
			t.Fatalf("new head %s, want the committed block %s", h.Hash(), want)
		}
	case err := <-sub.Err():
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("no new head after a commit")
	}
}
