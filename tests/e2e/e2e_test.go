// Package e2e runs the whole system in one process (chain, NATS,
// chain-watcher, validator, edge) and drives it as a client would.
package e2e

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

func devKey(t *testing.T, i int) *ecdsa.PrivateKey {
	key, err := devchain.DevAccounts[i].Key()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func getJSON(t *testing.T, u string, out any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode
}

// pay pays for p on chain at its class's price and returns the tx hash.
func pay(t *testing.T, n *harness.Network, key *ecdsa.PrivateKey, p *ledgerclient.Proposal) common.Hash {
	t.Helper()
	if p.ID == (common.Hash{}) {
		p.ID = ledgerclient.NewProposalID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	receipt, err := ledgerclient.Pay(ctx, n.Chain.Client(), key, n.Chain.ChainID, n.Chain.PaymentLedger, p.ID, p.Class)
	if err != nil {
		t.Fatal(err)
	}
	return receipt.TxHash
}

func submit(t *testing.T, n *harness.Network, key *ecdsa.PrivateKey, p *ledgerclient.Proposal, tx common.Hash) (ledgerclient.Submitted, string, error) {
	t.Helper()
	form, path, err := ledgerclient.Form(n.Config, key, p, tx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := n.Client.Submit(context.Background(), p.Action, form)
	return sub, path, err
}

func final(t *testing.T, n *harness.Network, id common.Hash) api.ProposalStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := n.Client.WaitFinal(ctx, id, nil)
	if err != nil {
		t.Fatalf("waiting for %s: %v", id.Hex(), err)
	}
	return s
}

// TestPaidWriteEndToEnd pays, signs, submits and reads the committed node
// back through /api/explore and the edge.
func TestPaidWriteEndToEnd(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	if n.Config.Mode != "TESTNET" || !n.Config.PaymentsVerified || n.Config.ContractAddress != n.Chain.PaymentLedger.Hex() ||
		n.Config.EIP712.ChainID != 1337 || n.Config.Prices["express"].Wei != "2000000000000000" || n.Config.Prices["priority"].USDC != "32.5" {
		t.Fatalf("blockchain config %+v", n.Config)
	}
	key := devKey(t, 1)
	p := &ledgerclient.Proposal{ContentType: "page", Class: payment.Express, Organization: "acme",
		Message: []byte(`{"jcr:primaryType":"cq:Page","title":"Hello","jcr:content":{"text":"Hi"}}`)}
	tx := pay(t, n, key, p)
	sub, path, err := submit(t, n, key, p, tx)
	// PENDING, or COMMITTED when the payment was observed before the
	// submission and the proposal was decided at intake.
	if err != nil || sub.HTTPStatus != http.StatusAccepted || (sub.Receipt.Status != api.StatusPending && sub.Receipt.Status != api.StatusCommitted) || sub.Receipt.Path != path {
		t.Fatalf("submit: %+v %v", sub, err)
	}
	s := final(t, n, p.ID)
	if s.Status != api.StatusCommitted || s.Tier != "express" || s.EthereumTxHash != tx.Hex() || s.Payment == nil ||
		s.Payment.TxHash != tx.Hex() || s.Payment.Amount != "2000000000000000" || s.Payment.Token != "ETH" {
		t.Fatalf("status %+v", s)
	}

	var node api.Node
	if code := getJSON(t, n.ValidatorURL+"/api/explore?path="+url.QueryEscape(path), &node); code != http.StatusOK {
		t.Fatalf("explore: %d", code)
	}
	if node.PrimaryType != "cq:Page" || string(node.Properties["title"]) != `"Hello"` || node.ProposalID != p.ID.Hex() ||
		node.Organization != "acme" || node.Revision != 1 || len(node.Children) != 1 {
		t.Fatalf("node %+v", node)
	}

	var env struct {
		Version string `json:"version"`
		Data    struct {
			Proposal    api.ProposalStatus `json:"proposal"`
			Transaction api.Payment        `json:"transaction"`
		} `json:"data"`
	}
	if code := getJSON(t, n.EdgeURL+"/ops/v1/explorer/proposal/"+p.ID.Hex(), &env); code != http.StatusOK {
		t.Fatalf("edge: %d", code)
	}
	if env.Version != "v1" || env.Data.Proposal.Status != api.StatusCommitted || env.Data.Proposal.Path != path || env.Data.Transaction.TxHash != tx.Hex() {
		t.Fatalf("edge envelope %+v", env)
	}
	var health struct {
		Data struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	if getJSON(t, n.EdgeURL+"/ops/v1/health", &health); health.Data.Status != "healthy" {
		t.Fatalf("edge health %+v", health)
	}
	// Deep health asks NATS and the chain-watcher too, in this mode. The
	// watcher's status may not have reached the validator yet: polled.
	var deep api.DeepHealth
	harness.Eventually(t, 30*time.Second, func() bool {
		getJSON(t, n.ValidatorURL+"/health/deep", &deep)
		return deep.Status == "ok"
	})
	for _, name := range []string{"wal", "state", "raft", "peers", "nats", "chain"} {
		if deep.Checks[name].Status != "ok" {
			t.Fatalf("deep health check %s: %+v", name, deep.Checks)
		}
	}
	var missing map[string]any
	if code := getJSON(t, n.EdgeURL+"/ops/v1/explorer/proposal/"+ledgerclient.NewProposalID().Hex(), &missing); code != http.StatusNotFound {
		t.Fatalf("edge, unknown proposal: %d %v", code, missing)
	}

	// ?wait= answers once the proposal is decided: one request.
	waited := &ledgerclient.Proposal{ContentType: "page", Message: []byte(`{"title":"in one request"}`)}
	waitedTx := pay(t, n, key, waited)
	form, _, err := ledgerclient.Form(n.Config, key, waited, waitedTx)
	if err != nil {
		t.Fatal(err)
	}
	one, err := n.Client.SubmitAndWait(context.Background(), proposal.Write, form, 30*time.Second)
	if err != nil || one.HTTPStatus != http.StatusAccepted || one.Receipt.Status != api.StatusCommitted {
		t.Fatalf("submit and wait: %+v %v", one, err)
	}

	// An identical resubmission answers 200 with the current status; the
	// same id with another payload is a conflict.
	sub, _, err = submit(t, n, key, p, tx)
	if err != nil || sub.HTTPStatus != http.StatusOK || sub.Existing.Status != api.StatusCommitted {
		t.Fatalf("identical resubmission: %+v %v", sub, err)
	}
	changed := *p
	changed.Message = []byte(`{"title":"Other"}`)
	_, _, err = submit(t, n, key, &changed, tx)
	if e := apierror.As(err); e == nil || e.Code != apierror.ProposalIDConflict || e.Status() != http.StatusConflict {
		t.Fatalf("conflicting resubmission: %v", err)
	}
}

// TestPaymentRejections: each payment fault is refused with its code, and
// nothing of the proposal is kept (no status, no content).
func TestPaymentRejections(t *testing.T) {
	n := harness.Start(t, harness.Options{PaymentWait: 3 * time.Second})
	key := devKey(t, 2)

	// Nothing unpaid is replicated (ADR 0030): held for PAYMENT_WAIT, then
	// refused, retryable.
	t.Run("unpaid", func(t *testing.T) {
		p := &ledgerclient.Proposal{Message: []byte("never paid")}
		p.ID = ledgerclient.NewProposalID()
		assertRefused(t, n, key, p, common.HexToHash("0xabcdef"), apierror.PaymentNotFound)
	})
	// A payment observed that does not match is refused at intake and
	// spends nothing (ADR 0028; binding_test.go has the attacks).
	t.Run("paid for another class", func(t *testing.T) {
		p := &ledgerclient.Proposal{Message: []byte("cheap"), Class: payment.Standard}
		tx := pay(t, n, key, p)
		paymentObserved(t, n, tx)
		p.Class = payment.Priority
		assertRefused(t, n, key, p, tx, apierror.PaymentTierMismatch)
	})
	t.Run("another transaction's hash", func(t *testing.T) {
		p := &ledgerclient.Proposal{Message: []byte("wrong tx")}
		tx := pay(t, n, key, p)
		paymentObserved(t, n, tx)
		other := &ledgerclient.Proposal{Message: []byte("x")}
		otherTx := pay(t, n, key, other)
		assertRefused(t, n, key, p, otherTx, apierror.PaymentTxMismatch)
	})
	t.Run("wrong amount reverts, so nothing pays", func(t *testing.T) {
		p := &ledgerclient.Proposal{Message: []byte("underpaid"), ID: ledgerclient.NewProposalID()}
		opts := bind.NewKeyedTransactor(key, new(big.Int).SetUint64(n.Chain.ChainID))
		opts.Value = new(big.Int).Sub(payment.Standard.Price(payment.ETH), big.NewInt(1))
		opts.GasLimit = 200_000 // skip estimation, which would refuse the reverting call
		ledger := paycontract.NewPaymentLedger()
		tx, err := bind.Transact(ledger.Instance(n.Chain.Client(), n.Chain.PaymentLedger), opts, ledger.PackPayForProposal(p.ID, uint8(p.Class)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Chain.WaitMined(context.Background(), tx.Hash()); err == nil {
			t.Fatal("an underpayment did not revert")
		}
		assertRefused(t, n, key, p, tx.Hash(), apierror.PaymentNotFound)
	})
}

// TestIntakeRejections: refused at intake, each with the error body of ADR
// 0006, and no proposal is recorded. (The applied index may move meanwhile: the leader
// appends finality and GC debt entries of its own.)
func TestIntakeRejections(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	key, other := devKey(t, 3), devKey(t, 4)
	before := stateOf(t, n)

	valid := func() url.Values {
		p := &ledgerclient.Proposal{Message: []byte(`{"title":"x"}`), ContentType: "page", ID: common.HexToHash("0x77")}
		form, _, err := ledgerclient.Form(n.Config, key, p, common.HexToHash("0x88"))
		if err != nil {
			t.Fatal(err)
		}
		return form
	}
	forged := func() url.Values {
		p := &ledgerclient.Proposal{Message: []byte(`{"title":"x"}`), ContentType: "page", ID: common.HexToHash("0x77")}
		form, _, _ := ledgerclient.Form(n.Config, other, p, common.HexToHash("0x88"))
		form.Set(proposal.FieldWalletAddress, crypto.PubkeyToAddress(key.PublicKey).Hex())
		return form
	}
	cases := []struct {
		name  string
		form  url.Values
		code  apierror.Code
		field string
	}{
		{"signature by another wallet", forged(), apierror.InvalidSignature, ""},
		{"message changed after signing", with(valid(), proposal.FieldMessage, `{"title":"y"}`), apierror.InvalidSignature, ""},
		{"path changed after signing", with(valid(), proposal.FieldPath, "page/other"), apierror.InvalidSignature, ""},
		{"tier changed after signing", with(valid(), proposal.FieldPaymentTier, "priority"), apierror.InvalidSignature, ""},
		{"malformed proposalId", with(valid(), proposal.FieldProposalID, "0x77"), apierror.InvalidField, proposal.FieldProposalID},
		{"malformed walletAddress", with(valid(), proposal.FieldWalletAddress, "0xnope"), apierror.InvalidField, proposal.FieldWalletAddress},
		{"malformed message", with(valid(), proposal.FieldMessage, `{"a":`), apierror.InvalidField, proposal.FieldMessage},
		{"malformed ethereumTxHash", with(valid(), proposal.FieldEthereumTxHash, "0x12"), apierror.InvalidField, proposal.FieldEthereumTxHash},
		{"missing ethereumTxHash", with(valid(), proposal.FieldEthereumTxHash, ""), apierror.InvalidField, proposal.FieldEthereumTxHash},
		{"malformed signature", with(valid(), proposal.FieldSignature, "0x1234"), apierror.InvalidField, proposal.FieldSignature},
		{"malformed organization", with(valid(), proposal.FieldOrganization, "Not Valid"), apierror.InvalidField, proposal.FieldOrganization},
		{"malformed contentType", with(valid(), proposal.FieldContentType, "a/b"), apierror.InvalidField, proposal.FieldContentType},
		{"malformed paymentTier", with(valid(), proposal.FieldPaymentTier, "gold"), apierror.InvalidField, proposal.FieldPaymentTier},
		{"malformed path", with(valid(), proposal.FieldPath, "../../etc"), apierror.InvalidField, proposal.FieldPath},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.Client.Submit(context.Background(), proposal.Write, tc.form)
			e := apierror.As(err)
			if e == nil || e.Code != tc.code || e.Retryable {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			if tc.field != "" && e.Details["field"] != tc.field {
				t.Fatalf("error names %v, want %s", e.Details["field"], tc.field)
			}
		})
	}
	if after := stateOf(t, n); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused proposals were recorded: %+v -> %+v", before, after)
	}
	var s map[string]any
	if code := getJSON(t, n.ValidatorURL+api.StatusLink(common.HexToHash("0x77").Hex()), &s); code != http.StatusNotFound {
		t.Fatalf("a refused proposal has a status: %d %v", code, s)
	}
}

func with(form url.Values, field, value string) url.Values {
	if value == "" {
		form.Del(field)
	} else {
		form.Set(field, value)
	}
	return form
}

func stateOf(t *testing.T, n *harness.Network) api.ProposalCounts {
	var c api.ProposalCounts
	if code := getJSON(t, n.ValidatorURL+"/v1/proposals/counts", &c); code != http.StatusOK {
		t.Fatalf("proposal counts: %d", code)
	}
	c.AppliedIndex = 0
	return c
}
