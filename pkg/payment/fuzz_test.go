package payment

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// FuzzFromProto feeds arbitrary bytes, as a validator reads them from
// chain.<chainId>.payments, through the wire decoding and the payment rules.
// It must never panic; what it accepts must survive Proto and back
// unchanged, and Check must accept it for the proposal it names or say why
// not.
func FuzzFromProto(f *testing.F) {
	valid := ProposalPaid{ChainID: 1337, Contract: common.HexToAddress("0x01"), ProposalID: common.HexToHash("0x02"),
		Payer: common.HexToAddress("0x03"), Amount: Standard.Price(ETH), Class: Standard, Token: ETH,
		PreferredValidator: common.HexToAddress("0x04"), Timestamp: 99, TxHash: common.HexToHash("0x05"),
		BlockHash: common.HexToHash("0x06"), BlockNumber: 7, LogIndex: 8, Confirmations: 2}
	removed := valid
	removed.Removed = true
	for _, p := range []ProposalPaid{valid, removed, {Amount: new(big.Int).Lsh(big.NewInt(1), 255), Class: Priority, Token: USDC}} {
		b, err := proto.Marshal(p.Proto())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m ledgerpb.Payment
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		p, err := FromProto(&m)
		if err != nil {
			if !errors.Is(err, ErrMalformedPayment) {
				t.Fatalf("error %v does not wrap ErrMalformedPayment", err)
			}
			return
		}
		back, err := FromProto(p.Proto())
		if err != nil {
			t.Fatalf("re-decoding an accepted payment: %v", err)
		}
		if back.Amount.Cmp(p.Amount) != 0 {
			t.Fatalf("amount %v became %v", p.Amount, back.Amount)
		}
		back.Amount = p.Amount
		if back != p {
			t.Fatalf("round trip\n got %+v\nwant %+v", back, p)
		}
		want := Expectation{ChainID: p.ChainID, Contract: p.Contract, ProposalID: p.ProposalID, TxHash: p.TxHash, Class: p.Class, Wallet: p.Payer}
		rejected := Check(p, want)
		paidEnough := p.Amount.Cmp(p.Class.Price(p.Token)) >= 0
		if (rejected == nil) != (!p.Removed && paidEnough) {
			t.Fatalf("Check(%+v) for its own proposal = %v (removed %v, paid enough %v)", p, rejected, p.Removed, paidEnough)
		}
	})
}

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

// FuzzDecodeEpochUpdate feeds arbitrary bytes, as a validator reads them
// from chain.<chainId>.epochs, through the decoder. It must never panic;
// what it accepts has a chain, a finalized epoch no later than the current
// one and a message id fit for a NATS header, and survives Encode and back
// unchanged.
func FuzzDecodeEpochUpdate(f *testing.F) {
	for _, u := range []EpochUpdate{
		{ChainID: 1337, Current: 4_400_000, Finalized: 4_399_998, Source: EpochSourceBlockTimeLag, BlockNumber: 42, ObservedAtMs: 1_700_000_000_000},
		{ChainID: 1, Current: 300_000, Finalized: 299_998, Source: EpochSourceBeacon, Slot: 9_600_031},
	} {
		b, err := u.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"chainId":1,"current":1,"finalized":2,"source":"beacon"}`))
	f.Add([]byte(`{"chainId":1,"current":18446744073709551616,"finalized":0,"source":"x"}`))
	f.Add([]byte(`{"chainId":1,"current":3,"finalized":1,"source":"a b\r\n"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := DecodeEpochUpdate(data)
		if err != nil {
			if !errors.Is(err, ErrMalformedEpochUpdate) {
				t.Fatalf("error %v does not wrap ErrMalformedEpochUpdate", err)
			}
			return
		}
		if u.ChainID == 0 || u.Finalized > u.Current {
			t.Fatalf("accepted %+v", u)
		}
		if id := u.MsgID(); strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("message id %q is not fit for a header", id)
		}
		b, err := u.Encode()
		if err != nil {
			t.Fatalf("encoding an accepted update: %v", err)
		}
		back, err := DecodeEpochUpdate(b)
		if err != nil {
			t.Fatalf("re-decoding an accepted update: %v", err)
		}
		if back != u {
			t.Fatalf("round trip\n got %+v\nwant %+v", back, u)
		}
	})
}
