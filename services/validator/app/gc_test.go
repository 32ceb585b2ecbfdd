package app

import (
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
)

// TestDebtsToPay is the rule of POST /v1/gc/account/{wallet}/pay?txHash= in
// TESTNET and MAINNET: which observed logs of a transaction pay the wallet,
// and the error when none does.
func TestDebtsToPay(t *testing.T) {
	wallet, other := common.HexToAddress("0xa1"), common.HexToAddress("0xb0")
	tx := common.HexToHash("0xaa")
	want := payment.DebtExpectation{ChainID: 1337, Contract: testContract, Wallet: wallet}
	log := func(w common.Address, index uint, wei int64) payment.DebtPaid {
		return payment.DebtPaid{ChainID: 1337, Contract: testContract, Wallet: w, Amount: big.NewInt(wei), TxHash: tx, LogIndex: index}
	}
	const ether = 1_000_000_000_000_000 // 0.001 ETH
	spentLogs := map[uint32]bool{}
	spent := func(_ [32]byte, index uint32) (bool, error) { return spentLogs[index], nil }
	logIndexes := func(ds []payment.DebtPaid) []uint {
		var out []uint
		for _, d := range ds {
			out = append(out, d.LogIndex)
		}
		return out
	}

	for _, tc := range []struct {
		name  string
		logs  []payment.DebtPaid
		spent []uint32
		due   []uint
		code  apierror.Code
	}{
		{name: "not observed", code: apierror.PaymentNotFound},
		{name: "one log", logs: []payment.DebtPaid{log(wallet, 0, ether)}, due: []uint{0}},
		{name: "spent", logs: []payment.DebtPaid{log(wallet, 0, ether)}, spent: []uint32{0}},
		{name: "another wallet's", logs: []payment.DebtPaid{log(other, 0, ether)}, code: apierror.PaymentTxMismatch},
		{name: "two logs, one for this wallet", logs: []payment.DebtPaid{log(other, 0, ether), log(wallet, 1, ether)}, due: []uint{1}},
		{name: "two logs for this wallet, one spent", logs: []payment.DebtPaid{log(wallet, 2, ether), log(wallet, 5, ether)}, spent: []uint32{2}, due: []uint{5}},
		{name: "this wallet's is worth nothing", logs: []payment.DebtPaid{log(other, 0, ether), log(wallet, 1, 1)}, code: apierror.PaymentInsufficient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(spentLogs)
			for _, i := range tc.spent {
				spentLogs[i] = true
			}
			due, err := debtsToPay(tx, tc.logs, want, spent)
			if tc.code != "" {
				if e := apierror.As(err); e == nil || e.Code != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil || len(due) != len(tc.due) {
				t.Fatalf("due %v (%v), want logs %v", logIndexes(due), err, tc.due)
			}
			for i := range due {
				if due[i].LogIndex != tc.due[i] {
					t.Fatalf("due logs %v, want %v", logIndexes(due), tc.due)
				}
			}
		})
	}

	failing := errors.New("pebble closed")
	_, err := debtsToPay(tx, []payment.DebtPaid{log(wallet, 0, ether)}, want, func([32]byte, uint32) (bool, error) { return false, failing })
	if !errors.Is(err, failing) {
		t.Fatalf("a failing state read: %v", err)
	}
}
