package e2e

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// postJSON posts an empty body to u and decodes the answer into out.
func postJSON(t *testing.T, u, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+harness.OperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	return resp.StatusCode
}

// commit pays for p, submits it and waits until it is COMMITTED.
func commit(t *testing.T, n *harness.Network, key *ecdsa.PrivateKey, p *ledgerclient.Proposal) {
	t.Helper()
	tx := pay(t, n, key, p)
	if sub, _, err := submit(t, n, key, p, tx); err != nil || sub.HTTPStatus != http.StatusAccepted {
		t.Fatalf("submit %s: %+v %v", p.Action, sub, err)
	}
	if s := final(t, n, p.ID); s.Status != api.StatusCommitted {
		t.Fatalf("%s: %s (%s)", p.Action, s.Status, s.Reason)
	}
}

// payDebt calls the contract's payDebt(wallet) with wei from key and waits
// until it is mined.
func payDebt(t *testing.T, n *harness.Network, key *ecdsa.PrivateKey, wallet common.Address, wei *big.Int) common.Hash {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := n.Chain.PayDebt(ctx, key, wallet, wei)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Chain.WaitMined(ctx, tx); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestGcDebtPaidOnChain is GC debt (ADR 0011) in TESTNET mode, end to end: a
// wallet's delete puts it in debt above its limit and its write is refused
// with 402 write_blocked_gc_debt; it calls payDebt on the contract; the
// chain-watcher publishes the DebtPaid log, the leader pays the debt
// through raft, and the same write is accepted. Paying with the same
// transaction again through the route changes nothing.
func TestGcDebtPaidOnChain(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	key := devKey(t, 5)
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	accountURL := n.ValidatorURL + "/v1/gc/account/" + strings.ToLower(wallet.Hex())
	account := func() api.GcAccount {
		t.Helper()
		var acc api.GcAccount
		if code := getJSON(t, accountURL, &acc); code != http.StatusOK {
			t.Fatalf("account: %d", code)
		}
		return acc
	}

	// Write a page, delete it: at least 1 MB at 0.10 of pending debt.
	commit(t, n, key, &ledgerclient.Proposal{ContentType: "page", Path: "page/to-delete", Message: []byte(`{"title":"short-lived"}`)})
	commit(t, n, key, &ledgerclient.Proposal{Action: proposal.Delete, ContentType: "page", Path: "page/to-delete"})
	if acc := account(); acc.PendingDebt != "0.10" || acc.Deletes != 1 {
		t.Fatalf("after the delete: %+v", acc)
	}
	var acc api.GcAccount
	if code := postJSON(t, accountURL+"/set-limit", `{"limit":"0.10"}`, &acc); code != http.StatusOK || acc.Limit != "0.10" {
		t.Fatalf("set-limit: %d %+v", code, acc)
	}
	if code := postJSON(t, accountURL+"/execute-pending", "", &acc); code != http.StatusOK || acc.ExecutedDebt != "0.10" || !acc.WritesBlocked {
		t.Fatalf("execute-pending: %d %+v", code, acc)
	}

	// The next write is refused at intake, paid or not.
	blocked := &ledgerclient.Proposal{ContentType: "page", Message: []byte(`{"title":"after paying the debt"}`)}
	blockedTx := pay(t, n, key, blocked)
	_, _, err := submit(t, n, key, blocked, blockedTx)
	if e := apierror.As(err); e == nil || e.Code != apierror.WriteBlockedGCDebt || e.Status() != http.StatusPaymentRequired ||
		e.Details["executedDebt"] != "0.10" || e.Details["payRoute"] != "/v1/gc/account/"+strings.ToLower(wallet.Hex())+"/pay" {
		t.Fatalf("a write of a wallet in debt: %v", err)
	}

	// The route in TESTNET: a transaction hash, not an amount.
	for _, tc := range []struct {
		body string
		code apierror.Code
	}{
		{`{"amount":"1.00"}`, apierror.InvalidField},
		{`{"txHash":"0x1234"}`, apierror.InvalidField},
		{`{"txHash":"` + common.HexToHash("0xdead").Hex() + `"}`, apierror.PaymentNotFound},
	} {
		var e apierror.Body
		if code := postJSON(t, accountURL+"/pay", tc.body, &e); e.Error == nil || e.Error.Code != tc.code || code != tc.code.Status() {
			t.Errorf("pay %s: %d %+v, want %s", tc.body, code, e.Error, tc.code)
		}
	}

	// Pay 0.001 ETH: 3.25 units at the contract's ratio. Nobody calls the
	// route: the leader pays once the watcher has published the log.
	debtTx := payDebt(t, n, key, wallet, payment.Standard.Price(payment.ETH))
	harness.Eventually(t, 30*time.Second, func() bool { return !account().WritesBlocked })
	paid := account()
	if paid.ExecutedDebt != "0.00" || paid.PendingDebt != "0.00" || paid.PaidMicros != 3_250_000 || paid.Paid != "3.25" || paid.Limit != "0.10" {
		t.Fatalf("after paying on chain: %+v", paid)
	}

	// The same proposal, resubmitted, is accepted now and commits.
	sub, _, err := submit(t, n, key, blocked, blockedTx)
	if err != nil || sub.HTTPStatus != http.StatusAccepted {
		t.Fatalf("the write after paying: %+v %v", sub, err)
	}
	if s := final(t, n, blocked.ID); s.Status != api.StatusCommitted {
		t.Fatalf("the write after paying: %s (%s)", s.Status, s.Reason)
	}

	// Paying with the same transaction again, twice, answers the account and
	// changes nothing.
	for range 2 {
		var again api.GcAccount
		if code := postJSON(t, accountURL+"/pay", `{"txHash":"`+debtTx.Hex()+`"}`, &again); code != http.StatusOK || again != paid {
			t.Fatalf("paying again with %s: %d\n got  %+v\n want %+v", debtTx.Hex(), code, again, paid)
		}
	}

	// A transaction that paid another wallet's debt pays nothing here.
	other := devKey(t, 6)
	otherWallet := crypto.PubkeyToAddress(other.PublicKey)
	otherTx := payDebt(t, n, other, otherWallet, payment.Standard.Price(payment.ETH))
	var e apierror.Body
	harness.Eventually(t, 30*time.Second, func() bool {
		e = apierror.Body{}
		postJSON(t, accountURL+"/pay", `{"txHash":"`+otherTx.Hex()+`"}`, &e)
		return e.Error == nil || e.Error.Code != apierror.PaymentNotFound
	})
	if e.Error == nil || e.Error.Code != apierror.PaymentTxMismatch {
		t.Fatalf("paying with another wallet's transaction: %+v", e.Error)
	}
	if acc := account(); acc != paid {
		t.Fatalf("a refused payment changed the account: %+v", acc)
	}
	// The other wallet, without debt, has its payment recorded all the same;
	// and the client pays on chain and through the route as ledgerctl does.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	operator := &ledgerclient.Client{BaseURL: n.ValidatorURL, Token: harness.OperatorToken} // the pay route is the operator's
	otherAcc, err := operator.PayDebt(ctx, otherWallet, otherTx, 0)
	if err != nil || otherAcc.PaidMicros != 3_250_000 || otherAcc.ExecutedDebt != "0.00" {
		t.Fatalf("the other wallet paying: %+v %v", otherAcc, err)
	}
	receipt, err := ledgerclient.PayDebt(ctx, n.Chain.Client(), other, n.Chain.ChainID, n.Chain.PaymentLedger, otherWallet, big.NewInt(2_000_000_000_000_000))
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func() bool {
		otherAcc, err = operator.PayDebt(ctx, otherWallet, receipt.TxHash, 0)
		return apierror.CodeOf(err) != apierror.PaymentNotFound
	})
	if err != nil || otherAcc.PaidMicros != 3_250_000+6_500_000 {
		t.Fatalf("the other wallet paying 0.002 ETH more: %+v %v", otherAcc, err)
	}
}
