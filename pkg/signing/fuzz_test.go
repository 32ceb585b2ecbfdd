package signing

import (
	"errors"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
)

func FuzzParseSignature(f *testing.F) {
	key := testKey(f, "alice")
	sig, err := Sign(devDomain, sampleProposal(crypto.PubkeyToAddress(key.PublicKey)), key)
	if err != nil {
		f.Fatal(err)
	}
	good := hexutil.Encode(sig)
	f.Add(good)
	f.Add("0x" + strings.ToUpper(good[2:]))
	f.Add(good[:len(good)-2] + "00")
	f.Add(good[:len(good)-2] + "1d")
	f.Add(good[:66] + hexutil.Encode(secp256k1HalfN[:])[2:] + "1b")
	f.Add(good[:66] + hexutil.Encode(secp256k1N[:])[2:] + "1b")
	f.Add("0x" + strings.Repeat("f", 130))
	f.Add("0x" + strings.Repeat("0", 130))
	f.Add("")
	f.Add("0x")
	f.Add(good[2:] + "00")

	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignature(s)
		if err != nil {
			if !errors.Is(err, ErrMalformedSignature) && !errors.Is(err, ErrHighS) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(sig) != SignatureLen {
			t.Fatalf("accepted %d bytes", len(sig))
		}
		if string(sig[32:64]) > string(secp256k1HalfN[:]) {
			t.Fatalf("accepted high s: %x", sig)
		}
		if v := sig[64]; v != 27 && v != 28 {
			t.Fatalf("returned v = %d, want 27 or 28", v)
		}
		if in := strings.ToLower(s); hexutil.Encode(sig[:64]) != in[:130] {
			t.Fatalf("decoded %x from %q", sig, s)
		} else if v := in[130:]; v != "00" && v != "01" && v != "1b" && v != "1c" {
			t.Fatalf("accepted v %q", v)
		}
	})
}

func FuzzVerify(f *testing.F) {
	p := sampleProposal(common.Address{})
	f.Add("write", p.ProposalID[:], []byte{1}, "/acme/docs/readme.md", "acme", "text/markdown", "standard",
		p.MessageHash[:], uint64(1337), devDomain.VerifyingContract[:], []byte("alice"), make([]byte, 65))
	f.Add("delete", []byte{}, []byte{}, "", "", "", "", []byte{}, uint64(0), []byte{}, []byte{}, []byte{})
	f.Add("wr\x00ite", make([]byte, 40), make([]byte, 21), "/ünï/\xff\xfe", "日本", "a\nb", "EXPRESS",
		make([]byte, 31), ^uint64(0), make([]byte, 25), []byte("bob"), append(make([]byte, 64), 28))

	f.Fuzz(func(t *testing.T, action string, proposalID, wallet []byte, path, org, contentType, tier string,
		messageHash []byte, chainID uint64, contract, keySeed, sig []byte) {
		d := Domain{ChainID: chainID, VerifyingContract: common.BytesToAddress(contract)}
		p := Proposal{
			Action:       action,
			ProposalID:   common.BytesToHash(proposalID),
			Wallet:       common.BytesToAddress(wallet),
			Path:         path,
			Organization: org,
			ContentType:  contentType,
			PaymentTier:  tier,
			MessageHash:  common.BytesToHash(messageHash),
		}

		// Arbitrary signature bytes: no panic, only our error kinds.
		if err := Verify(d, p, sig, p.Wallet); err != nil &&
			!errors.Is(err, ErrMalformedSignature) && !errors.Is(err, ErrHighS) && !errors.Is(err, ErrWrongSigner) {
			t.Fatalf("unexpected error kind: %v", err)
		}

		h, err := d.Digest(p)
		if err != nil {
			t.Fatalf("Digest: %v", err)
		}
		if ref := referenceDigest(d, p); h != ref {
			t.Fatalf("Digest %s != hand-written EIP-712 %s", h.Hex(), ref.Hex())
		}

		// A signature we make over these fields always verifies.
		key, err := crypto.ToECDSA(crypto.Keccak256(keySeed))
		if err != nil {
			return // seed hashed to 0 or >= n: not a key
		}
		p.Wallet = crypto.PubkeyToAddress(key.PublicKey)
		good, err := Sign(d, p, key)
		if err != nil {
			t.Fatalf("Sign: %v", err)
		}
		if err := Verify(d, p, good, p.Wallet); err != nil {
			t.Fatalf("Verify(Sign(...)): %v", err)
		}
		if _, err := ParseSignature(hexutil.Encode(good)); err != nil {
			t.Fatalf("ParseSignature(Sign(...)): %v", err)
		}
	})
}
