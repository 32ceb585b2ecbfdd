package payment

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
)

func TestCheck(t *testing.T) {
	contract := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	id := common.HexToHash("0x01")
	tx := common.HexToHash("0xaa")
	wallet := common.HexToAddress("0x0a")
	valid := ProposalPaid{ChainID: 1337, Contract: contract, ProposalID: id, TxHash: tx, Class: Express, Token: ETH, Amount: Express.Price(ETH), Payer: wallet}
	want := Expectation{ChainID: 1337, Contract: contract, ProposalID: id, TxHash: tx, Class: Express, Wallet: wallet}

	cases := []struct {
		name   string
		mutate func(p *ProposalPaid)
		code   apierror.Code // "" means valid
	}{
		{"exact price", func(*ProposalPaid) {}, ""},
		{"more than the price", func(p *ProposalPaid) { p.Amount = new(big.Int).Add(p.Amount, big.NewInt(1)) }, ""},
		{"stablecoin at its price", func(p *ProposalPaid) { p.Token, p.Amount = USDC, Express.Price(USDC) }, ""},
		{"one wei short", func(p *ProposalPaid) { p.Amount = new(big.Int).Sub(p.Amount, big.NewInt(1)) }, apierror.PaymentInsufficient},
		{"stablecoin at the wei price is short", func(p *ProposalPaid) { p.Token, p.Amount = USDC, big.NewInt(6_499_999) }, apierror.PaymentInsufficient},
		{"nil amount", func(p *ProposalPaid) { p.Amount = nil }, apierror.PaymentInsufficient},
		{"other class", func(p *ProposalPaid) { p.Class = Standard }, apierror.PaymentTierMismatch},
		{"paid by another wallet", func(p *ProposalPaid) { p.Payer = common.HexToAddress("0x0b") }, apierror.PaymentPayerMismatch},
		{"other transaction", func(p *ProposalPaid) { p.TxHash = common.HexToHash("0xbb") }, apierror.PaymentTxMismatch},
		{"other contract", func(p *ProposalPaid) { p.Contract = common.HexToAddress("0x01") }, apierror.PaymentNotFound},
		{"other chain", func(p *ProposalPaid) { p.ChainID = 1 }, apierror.PaymentNotFound},
		{"other proposal", func(p *ProposalPaid) { p.ProposalID = common.HexToHash("0x02") }, apierror.PaymentNotFound},
		{"removed by reorg", func(p *ProposalPaid) { p.Removed = true }, apierror.PaymentOrphaned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := valid
			p.Amount = new(big.Int).Set(valid.Amount)
			tc.mutate(&p)
			err := Check(p, want)
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.code != "" && (err == nil || err.Code != tc.code):
				t.Fatalf("want %s, got %v", tc.code, err)
			}
		})
	}
}

func TestPricesAndNames(t *testing.T) {
	want := map[Class][2]string{Standard: {"0.001", "3.25"}, Express: {"0.002", "6.5"}, Priority: {"0.01", "32.5"}}
	for c, w := range want {
		if got := FormatAmount(c.Price(ETH), ETH); got != w[0] {
			t.Errorf("%s ETH price %s, want %s", c, got, w[0])
		}
		if got := FormatAmount(c.Price(USDC), USDC); got != w[1] {
			t.Errorf("%s USDC price %s, want %s", c, got, w[1])
		}
		for _, name := range []string{c.Name(), c.String()} {
			if p, err := ParseClass(name); err != nil || p != c {
				t.Errorf("ParseClass(%q) = %v, %v", name, p, err)
			}
		}
	}
	if _, err := ParseClass("gold"); err == nil {
		t.Error("ParseClass accepted an unknown class")
	}
	if Class(3).Price(ETH) != nil || Standard.Price(Token(2)) != nil {
		t.Error("Price of an unknown class or token is not nil")
	}
}

func TestProtoRoundTrip(t *testing.T) {
	p := ProposalPaid{ChainID: 1337, Contract: common.HexToAddress("0x01"), ProposalID: common.HexToHash("0x02"),
		Payer: common.HexToAddress("0x03"), Amount: big.NewInt(12345), Class: Priority, Token: USDC,
		PreferredValidator: common.HexToAddress("0x04"), Timestamp: 99, TxHash: common.HexToHash("0x05"),
		BlockHash: common.HexToHash("0x06"), BlockNumber: 7, LogIndex: 8, Confirmations: 2}
	got, err := FromProto(p.Proto())
	if err != nil {
		t.Fatal(err)
	}
	if got.Amount.Cmp(p.Amount) != 0 {
		t.Fatalf("amount %v", got.Amount)
	}
	got.Amount = p.Amount
	if got != p {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, p)
	}
	bad := p.Proto()
	bad.TxHash = bad.TxHash[:5]
	if _, err := FromProto(bad); err == nil {
		t.Fatal("FromProto accepted a short tx hash")
	}
	if p.MsgID() != "1337:"+p.BlockHash.Hex()+":8" {
		t.Fatalf("MsgID %s", p.MsgID())
	}
}
