package payment

import (
	"bytes"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

func sampleStatus() WatcherStatus {
	fin := uint64(96)
	return WatcherStatus{ChainID: 1337, Contract: common.HexToAddress("0x0c"),
		Head: StatusBlock{Number: 130, Hash: common.HexToHash("0xaa")}, HeadTimeS: 1_700_000_000, Finalized: &fin, Safe: 128,
		Confirmations: 2, Cursor: &StatusBlock{Number: 120, Hash: common.HexToHash("0xbb")}, PendingFrom: 121,
		Pending: []PendingPayment{
			{TxHash: common.HexToHash("0x01"), ProposalID: common.HexToHash("0x02"), BlockNumber: 125, BlockHash: common.HexToHash("0x03"),
				LogIndex: 0, Confirmations: 5, Payer: common.HexToAddress("0x04"), Amount: Standard.Price(ETH), Class: Standard, Token: ETH, TimestampS: 1_699_999_990},
			{TxHash: common.HexToHash("0x05"), ProposalID: common.HexToHash("0x06"), BlockNumber: 130, BlockHash: common.HexToHash("0xaa"),
				LogIndex: 3, Confirmations: 0, Payer: common.HexToAddress("0x07"), Amount: Express.Price(USDC), Class: Express, Token: USDC, TimestampS: 1_700_000_000},
		},
		ObservedAtMs: 1_700_000_000_500}
}

func TestWatcherStatusWireForm(t *testing.T) {
	s := sampleStatus()
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeWatcherStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Same(s) || back.ObservedAtMs != s.ObservedAtMs {
		t.Fatalf("round trip\n got %+v\nwant %+v", back, s)
	}
	if lag := back.LagBlocks(); lag == nil || *lag != 8 {
		t.Fatalf("lag %v, want safe 128 - cursor 120", lag)
	}
	if StatusKey(1337) != "status-1337" {
		t.Fatalf("key %q", StatusKey(1337))
	}
	later := s
	later.ObservedAtMs++
	if !later.Same(s) {
		t.Fatal("statuses differing in their time alone are not the same")
	}
	later.Head.Number++
	if later.Same(s) {
		t.Fatal("statuses with different heads are the same")
	}
	// A field a newer watcher adds is ignored; no cursor and no finalized
	// block are allowed.
	minimal := `{"chainId":1,"head":{"number":5,"hash":"0x` + strings.Repeat("ab", 32) + `"},"safeBlock":3,"pendingFrom":4,"pending":[],"observedAtMs":1,"extra":true}`
	if got, err := DecodeWatcherStatus([]byte(minimal)); err != nil || got.Cursor != nil || got.Finalized != nil || got.LagBlocks() != nil {
		t.Fatalf("minimal status: %+v, %v", got, err)
	}

	mutate := map[string]func(*WatcherStatus){
		"no chain":                func(s *WatcherStatus) { s.ChainID = 0 },
		"no head hash":            func(s *WatcherStatus) { s.Head.Hash = common.Hash{} },
		"safe above head":         func(s *WatcherStatus) { s.Safe = 131 },
		"finalized above head":    func(s *WatcherStatus) { f := uint64(131); s.Finalized = &f },
		"pending below its range": func(s *WatcherStatus) { s.PendingFrom = 126 },
		"wrong confirmations":     func(s *WatcherStatus) { s.Pending[0].Confirmations = 4 },
		"out of order":            func(s *WatcherStatus) { s.Pending[0], s.Pending[1] = s.Pending[1], s.Pending[0] },
		"negative amount":         func(s *WatcherStatus) { s.Pending[0].Amount = big.NewInt(-1) },
		"amount beyond uint256":   func(s *WatcherStatus) { s.Pending[0].Amount = new(big.Int).Lsh(big.NewInt(1), 256) },
		"unknown class":           func(s *WatcherStatus) { s.Pending[0].Class = 3 },
		"no time":                 func(s *WatcherStatus) { s.ObservedAtMs = 0 },
		"too many": func(s *WatcherStatus) {
			for len(s.Pending) <= MaxPendingPayments {
				s.Pending = append(s.Pending, s.Pending[len(s.Pending)-1])
			}
		},
	}
	for name, m := range mutate {
		s := sampleStatus()
		m(&s)
		if _, err := s.Encode(); !errors.Is(err, ErrMalformedStatus) {
			t.Errorf("%s: encoded, %v", name, err)
		}
	}
	for name, data := range map[string]string{
		"not JSON":            `status`,
		"trailing data":       string(b) + `x`,
		"two objects":         string(b) + string(b),
		"short hash":          strings.Replace(string(b), `"0x00000000000000000000000000000000000000000000000000000000000000aa"`, `"0xaa"`, 1),
		"amount as a float":   strings.Replace(string(b), `"amount":1000000000000000`, `"amount":1e15`, 1),
		"block beyond 64 bit": strings.Replace(string(b), `"blockNumber":125`, `"blockNumber":18446744073709551616`, 1),
		"null":                `null`,
		"too large":           `{"chainId":1,"x":"` + strings.Repeat("a", MaxStatusBytes) + `"}`,
	} {
		if data == string(b) {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if s, err := DecodeWatcherStatus([]byte(data)); !errors.Is(err, ErrMalformedStatus) {
			t.Errorf("%s: decoded %+v, %v", name, s, err)
		}
	}
}

// FuzzDecodeWatcherStatus feeds arbitrary bytes, as a validator reads them
// from the watcher's key-value bucket, through the decoder. It must never
// panic; what it accepts is valid, and survives Encode and back unchanged.
func FuzzDecodeWatcherStatus(f *testing.F) {
	b, err := sampleStatus().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"chainId":1,"head":{"number":0,"hash":"0x` + strings.Repeat("01", 32) + `"},"safeBlock":0,"pendingFrom":1,"observedAtMs":1}`))
	f.Add([]byte(`{"chainId":1,"head":{"number":18446744073709551615,"hash":"0x` + strings.Repeat("01", 32) + `"},"pendingFrom":18446744073709551615,"observedAtMs":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeWatcherStatus(data)
		if err != nil {
			if !errors.Is(err, ErrMalformedStatus) {
				t.Fatalf("error %v does not wrap ErrMalformedStatus", err)
			}
			return
		}
		if s.Validate() != nil || s.Pending == nil {
			t.Fatalf("accepted %+v", s)
		}
		if lag := s.LagBlocks(); lag != nil && *lag > s.Safe {
			t.Fatalf("lag %d beyond the safe block %d", *lag, s.Safe)
		}
		enc, err := s.Encode()
		if err != nil {
			t.Fatalf("encoding an accepted status: %v", err)
		}
		back, err := DecodeWatcherStatus(enc)
		if err != nil {
			t.Fatalf("re-decoding an accepted status: %v", err)
		}
		again, err := back.Encode()
		if err != nil || !bytes.Equal(enc, again) {
			t.Fatalf("round trip\n got %s\nwant %s", again, enc)
		}
	})
}
