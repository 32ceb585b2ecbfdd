package payment

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func wei(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return v
}

func TestDebtMicros(t *testing.T) {
	for _, tc := range []struct {
		wei  *big.Int
		want uint64
	}{
		{nil, 0},
		{big.NewInt(-1), 0},
		{big.NewInt(0), 0},
		{big.NewInt(307_692_307), 0},                          // just under one micro: not credited
		{big.NewInt(307_692_308), 1},                          // one micro
		{Standard.Price(ETH), 3_250_000},                      // 0.001 ETH = 3.25 units
		{Express.Price(ETH), 6_500_000},                       // every class at its USDC price
		{Priority.Price(ETH), 32_500_000},                     //
		{wei("1000000000000000000"), 3_250_000_000},           // 1 ETH = 3,250 units
		{wei("1000000000000001"), 3_250_000},                  // rounds down
		{wei("5675921253449092804"), 18_446_744_073},          // large but far from saturating
		{wei("5676000000000000000000000000"), math.MaxUint64}, // saturates
		{new(big.Int).Lsh(big.NewInt(1), 255), math.MaxUint64},
	} {
		if got := DebtMicros(tc.wei); got != tc.want {
			t.Errorf("DebtMicros(%v) = %d, want %d", tc.wei, got, tc.want)
		}
	}
}

// TestEveryClassHasOneETHUSDCRatio holds the price table to one ETH:USDC ratio,
// so that DebtMicros, which reads the Standard class, converts at the
// ratio of every class. A redeploy that breaks it needs a decision here.
func TestEveryClassHasOneETHUSDCRatio(t *testing.T) {
	for _, c := range Classes {
		// wei_c / usdc_c == wei_std / usdc_std, cross-multiplied.
		l := new(big.Int).Mul(c.Price(ETH), Standard.Price(USDC))
		r := new(big.Int).Mul(Standard.Price(ETH), c.Price(USDC))
		if l.Cmp(r) != 0 {
			t.Errorf("class %s: %s wei for %s USDC units is another ratio than Standard's", c, c.Price(ETH), c.Price(USDC))
		}
		if got := DebtMicros(c.Price(ETH)); got != c.Price(USDC).Uint64() {
			t.Errorf("class %s: its ETH price converts to %d micros, its USDC price is %s", c, got, c.Price(USDC))
		}
	}
}

func TestCheckDebt(t *testing.T) {
	contract := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	wallet := common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	valid := DebtPaid{ChainID: 1337, Contract: contract, Wallet: wallet, Payer: common.HexToAddress("0x09"),
		Amount: Standard.Price(ETH), TxHash: common.HexToHash("0xaa"), LogIndex: 2}
	want := DebtExpectation{ChainID: 1337, Contract: contract, Wallet: wallet}
	cases := []struct {
		name   string
		mutate func(d *DebtPaid)
		code   apierror.Code
	}{
		{"paid by the wallet's sponsor", func(*DebtPaid) {}, ""},
		{"paid by the wallet itself", func(d *DebtPaid) { d.Payer = wallet }, ""},
		{"one micro", func(d *DebtPaid) { d.Amount = big.NewInt(307_692_308) }, ""},
		{"another wallet's debt", func(d *DebtPaid) { d.Wallet = common.HexToAddress("0x01") }, apierror.PaymentTxMismatch},
		{"less than a micro", func(d *DebtPaid) { d.Amount = big.NewInt(1) }, apierror.PaymentInsufficient},
		{"nil amount", func(d *DebtPaid) { d.Amount = nil }, apierror.PaymentInsufficient},
		{"another contract", func(d *DebtPaid) { d.Contract = common.HexToAddress("0x01") }, apierror.PaymentNotFound},
		{"another chain", func(d *DebtPaid) { d.ChainID = 1 }, apierror.PaymentNotFound},
		{"removed by reorg", func(d *DebtPaid) { d.Removed = true }, apierror.PaymentOrphaned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := valid
			tc.mutate(&d)
			err := CheckDebt(d, want)
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.code != "" && (err == nil || err.Code != tc.code):
				t.Fatalf("want %s, got %v", tc.code, err)
			}
		})
	}
	op := valid.GcPay()
	if common.BytesToAddress(op.GetWallet()) != wallet || op.GetAmountMicros() != 3_250_000 ||
		common.BytesToHash(op.GetTxHash()) != valid.TxHash || op.GetLogIndex() != 2 {
		t.Fatalf("GcPay %v", op)
	}
}

func TestDebtProtoRoundTrip(t *testing.T) {
	d := DebtPaid{ChainID: 1337, Contract: common.HexToAddress("0x01"), Wallet: common.HexToAddress("0x02"),
		Payer: common.HexToAddress("0x03"), Amount: big.NewInt(12345), Timestamp: 99, TxHash: common.HexToHash("0x05"),
		BlockHash: common.HexToHash("0x06"), BlockNumber: 7, LogIndex: 8, Confirmations: 2}
	got, err := DebtPaidFromProto(d.Proto())
	if err != nil {
		t.Fatal(err)
	}
	if got.Amount.Cmp(d.Amount) != 0 {
		t.Fatalf("amount %v", got.Amount)
	}
	got.Amount = d.Amount
	if got != d {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, d)
	}
	for name, spoil := range map[string]func(m *ledgerpb.DebtPayment){
		"short tx hash":    func(m *ledgerpb.DebtPayment) { m.TxHash = m.TxHash[:5] },
		"short block hash": func(m *ledgerpb.DebtPayment) { m.BlockHash = m.BlockHash[:31] },
		"21-byte wallet":   func(m *ledgerpb.DebtPayment) { m.Wallet = append(m.Wallet, 0) },
		"missing payer":    func(m *ledgerpb.DebtPayment) { m.Payer = nil },
		"missing contract": func(m *ledgerpb.DebtPayment) { m.Contract = nil },
		"33-byte amount":   func(m *ledgerpb.DebtPayment) { m.Amount = make([]byte, 33) },
	} {
		m := d.Proto()
		spoil(m)
		if _, err := DebtPaidFromProto(m); !errors.Is(err, ErrMalformedPayment) {
			t.Errorf("%s: %v, want ErrMalformedPayment", name, err)
		}
	}
	if _, err := DebtPaidFromProto(nil); err == nil {
		t.Fatal("DebtPaidFromProto accepted nil")
	}
	if d.MsgID() != "1337:"+d.BlockHash.Hex()+":8" {
		t.Fatalf("MsgID %s", d.MsgID())
	}
	d.Removed = true
	if d.MsgID() != "1337:"+d.BlockHash.Hex()+":8:removed" {
		t.Fatalf("MsgID of a retraction %s", d.MsgID())
	}
	if DebtSubject(1337) != "chain.1337.debts" || Subject(1337) != "chain.1337.payments" {
		t.Fatalf("subjects %s, %s", DebtSubject(1337), Subject(1337))
	}
}
