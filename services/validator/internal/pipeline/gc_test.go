package pipeline

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
)

// TestDebtsToPay is the rule of POST /v1/gc/account/{wallet}/pay?txHash= in
// TESTNET and MAINNET: which observed logs of a transaction pay the wallet,
// and the error when none does.
func TestDebtsToPay(t *testing.T) {
	wallet, other := common.HexToAddress("0xa1"), common.HexToAddress("0xb0")
	tx := common.HexToHash("0xaa")
	want := payment.DebtExpectation{ChainID: 1337, Contract: contract, Wallet: wallet}
	log := func(w common.Address, index uint, wei int64) payment.DebtPaid {
		return payment.DebtPaid{ChainID: 1337, Contract: contract, Wallet: w, Amount: big.NewInt(wei), TxHash: tx, LogIndex: index}
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

// debtsByTx is a payment index's DebtPaid logs by transaction.
type debtsByTx map[common.Hash][]payment.DebtPaid

func (d debtsByTx) DebtsByTx(tx common.Hash) []payment.DebtPaid { return d[tx] }

// TestGCChanges runs each GC account change on a real state machine: each
// reaches raft through the sender (counted as a change) and returns once
// it is applied, so the account read right after holds it.
func TestGCChanges(t *testing.T) {
	p, l := startOnMachine(t, payments.NewIndex(), quietLoops)
	waitStats(t, p, "the term announced", func(s Stats) bool { return l.LeaderTerm() == 1 && s.ChangesInFlight == 0 })
	wallet := common.HexToAddress("0xa1")
	tx := common.HexToHash("0xaa")
	gc := NewGC(p, debtsByTx{tx: {debtPaid(wallet, tx, 3, payment.Standard.Price(payment.ETH))}}) // 3.25
	ctx := context.Background()
	account := func(what string) api.GcAccount {
		t.Helper()
		acc, err := gc.Account(wallet)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return acc
	}
	changes := func() uint64 { return p.Stats().Changes }

	// A delete, as a previous leader committed it, accrues 0.10 of pending debt.
	del := &ledgerpb.Proposal{Id: common.HexToHash("0x71").Bytes(), Action: ledgerpb.Action_ACTION_DELETE, Wallet: wallet[:],
		Organization: proposal.DefaultOrganization, Path: proposal.ContentPath(proposal.DefaultContentRoot, wallet, proposal.DefaultOrganization, "gone")}
	data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{Items: []*ledgerpb.BatchItem{{Proposal: del}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Propose(ctx, data); err != nil {
		t.Fatal(err)
	}
	if acc := account("after a delete"); acc.PendingDebt != "0.10" || acc.ExecutedDebt != "0.00" || acc.Limit != "100.00" || acc.WritesBlocked {
		t.Fatalf("after a delete: %+v", acc)
	}

	for _, step := range []struct {
		name   string
		change func() error
		want   func(api.GcAccount) bool
	}{
		{"ExecutePending", func() error { return gc.ExecutePending(ctx, wallet) },
			func(a api.GcAccount) bool { return a.PendingDebt == "0.00" && a.ExecutedDebt == "0.10" }},
		{"SetLimit", func() error { return gc.SetLimit(ctx, wallet, 100_000) },
			func(a api.GcAccount) bool { return a.Limit == "0.10" && a.WritesBlocked }},
		{"Pay", func() error { return gc.Pay(ctx, wallet, 40_000) },
			func(a api.GcAccount) bool { return a.ExecutedDebt == "0.06" && a.Paid == "0.04" && !a.WritesBlocked }},
		{"PayTx", func() error { return gc.PayTx(ctx, wallet, tx) },
			func(a api.GcAccount) bool { return a.ExecutedDebt == "0.00" && a.Paid == "3.29" }},
	} {
		before := changes()
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if acc := account(step.name); !step.want(acc) {
			t.Fatalf("%s returned before its change was applied: %+v", step.name, acc)
		}
		if n := changes() - before; n != 1 {
			t.Fatalf("%s: %d changes through the sender, want 1", step.name, n)
		}
	}

	// Paying with a spent transaction changes nothing and proposes nothing.
	before := changes()
	if err := gc.PayTx(ctx, wallet, tx); err != nil {
		t.Fatalf("PayTx again: %v", err)
	}
	if acc := account("PayTx again"); acc.Paid != "3.29" || changes() != before {
		t.Fatalf("PayTx again: %+v, %d changes", acc, changes()-before)
	}
	// The payment index drops a spent and final log (ADR 0031): a spent
	// transaction it no longer holds is answered the same.
	if err := NewGC(p, debtsByTx{}).PayTx(ctx, wallet, tx); err != nil || changes() != before {
		t.Fatalf("PayTx of a spent transaction the index dropped: %v, %d changes", err, changes()-before)
	}
	if err := gc.PayTx(ctx, wallet, common.HexToHash("0xbb")); apierror.CodeOf(err) != apierror.PaymentNotFound {
		t.Fatalf("PayTx of a transaction not observed: %v", err)
	}
	if err := NewGC(p, nil).PayTx(ctx, wallet, tx); apierror.CodeOf(err) != apierror.PaymentNotFound {
		t.Fatalf("PayTx without a chain (MOCK mode): %v", err)
	}
}

// TestGCChangeTimesOut: a change raft never applies answers timeout once
// the route's context ends, and is given up.
func TestGCChangeTimesOut(t *testing.T) {
	p, l := startWith(t, paymentsByID{}, nil, nil, func(c *Config) { c.VerifyPayments = false; quietLoops(c) })
	l.refuse.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := NewGC(p, nil).SetLimit(ctx, common.HexToAddress("0xa6"), 1); apierror.CodeOf(err) != apierror.Timeout {
		t.Fatalf("a change raft refused until the request ended: %v", err)
	}
	waitStats(t, p, "the change given up", func(s Stats) bool { return s.ChangesInFlight == 0 && s.QueuedChanges == 0 })
}
