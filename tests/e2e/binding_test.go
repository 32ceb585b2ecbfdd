package e2e

import (
	"context"
	"crypto/ecdsa"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// paymentObserved waits until the validator's payment index holds the
// payment of tx (its transaction is CONFIRMED there), so that a submission
// naming its proposal id is decided at intake.
func paymentObserved(t *testing.T, n *harness.Network, tx common.Hash) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() bool {
		var got api.Transaction
		return getJSON(t, n.ValidatorURL+"/v1/transactions/"+tx.Hex(), &got) == http.StatusOK && got.State == api.TxConfirmed
	})
}

// assertRefused submits p with tx and expects a 402 refusal with code, and
// no status for the proposal id afterwards: nothing was replicated, the id
// is not spent.
func assertRefused(t *testing.T, n *harness.Network, key *ecdsa.PrivateKey, p *ledgerclient.Proposal, tx common.Hash, code apierror.Code) {
	t.Helper()
	sub, _, err := submit(t, n, key, p, tx)
	if e := apierror.As(err); e == nil || e.Code != code || e.Status() != http.StatusPaymentRequired {
		t.Fatalf("submission answered %+v %v, want 402 %s", sub, err, code)
	}
	_, err = n.Client.Status(context.Background(), p.ID, 0)
	if e := apierror.As(err); e == nil || e.Code != apierror.NotFound {
		t.Fatalf("the refused submission left a status for %s: %v", p.ID.Hex(), err)
	}
}

// commitsAs submits p with tx and expects it COMMITTED on that payment,
// under key's wallet.
func commitsAs(t *testing.T, n *harness.Network, key *ecdsa.PrivateKey, p *ledgerclient.Proposal, tx common.Hash) {
	t.Helper()
	if sub, _, err := submit(t, n, key, p, tx); err != nil || sub.HTTPStatus != http.StatusAccepted {
		t.Fatalf("submit: %+v %v", sub, err)
	}
	s := final(t, n, p.ID)
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	if s.Status != api.StatusCommitted || !strings.EqualFold(s.Wallet, wallet.Hex()) || s.Payment == nil || s.Payment.TxHash != tx.Hex() {
		t.Fatalf("status %+v, want COMMITTED by %s on %s", s, wallet.Hex(), tx.Hex())
	}
}

// TestAttackPaymentTheft: a proposal id is public once paid on chain. An
// attacker signs its own proposal under the victim's paid id with the
// victim's transaction hash: refused 402 payment_payer_mismatch, nothing
// recorded under the id; the victim's own submission then commits on its
// payment, and the attacker's repeat is a conflict (ADR 0028).
func TestAttackPaymentTheft(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	victim, attacker := devKey(t, 7), devKey(t, 8)
	p := &ledgerclient.Proposal{ContentType: "page", Class: payment.Express, Message: []byte(`{"title":"mine"}`)}
	tx := pay(t, n, victim, p)
	paymentObserved(t, n, tx)

	stolen := &ledgerclient.Proposal{ID: p.ID, ContentType: "page", Class: p.Class, Message: []byte(`{"title":"stolen"}`)}
	assertRefused(t, n, attacker, stolen, tx, apierror.PaymentPayerMismatch)
	// However often it tries.
	assertRefused(t, n, attacker, stolen, tx, apierror.PaymentPayerMismatch)

	commitsAs(t, n, victim, p, tx)
	if _, _, err := submit(t, n, attacker, stolen, tx); apierror.CodeOf(err) != apierror.ProposalIDConflict {
		t.Fatalf("attacker after the commit: %v", err)
	}
}

// TestAttackPaymentBurning: a wrong transaction hash submitted first under
// a paid id (by an attacker, or by the payer's own mistake) is refused 402
// payment_tx_mismatch and burns nothing: the payer's correct submission
// commits afterwards.
func TestAttackPaymentBurning(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	victim, attacker := devKey(t, 7), devKey(t, 8)
	p := &ledgerclient.Proposal{ContentType: "page", Class: payment.Standard, Message: []byte(`{"title":"paid"}`)}
	tx := pay(t, n, victim, p)
	other := &ledgerclient.Proposal{ContentType: "page", Class: payment.Standard, Message: []byte(`{"title":"other"}`)}
	otherTx := pay(t, n, attacker, other)
	paymentObserved(t, n, tx)

	burner := &ledgerclient.Proposal{ID: p.ID, ContentType: "page", Class: p.Class, Message: []byte(`{"title":"burn"}`)}
	assertRefused(t, n, attacker, burner, otherTx, apierror.PaymentTxMismatch)
	assertRefused(t, n, victim, p, otherTx, apierror.PaymentTxMismatch)
	assertRefused(t, n, victim, &ledgerclient.Proposal{ID: p.ID, ContentType: "page", Class: payment.Priority, Message: p.Message}, tx,
		apierror.PaymentTierMismatch)

	commitsAs(t, n, victim, p, tx)
}
