// Tests of the compiled payment contract (build/PaymentLedger.bin, through
// the pkg/paycontract bindings) on the simulated chain of tools/devchain:
// prices, exact-amount and once-only rules, and the logs the chain watcher
// and the validators rely on.
package contracts_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tools/devchain"
)

type env struct {
	t      *testing.T
	ctx    context.Context
	chain  *devchain.Chain
	ledger *paycontract.PaymentLedger
	token  *paycontract.DevUSDC
	bound  *bind.BoundContract // PaymentLedger
	usdc   *bind.BoundContract // DevUSDC
}

func newEnv(t *testing.T) *env {
	t.Helper()
	chain, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	ledger, token := paycontract.NewPaymentLedger(), paycontract.NewDevUSDC()
	return &env{
		t: t, ctx: ctx, chain: chain, ledger: ledger, token: token,
		bound: ledger.Instance(chain.Client(), chain.PaymentLedger),
		usdc:  token.Instance(chain.Client(), chain.DevUSDC),
	}
}

// withT returns a copy of e whose helpers fail t, for subtests.
func (e *env) withT(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// send sends calldata to the contract at to and returns the hash; the caller
// commits.
func (e *env) send(key *ecdsa.PrivateKey, to common.Address, value *big.Int, data []byte) (common.Hash, error) {
	return e.chain.SendTx(e.ctx, key, to, value, data)
}

// mine commits a block and returns the receipts of txs, each required to
// have succeeded.
func (e *env) mine(txs ...common.Hash) []*types.Receipt {
	e.t.Helper()
	if _, err := e.chain.Commit(); err != nil {
		e.t.Fatal(err)
	}
	var out []*types.Receipt
	for _, h := range txs {
		r, err := e.chain.WaitMined(e.ctx, h)
		if err != nil {
			e.t.Fatalf("tx %s: %v", h.Hex(), err)
		}
		out = append(out, r)
	}
	return out
}

func (e *env) mustSend(key *ecdsa.PrivateKey, to common.Address, value *big.Int, data []byte) common.Hash {
	e.t.Helper()
	h, err := e.send(key, to, value, data)
	if err != nil {
		e.t.Fatalf("send to %s: %v", to.Hex(), err)
	}
	return h
}

// callUint calls a PaymentLedger view returning one uint256 (every price
// getter does; UnpackPriceWei decodes exactly that).
func (e *env) callUint(data []byte) *big.Int {
	e.t.Helper()
	v, err := bind.Call(e.bound, &bind.CallOpts{Context: e.ctx}, data, e.ledger.UnpackPriceWei)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *env) isPaid(id common.Hash) bool {
	e.t.Helper()
	v, err := bind.Call(e.bound, &bind.CallOpts{Context: e.ctx}, e.ledger.PackPaid(id), e.ledger.UnpackPaid)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *env) usdcBalance(a common.Address) *big.Int {
	e.t.Helper()
	v, err := bind.Call(e.usdc, &bind.CallOpts{Context: e.ctx}, e.token.PackBalanceOf(a), e.token.UnpackBalanceOf)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *env) ethBalance(a common.Address) *big.Int {
	e.t.Helper()
	v, err := e.chain.Client().BalanceAt(e.ctx, a, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// blockTime is the timestamp of the block holding r.
func (e *env) blockTime(r *types.Receipt) uint64 {
	e.t.Helper()
	h, err := e.chain.Client().HeaderByHash(e.ctx, r.BlockHash)
	if err != nil {
		e.t.Fatal(err)
	}
	return h.Time
}

func (e *env) decoder() paycontract.Decoder {
	return paycontract.Decoder{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger}
}

// onlyProposalPaid decodes the single ProposalPaid log of r.
func (e *env) onlyProposalPaid(r *types.Receipt) payment.ProposalPaid {
	e.t.Helper()
	var found []payment.ProposalPaid
	for _, l := range r.Logs {
		p, err := e.decoder().ProposalPaid(*l)
		if errors.Is(err, paycontract.ErrWrongEvent) || errors.Is(err, paycontract.ErrWrongContract) {
			continue // e.g. DevUSDC's Transfer in a token payment
		}
		if err != nil {
			e.t.Fatalf("decode log %d: %v", l.Index, err)
		}
		found = append(found, p)
	}
	if len(found) != 1 {
		e.t.Fatalf("tx %s: %d ProposalPaid logs, want 1", r.TxHash.Hex(), len(found))
	}
	return found[0]
}

func proposalID(s string) common.Hash { return common.BytesToHash([]byte(s)) }

func TestPricesMatchPaymentPackage(t *testing.T) {
	e := newEnv(t)
	constants := map[payment.Class][2][]byte{
		payment.Standard: {e.ledger.PackSTANDARDPRICEWEI(), e.ledger.PackSTANDARDPRICEUSDC()},
		payment.Express:  {e.ledger.PackEXPRESSPRICEWEI(), e.ledger.PackEXPRESSPRICEUSDC()},
		payment.Priority: {e.ledger.PackPRIORITYPRICEWEI(), e.ledger.PackPRIORITYPRICEUSDC()},
	}
	for _, c := range payment.Classes {
		want := map[payment.Token]*big.Int{payment.ETH: c.Price(payment.ETH), payment.USDC: c.Price(payment.USDC)}
		if got := e.callUint(e.ledger.PackPriceWei(uint8(c))); got.Cmp(want[payment.ETH]) != 0 {
			t.Errorf("%s priceWei = %v, payment says %v", c, got, want[payment.ETH])
		}
		if got := e.callUint(e.ledger.PackPriceUsdc(uint8(c))); got.Cmp(want[payment.USDC]) != 0 {
			t.Errorf("%s priceUsdc = %v, payment says %v", c, got, want[payment.USDC])
		}
		if got := e.callUint(constants[c][0]); got.Cmp(want[payment.ETH]) != 0 {
			t.Errorf("%s _PRICE_WEI = %v, payment says %v", c, got, want[payment.ETH])
		}
		if got := e.callUint(constants[c][1]); got.Cmp(want[payment.USDC]) != 0 {
			t.Errorf("%s _PRICE_USDC = %v, payment says %v", c, got, want[payment.USDC])
		}
	}
}

func TestPayExactPriceInETH(t *testing.T) {
	e := newEnv(t)
	payer := devchain.DevAccounts[1]
	for _, c := range payment.Classes {
		t.Run(c.Name(), func(t *testing.T) {
			e := e.withT(t)
			id := proposalID("eth-" + c.Name())
			before := e.ethBalance(e.chain.PaymentLedger)
			h, err := e.chain.PayForProposal(e.ctx, payer.MustKey(), id, c)
			if err != nil {
				t.Fatal(err)
			}
			r := e.mine(h)[0]
			if got := new(big.Int).Sub(e.ethBalance(e.chain.PaymentLedger), before); got.Cmp(c.Price(payment.ETH)) != 0 {
				t.Errorf("contract received %v wei, want %v", got, c.Price(payment.ETH))
			}
			if !e.isPaid(id) {
				t.Error("paid(id) is false after the payment")
			}
			p := e.onlyProposalPaid(r)
			want := payment.ProposalPaid{
				ChainID: devchain.ChainID, Contract: e.chain.PaymentLedger, ProposalID: id,
				Payer: payer.Address, Amount: c.Price(payment.ETH), Class: c, Token: payment.ETH,
				Timestamp: e.blockTime(r), TxHash: h, BlockHash: r.BlockHash,
				BlockNumber: r.BlockNumber.Uint64(), LogIndex: r.Logs[0].Index,
			}
			assertPayment(t, p, want)
		})
	}
}

func TestPayExactPriceInUSDC(t *testing.T) {
	e := newEnv(t)
	payer := devchain.DevAccounts[2]
	key := payer.MustKey()
	for _, c := range payment.Classes {
		t.Run(c.Name(), func(t *testing.T) {
			e := e.withT(t)
			id := proposalID("usdc-" + c.Name())
			price := c.Price(payment.USDC)
			payerBefore, ledgerBefore := e.usdcBalance(payer.Address), e.usdcBalance(e.chain.PaymentLedger)
			ethBefore := e.ethBalance(e.chain.PaymentLedger)
			// The allowance must be mined before the payment's gas estimate.
			e.mine(e.mustSend(key, e.chain.DevUSDC, nil, e.token.PackApprove(e.chain.PaymentLedger, price)))
			h := e.mustSend(key, e.chain.PaymentLedger, nil, e.ledger.PackPayForProposalWithToken(id, uint8(c)))
			r := e.mine(h)[0]

			if got := new(big.Int).Sub(payerBefore, e.usdcBalance(payer.Address)); got.Cmp(price) != 0 {
				t.Errorf("payer paid %v USDC units, want %v", got, price)
			}
			if got := new(big.Int).Sub(e.usdcBalance(e.chain.PaymentLedger), ledgerBefore); got.Cmp(price) != 0 {
				t.Errorf("contract received %v USDC units, want %v", got, price)
			}
			if e.ethBalance(e.chain.PaymentLedger).Cmp(ethBefore) != 0 {
				t.Error("a token payment moved ETH")
			}
			p := e.onlyProposalPaid(r)
			assertPayment(t, p, payment.ProposalPaid{
				ChainID: devchain.ChainID, Contract: e.chain.PaymentLedger, ProposalID: id,
				Payer: payer.Address, Amount: price, Class: c, Token: payment.USDC,
				Timestamp: e.blockTime(r), TxHash: h, BlockHash: r.BlockHash,
				BlockNumber: r.BlockNumber.Uint64(), LogIndex: p.LogIndex,
			})
		})
	}
}

func TestPayWithoutAllowanceReverts(t *testing.T) {
	e := newEnv(t)
	_, err := e.send(devchain.DevAccounts[4].MustKey(), e.chain.PaymentLedger, nil,
		e.ledger.PackPayForProposalWithToken(proposalID("no-allowance"), uint8(payment.Standard)))
	if err == nil {
		t.Fatal("token payment without allowance was accepted")
	}
	if e.isPaid(proposalID("no-allowance")) {
		t.Error("proposal marked paid")
	}
}

func TestWrongAmountReverts(t *testing.T) {
	e := newEnv(t)
	key := devchain.DevAccounts[3].MustKey()
	one := big.NewInt(1)
	for _, c := range payment.Classes {
		price := c.Price(payment.ETH)
		for name, amount := range map[string]*big.Int{
			"one wei less": new(big.Int).Sub(price, one),
			"one wei more": new(big.Int).Add(price, one),
		} {
			id := proposalID("wrong-" + c.Name() + name)
			_, err := e.send(key, e.chain.PaymentLedger, amount, e.ledger.PackPayForProposal(id, uint8(c)))
			reason, ok := paycontract.RevertError(err)
			wa, isWA := reason.(*paycontract.PaymentLedgerWrongAmount)
			if !ok || !isWA {
				t.Fatalf("%s %s: error %v (reason %#v), want WrongAmount", c, name, err, reason)
			}
			if wa.Expected.Cmp(price) != 0 || wa.Sent.Cmp(amount) != 0 {
				t.Errorf("%s %s: WrongAmount(%v, %v), want (%v, %v)", c, name, wa.Expected, wa.Sent, price, amount)
			}
		}
	}

	// The same transaction forced past gas estimation is mined and reverts:
	// nothing is paid, no log, the value stays with the sender.
	id := proposalID("forced")
	before := e.ethBalance(e.chain.PaymentLedger)
	opts := e.chain.Transactor(e.ctx, key)
	opts.Value = new(big.Int).Sub(payment.Standard.Price(payment.ETH), one)
	opts.GasLimit = 200_000
	tx, err := bind.Transact(e.bound, opts, e.ledger.PackPayForProposal(id, uint8(payment.Standard)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.chain.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := e.chain.WaitMined(e.ctx, tx.Hash())
	if !errors.Is(err, devchain.ErrTxFailed) || r == nil || len(r.Logs) != 0 {
		t.Fatalf("forced wrong amount: receipt %+v, err %v; want a failed tx without logs", r, err)
	}
	if e.isPaid(id) || e.ethBalance(e.chain.PaymentLedger).Cmp(before) != 0 {
		t.Error("a reverted payment changed the contract's state")
	}
}

func TestSameProposalTwiceReverts(t *testing.T) {
	e := newEnv(t)
	id := proposalID("twice")
	h, err := e.chain.PayForProposal(e.ctx, devchain.DevAccounts[1].MustKey(), id, payment.Standard)
	if err != nil {
		t.Fatal(err)
	}
	e.mine(h)
	// Another payer, another class, another token: a proposal is paid once.
	key := devchain.DevAccounts[5].MustKey()
	_, err = e.chain.PayForProposal(e.ctx, key, id, payment.Express)
	if reason, _ := paycontract.RevertError(err); !isAlreadyPaid(reason, id) {
		t.Errorf("second ETH payment: %v (reason %#v), want AlreadyPaid", err, reason)
	}
	e.mine(e.mustSend(key, e.chain.DevUSDC, nil, e.token.PackApprove(e.chain.PaymentLedger, payment.Standard.Price(payment.USDC))))
	_, err = e.send(key, e.chain.PaymentLedger, nil, e.ledger.PackPayForProposalWithToken(id, uint8(payment.Standard)))
	if reason, _ := paycontract.RevertError(err); !isAlreadyPaid(reason, id) {
		t.Errorf("second payment in USDC: %v (reason %#v), want AlreadyPaid", err, reason)
	}
}

func isAlreadyPaid(reason any, id common.Hash) bool {
	ap, ok := reason.(*paycontract.PaymentLedgerAlreadyPaid)
	return ok && common.Hash(ap.ProposalId) == id
}

func TestProposalPaidPreferredValidator(t *testing.T) {
	e := newEnv(t)
	payer, validator := devchain.DevAccounts[6], devchain.DevAccounts[9].Address
	id := proposalID("preferring")
	h := e.mustSend(payer.MustKey(), e.chain.PaymentLedger, payment.Priority.Price(payment.ETH),
		e.ledger.PackPayForProposalPreferring(id, uint8(payment.Priority), validator))
	r := e.mine(h)[0]
	p := e.onlyProposalPaid(r)
	assertPayment(t, p, payment.ProposalPaid{
		ChainID: devchain.ChainID, Contract: e.chain.PaymentLedger, ProposalID: id,
		Payer: payer.Address, Amount: payment.Priority.Price(payment.ETH), Class: payment.Priority,
		Token: payment.ETH, PreferredValidator: validator, Timestamp: e.blockTime(r),
		TxHash: h, BlockHash: r.BlockHash, BlockNumber: r.BlockNumber.Uint64(), LogIndex: r.Logs[0].Index,
	})

	// The log decodes only as a ProposalPaid of this contract.
	log := *r.Logs[0]
	if _, err := paycontract.DecodeDebtPaid(devchain.ChainID, log); !errors.Is(err, paycontract.ErrWrongEvent) {
		t.Errorf("DecodeDebtPaid of a ProposalPaid log: %v, want ErrWrongEvent", err)
	}
	other := paycontract.Decoder{ChainID: devchain.ChainID, Contract: e.chain.DevUSDC}
	if _, err := other.ProposalPaid(log); !errors.Is(err, paycontract.ErrWrongContract) {
		t.Errorf("decoder of another contract: %v, want ErrWrongContract", err)
	}
	// The preference round-trips through the wire form the watcher publishes.
	back, err := payment.FromProto(p.Proto())
	if err != nil {
		t.Fatal(err)
	}
	assertPayment(t, back, p)
}

func TestPayDebtEmitsDebtPaid(t *testing.T) {
	e := newEnv(t)
	payer, wallet := devchain.DevAccounts[7], devchain.DevAccounts[8].Address
	amount := big.NewInt(123_456_789)
	h := e.mustSend(payer.MustKey(), e.chain.PaymentLedger, amount, e.ledger.PackPayDebt(wallet))
	r := e.mine(h)[0]
	if len(r.Logs) != 1 {
		t.Fatalf("%d logs, want 1", len(r.Logs))
	}
	d, err := e.decoder().DebtPaid(*r.Logs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := payment.DebtPaid{
		ChainID: devchain.ChainID, Contract: e.chain.PaymentLedger, Wallet: wallet, Payer: payer.Address,
		Amount: amount, Timestamp: e.blockTime(r), TxHash: h, BlockHash: r.BlockHash,
		BlockNumber: r.BlockNumber.Uint64(), LogIndex: r.Logs[0].Index,
	}
	if d.Amount.Cmp(want.Amount) != 0 {
		t.Errorf("amount %v, want %v", d.Amount, want.Amount)
	}
	d.Amount, want.Amount = nil, nil
	if d != want {
		t.Errorf("DebtPaid\n got  %+v\n want %+v", d, want)
	}
	if _, err := e.decoder().ProposalPaid(*r.Logs[0]); !errors.Is(err, paycontract.ErrWrongEvent) {
		t.Errorf("ProposalPaid decode of a DebtPaid log: %v, want ErrWrongEvent", err)
	}

	_, err = e.send(payer.MustKey(), e.chain.PaymentLedger, nil, e.ledger.PackPayDebt(wallet))
	if reason, _ := paycontract.RevertError(err); reason == nil {
		t.Errorf("payDebt without value: %v, want ZeroDebtPayment", err)
	} else if _, ok := reason.(*paycontract.PaymentLedgerZeroDebtPayment); !ok {
		t.Errorf("payDebt without value reverted with %#v, want ZeroDebtPayment", reason)
	}
}

func assertPayment(t *testing.T, got, want payment.ProposalPaid) {
	t.Helper()
	if got.Amount == nil || want.Amount == nil || got.Amount.Cmp(want.Amount) != 0 {
		t.Errorf("amount %v, want %v", got.Amount, want.Amount)
	}
	got.Amount, want.Amount = nil, nil
	if got != want {
		t.Errorf("ProposalPaid\n got  %+v\n want %+v", got, want)
	}
}
