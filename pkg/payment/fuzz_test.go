package payment

import (
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// FuzzDebtPaidFromProto feeds arbitrary bytes, as a validator reads them
// from chain.<chainId>.debts, through the wire decoding. It must never
// panic; what it accepts must survive Proto and back unchanged, and convert
// to micros without panicking.
func FuzzDebtPaidFromProto(f *testing.F) {
	valid := DebtPaid{ChainID: 1337, Contract: common.HexToAddress("0x01"), Wallet: common.HexToAddress("0x02"),
		Payer: common.HexToAddress("0x03"), Amount: Standard.Price(ETH), Timestamp: 99, TxHash: common.HexToHash("0x05"),
		BlockHash: common.HexToHash("0x06"), BlockNumber: 7, LogIndex: 8, Confirmations: 2}
	for _, d := range []DebtPaid{valid, {Amount: new(big.Int).Lsh(big.NewInt(1), 255)}} {
		b, err := proto.Marshal(d.Proto())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x2a, 0x21}) // amount: a length with no bytes behind it
	f.Fuzz(func(t *testing.T, data []byte) {
		var m ledgerpb.DebtPayment
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		d, err := DebtPaidFromProto(&m)
		if err != nil {
			if !errors.Is(err, ErrMalformedPayment) {
				t.Fatalf("error %v does not wrap ErrMalformedPayment", err)
			}
			return
		}
		back, err := DebtPaidFromProto(d.Proto())
		if err != nil {
			t.Fatalf("re-decoding an accepted payment: %v", err)
		}
		if back.Amount.Cmp(d.Amount) != 0 {
			t.Fatalf("amount %v became %v", d.Amount, back.Amount)
		}
		back.Amount = d.Amount
		if back != d {
			t.Fatalf("round trip\n got %+v\nwant %+v", back, d)
		}
		if d.Micros() > 0 && d.Amount.Sign() <= 0 {
			t.Fatalf("%v wei converted to %d micros", d.Amount, d.Micros())
		}
	})
}
