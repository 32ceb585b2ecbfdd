package paycontract

import (
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// debtPaidLog builds a DebtPaid log as the contract emits it.
func debtPaidLog(t testing.TB) types.Log {
	t.Helper()
	ev := ledgerABI.abi.Events[PaymentLedgerDebtPaidEventName]
	data, err := ev.Inputs.NonIndexed().Pack(big.NewInt(1_000_000_000_000_000), big.NewInt(1_700_000_000))
	if err != nil {
		t.Fatal(err)
	}
	return types.Log{
		Address: contract, Topics: []common.Hash{ev.ID, common.BytesToHash(validator.Bytes()), common.BytesToHash(payer.Bytes())},
		Data: data, BlockNumber: 7, TxHash: common.HexToHash("0x01"), BlockHash: common.HexToHash("0x02"), Index: 4,
	}
}

func joinTopics(ts []common.Hash) []byte {
	var out []byte
	for _, h := range ts {
		out = append(out, h.Bytes()...)
	}
	return out
}

// FuzzDecodeLog feeds the decoders what an RPC endpoint could answer for
// the contract's two events: any topics and data under either signature.
// Decoding never panics and refuses with ErrMalformedLog only; an accepted
// log names its topics' proposal id and addresses, has its enums in range
// and a non-negative amount, and its values, packed again as the contract
// would, decode to the same payment.
func FuzzDecodeLog(f *testing.F) {
	paid := proposalPaidLog(f, 2, 1)
	debt := debtPaidLog(f)
	f.Add(false, joinTopics(paid.Topics[1:]), paid.Data)
	f.Add(true, joinTopics(debt.Topics[1:]), debt.Data)
	f.Add(false, joinTopics(paid.Topics[1:]), paid.Data[:64])
	f.Add(true, joinTopics(debt.Topics[1:]), append(debt.Data, 0xff))
	f.Add(false, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, isDebt bool, topics, data []byte) {
		l := types.Log{Address: contract, Data: data, BlockNumber: 9, TxHash: common.HexToHash("0x0a"), BlockHash: common.HexToHash("0x0b"), Index: 1}
		l.Topics = []common.Hash{ProposalPaidTopic()}
		if isDebt {
			l.Topics[0] = DebtPaidTopic()
		}
		for ; len(topics) >= common.HashLength && len(l.Topics) < 6; topics = topics[common.HashLength:] {
			l.Topics = append(l.Topics, common.BytesToHash(topics[:common.HashLength]))
		}
		if isDebt {
			checkDebtPaid(t, l)
		} else {
			checkProposalPaid(t, l)
		}
	})
}

func checkProposalPaid(t *testing.T, l types.Log) {
	p, err := DecodeProposalPaid(1337, l)
	if err != nil {
		if !errors.Is(err, ErrMalformedLog) {
			t.Fatalf("refused with %v, want ErrMalformedLog", err)
		}
		return
	}
	if p.ProposalID != l.Topics[1] || p.Payer != common.BytesToAddress(l.Topics[2].Bytes()) || !p.Class.Valid() || !p.Token.Valid() ||
		p.Amount.Sign() < 0 || p.TxHash != l.TxHash || p.BlockHash != l.BlockHash || p.LogIndex != l.Index {
		t.Fatalf("decoded %+v from %+v", p, l)
	}
	ev := ledgerABI.abi.Events[PaymentLedgerProposalPaidEventName]
	data, err := ev.Inputs.NonIndexed().Pack(p.Amount, uint8(p.Class), p.PreferredValidator, new(big.Int).SetUint64(p.Timestamp))
	if err != nil {
		t.Fatalf("packing the decoded values again: %v", err)
	}
	again := l
	again.Data = data
	again.Topics = []common.Hash{l.Topics[0], l.Topics[1], common.BytesToHash(p.Payer.Bytes()), common.BigToHash(big.NewInt(int64(p.Token)))}
	q, err := DecodeProposalPaid(1337, again)
	if err != nil {
		t.Fatalf("the re-packed log does not decode: %v", err)
	}
	if q.Amount.Cmp(p.Amount) != 0 {
		t.Fatalf("amount %v, then %v", p.Amount, q.Amount)
	}
	p.Amount, q.Amount = nil, nil
	if p != q {
		t.Fatalf("decoded %+v, then %+v", p, q)
	}
}

func checkDebtPaid(t *testing.T, l types.Log) {
	d, err := DecodeDebtPaid(1337, l)
	if err != nil {
		if !errors.Is(err, ErrMalformedLog) {
			t.Fatalf("refused with %v, want ErrMalformedLog", err)
		}
		return
	}
	if d.Wallet != common.BytesToAddress(l.Topics[1].Bytes()) || d.Payer != common.BytesToAddress(l.Topics[2].Bytes()) ||
		d.Amount.Sign() < 0 || d.TxHash != l.TxHash || d.LogIndex != l.Index {
		t.Fatalf("decoded %+v from %+v", d, l)
	}
	ev := ledgerABI.abi.Events[PaymentLedgerDebtPaidEventName]
	data, err := ev.Inputs.NonIndexed().Pack(d.Amount, new(big.Int).SetUint64(d.Timestamp))
	if err != nil {
		t.Fatalf("packing the decoded values again: %v", err)
	}
	again := l
	again.Data = data
	again.Topics = []common.Hash{l.Topics[0], common.BytesToHash(d.Wallet.Bytes()), common.BytesToHash(d.Payer.Bytes())}
	e, err := DecodeDebtPaid(1337, again)
	if err != nil {
		t.Fatalf("the re-packed log does not decode: %v", err)
	}
	if e.Amount.Cmp(d.Amount) != 0 {
		t.Fatalf("amount %v, then %v", d.Amount, e.Amount)
	}
	d.Amount, e.Amount = nil, nil
	if d != e {
		t.Fatalf("decoded %+v, then %+v", d, e)
	}
}
