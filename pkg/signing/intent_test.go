package signing

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// TestIntentDigestMatchesApitypes pins the hand-written BlobIntent
// encoding to go-ethereum's generic EIP-712 encoder over random intents.
func TestIntentDigestMatchesApitypes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		d := Domain{ChainID: r.Uint64(), VerifyingContract: common.Address(randBytes(r, 20))}
		i := BlobIntent{IntentID: common.Hash(randBytes(r, 32)), Wallet: common.Address(randBytes(r, 20)),
			Size: r.Uint64(), MimeType: strings.Repeat("x", r.IntN(200)), ContentHash: common.Hash(randBytes(r, 32))}
		want, _, err := apitypes.TypedDataAndHash(d.IntentTypedData(i))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := NewSigner(d)
		if got := s.IntentDigest(i); got != common.BytesToHash(want) {
			t.Fatalf("digest %s, apitypes %x", got, want)
		}
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

func TestIntentSignatureBindsEveryField(t *testing.T) {
	key, _ := crypto.GenerateKey()
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	s, _ := NewSigner(Domain{ChainID: 1337, VerifyingContract: common.HexToAddress("0x01")})
	i := BlobIntent{IntentID: common.HexToHash("0xaa"), Wallet: wallet, Size: 5, MimeType: "text/plain", ContentHash: common.HexToHash("0xbb")}
	sig, err := s.SignIntent(i, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyIntent(i, sig, wallet); err != nil {
		t.Fatal(err)
	}
	for name, changed := range map[string]BlobIntent{
		"intentId":    {IntentID: common.HexToHash("0xab"), Wallet: wallet, Size: 5, MimeType: "text/plain", ContentHash: i.ContentHash},
		"size":        {IntentID: i.IntentID, Wallet: wallet, Size: 6, MimeType: "text/plain", ContentHash: i.ContentHash},
		"mimeType":    {IntentID: i.IntentID, Wallet: wallet, Size: 5, MimeType: "text/html", ContentHash: i.ContentHash},
		"contentHash": {IntentID: i.IntentID, Wallet: wallet, Size: 5, MimeType: "text/plain", ContentHash: common.HexToHash("0xbc")},
	} {
		if err := s.VerifyIntent(changed, sig, wallet); !errors.Is(err, ErrWrongSigner) {
			t.Errorf("%s changed: %v", name, err)
		}
	}
	other, _ := NewSigner(Domain{ChainID: 1, VerifyingContract: common.HexToAddress("0x01")})
	if err := other.VerifyIntent(i, sig, wallet); !errors.Is(err, ErrWrongSigner) {
		t.Errorf("another domain: %v", err)
	}
	if err := s.VerifyIntent(i, sig, common.HexToAddress("0x02")); !errors.Is(err, ErrWrongSigner) {
		t.Errorf("another wallet: %v", err)
	}
}
