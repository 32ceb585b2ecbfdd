package paycontract

import (
	"errors"
	"fmt"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/contentledger/contentledger/pkg/payment"
)

var (
	contract  = common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	payer     = common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
	validator = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	proposal  = common.HexToHash("0xabc0000000000000000000000000000000000000000000000000000000000def")
)

// proposalPaidLog builds a log as the contract emits it; the real contract's
// logs are checked in tools/contracts.
func proposalPaidLog(t testing.TB, tier, token uint8) types.Log {
	t.Helper()
	ev := ledgerABI.abi.Events[PaymentLedgerProposalPaidEventName]
	data, err := ev.Inputs.NonIndexed().Pack(big.NewInt(2_000_000_000_000_000), tier, validator, big.NewInt(1_700_000_000))
	if err != nil {
		t.Fatal(err)
	}
	return types.Log{
		Address:     contract,
		Topics:      []common.Hash{ev.ID, proposal, common.BytesToHash(payer.Bytes()), common.BigToHash(big.NewInt(int64(token)))},
		Data:        data,
		BlockNumber: 7,
		TxHash:      common.HexToHash("0x01"),
		BlockHash:   common.HexToHash("0x02"),
		Index:       3,
	}
}

func TestDecodeProposalPaid(t *testing.T) {
	p, err := Decoder{ChainID: 1337, Contract: contract}.ProposalPaid(proposalPaidLog(t, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := payment.ProposalPaid{
		ChainID: 1337, Contract: contract, ProposalID: proposal, Payer: payer,
		Class: payment.Express, Token: payment.ETH, PreferredValidator: validator, Timestamp: 1_700_000_000,
		TxHash: common.HexToHash("0x01"), BlockHash: common.HexToHash("0x02"), BlockNumber: 7, LogIndex: 3,
	}
	if p.Amount.Cmp(big.NewInt(2_000_000_000_000_000)) != 0 {
		t.Errorf("amount %v", p.Amount)
	}
	p.Amount = nil
	if p != want {
		t.Errorf("got  %+v\nwant %+v", p, want)
	}
}

func TestDecodeProposalPaidRejects(t *testing.T) {
	cases := map[string]struct {
		mutate func(*types.Log)
		want   error
	}{
		"no topics":         {func(l *types.Log) { l.Topics = nil }, ErrWrongEvent},
		"other event":       {func(l *types.Log) { l.Topics[0] = DebtPaidTopic() }, ErrWrongEvent},
		"extra topic":       {func(l *types.Log) { l.Topics = append(l.Topics, common.Hash{}) }, ErrMalformedLog},
		"missing topic":     {func(l *types.Log) { l.Topics = l.Topics[:3] }, ErrMalformedLog},
		"no data":           {func(l *types.Log) { l.Data = nil }, ErrMalformedLog},
		"short data":        {func(l *types.Log) { l.Data = l.Data[:40] }, ErrMalformedLog},
		"no emitter":        {func(l *types.Log) { l.Address = common.Address{} }, ErrMalformedLog},
		"token out of enum": {func(l *types.Log) { l.Topics[3] = common.BigToHash(big.NewInt(2)) }, ErrMalformedLog},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := proposalPaidLog(t, 0, 1)
			c.mutate(&l)
			if _, err := DecodeProposalPaid(1337, l); !errors.Is(err, c.want) {
				t.Errorf("err = %v, want %v", err, c.want)
			}
		})
	}
	t.Run("tier out of enum", func(t *testing.T) {
		if _, err := DecodeProposalPaid(1337, proposalPaidLog(t, 3, 0)); !errors.Is(err, ErrMalformedLog) {
			t.Errorf("err = %v, want ErrMalformedLog", err)
		}
	})
	t.Run("other contract", func(t *testing.T) {
		d := Decoder{ChainID: 1337, Contract: common.HexToAddress("0x01")}
		if _, err := d.ProposalPaid(proposalPaidLog(t, 0, 0)); !errors.Is(err, ErrWrongContract) {
			t.Errorf("err = %v, want ErrWrongContract", err)
		}
	})
}

type dataErr struct{ data any }

func (e dataErr) Error() string  { return "execution reverted" }
func (e dataErr) ErrorData() any { return e.data }

var _ rpc.DataError = dataErr{}

func TestRevertError(t *testing.T) {
	raw := append(PaymentLedgerAlreadyPaidErrorID().Bytes()[:4], proposal.Bytes()...)
	wrapped := fmt.Errorf("estimate: %w", dataErr{data: "0x" + common.Bytes2Hex(raw)})
	reason, ok := RevertError(wrapped)
	ap, isAP := reason.(*PaymentLedgerAlreadyPaid)
	if !ok || !isAP || common.Hash(ap.ProposalId) != proposal {
		t.Fatalf("RevertError = %#v, %v", reason, ok)
	}
	for _, err := range []error{nil, errors.New("plain"), dataErr{data: 42}, dataErr{data: "0x"}, dataErr{data: "0x01"}, dataErr{data: "0xzz"}, dataErr{data: "0xdeadbeef"}} {
		if reason, ok := RevertError(err); ok {
			t.Errorf("RevertError(%v) = %#v, want none", err, reason)
		}
	}
}
