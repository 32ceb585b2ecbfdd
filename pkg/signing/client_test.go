package signing

import (
	"errors"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// TestClientRegistrationDigest pins the hand-written encoding to apitypes'
// and checks the domain separation: another client id, wallet, chain or
// contract changes the digest, and a registration's digest is not the
// digest of any proposal naming the same wallet.
func TestClientRegistrationDigest(t *testing.T) {
	key := testKey(t, "client")
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	reg := ClientRegistration{ClientID: "app-1.example:web", Wallet: wallet}
	s, _ := NewSigner(devDomain)
	got, err := s.ClientRegistrationDigest(reg)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := apitypes.TypedDataAndHash(devDomain.ClientRegistrationData(reg))
	if err != nil {
		t.Fatal(err)
	}
	if got != common.BytesToHash(want) {
		t.Fatalf("digest %s, apitypes %x", got.Hex(), want)
	}
	for name, other := range map[string]func() (common.Hash, error){
		"client id": func() (common.Hash, error) {
			return s.ClientRegistrationDigest(ClientRegistration{ClientID: "app-2", Wallet: wallet})
		},
		"wallet": func() (common.Hash, error) {
			return s.ClientRegistrationDigest(ClientRegistration{ClientID: reg.ClientID, Wallet: common.Address{1}})
		},
		"chain": func() (common.Hash, error) {
			o, _ := NewSigner(Domain{ChainID: 1, VerifyingContract: devDomain.VerifyingContract})
			return o.ClientRegistrationDigest(reg)
		},
		"contract": func() (common.Hash, error) {
			o, _ := NewSigner(Domain{ChainID: devDomain.ChainID})
			return o.ClientRegistrationDigest(reg)
		},
		"proposal": func() (common.Hash, error) {
			return s.Digest(Proposal{Action: ActionRegisterClient, Wallet: wallet, Path: reg.ClientID})
		},
	} {
		h, err := other()
		if err != nil || h == got {
			t.Errorf("%s: digest %s (err %v) equals the registration's", name, h.Hex(), err)
		}
	}
}

func TestVerifyClientRegistration(t *testing.T) {
	key := testKey(t, "client")
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	reg := ClientRegistration{ClientID: "c1", Wallet: wallet}
	s, _ := NewSigner(devDomain)
	sig, err := s.SignClientRegistration(reg, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyClientRegistration(reg, sig); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	if err := s.VerifyClientRegistration(ClientRegistration{ClientID: "c2", Wallet: wallet}, sig); !errors.Is(err, ErrWrongSigner) {
		t.Errorf("another client id: %v, want ErrWrongSigner", err)
	}
	if err := s.VerifyClientRegistration(ClientRegistration{ClientID: "c1", Wallet: common.Address{7}}, sig); !errors.Is(err, ErrWrongSigner) {
		t.Errorf("another wallet: %v, want ErrWrongSigner", err)
	}
	propSig, err := s.Sign(Proposal{Action: ActionRegisterClient, Wallet: wallet, Path: "c1"}, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyClientRegistration(reg, propSig); !errors.Is(err, ErrWrongSigner) {
		t.Errorf("a proposal's signature: %v, want ErrWrongSigner", err)
	}
	if err := s.VerifyClientRegistration(reg, sig[:64]); !errors.Is(err, ErrMalformedSignature) {
		t.Errorf("short signature: %v, want ErrMalformedSignature", err)
	}
}

func TestCheckClientID(t *testing.T) {
	for _, ok := range []string{"a", "App_1.web:prod-2", strings.Repeat("x", MaxClientIDLen)} {
		if err := CheckClientID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxClientIDLen+1), "a/b", "a b", "é", "a\x00"} {
		if err := CheckClientID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
