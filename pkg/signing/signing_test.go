package signing

import (
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// TestSpecExample runs the example from the EIP-712 specification (Mail from
// Cow to Bob, signed with keccak256("cow")) through the same internal
// functions the Signer uses.
func TestSpecExample(t *testing.T) {
	td := apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {
				{Name: "name", Type: "string"},
				{Name: "version", Type: "string"},
				{Name: "chainId", Type: "uint256"},
				{Name: "verifyingContract", Type: "address"},
			},
			"Person": {
				{Name: "name", Type: "string"},
				{Name: "wallet", Type: "address"},
			},
			"Mail": {
				{Name: "from", Type: "Person"},
				{Name: "to", Type: "Person"},
				{Name: "contents", Type: "string"},
			},
		},
		PrimaryType: "Mail",
		Domain: apitypes.TypedDataDomain{
			Name:              "Ether Mail",
			Version:           "1",
			ChainId:           math.NewHexOrDecimal256(1),
			VerifyingContract: "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC",
		},
		Message: apitypes.TypedDataMessage{
			"from": map[string]any{
				"name":   "Cow",
				"wallet": "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826",
			},
			"to": map[string]any{
				"name":   "Bob",
				"wallet": "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB",
			},
			"contents": "Hello, Bob!",
		},
	}
	const (
		wantType   = "Mail(Person from,Person to,string contents)Person(string name,address wallet)"
		wantSep    = "0xf2cee375fa42b42143804025fc449deafd50cc031ca257e0b194a650a912090f"
		wantStruct = "0xc52c0ee5d84264471806290a3f2c4cecfc5490626bf912d01f240d7a274b371e"
		wantDigest = "0xbe609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2"
		// v = 28, r, s from the specification's example.
		wantSig = "0x4355c47d63924e8a72e509b65029052eb6c299d53a04e167c5775fd466751c9d" +
			"07299936d304c153f6443dfa05f40ff007d72911b6f72307f996231605b91562" + "1c"
	)

	if got := string(td.EncodeType("Mail")); got != wantType {
		t.Errorf("encodeType = %q, want %q", got, wantType)
	}
	sep, err := domainSeparator(&td)
	if err != nil {
		t.Fatal(err)
	}
	if sep.Hex() != wantSep {
		t.Errorf("domain separator = %s, want %s", sep.Hex(), wantSep)
	}
	sh, err := td.HashStruct("Mail", td.Message)
	if err != nil {
		t.Fatal(err)
	}
	if got := hexutil.Encode(sh); got != wantStruct {
		t.Errorf("hashStruct(message) = %s, want %s", got, wantStruct)
	}
	h, err := digest(&td, sep, td.Message)
	if err != nil {
		t.Fatal(err)
	}
	if h.Hex() != wantDigest {
		t.Fatalf("digest = %s, want %s", h.Hex(), wantDigest)
	}
	// go-ethereum's one-shot helper must agree with our split computation.
	if one, _, err := apitypes.TypedDataAndHash(td); err != nil || common.BytesToHash(one) != h {
		t.Errorf("TypedDataAndHash = %x, %v; want %s", one, err, h.Hex())
	}

	key := testKey(t, "cow")
	cow := crypto.PubkeyToAddress(key.PublicKey)
	if cow != common.HexToAddress("0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826") {
		t.Fatalf("cow address = %s", cow.Hex())
	}
	sig, err := signDigest(h, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := hexutil.Encode(sig); got != wantSig {
		t.Fatalf("signature = %s, want %s", got, wantSig)
	}
	parsed, err := ParseSignature(wantSig)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := recoverDigest(h, parsed); err != nil || got != cow {
		t.Fatalf("recover = %s, %v; want %s", got.Hex(), err, cow.Hex())
	}
}

func TestSecp256k1Constants(t *testing.T) {
	n := crypto.S256().Params().N
	if new(big.Int).SetBytes(secp256k1N[:]).Cmp(n) != 0 {
		t.Error("secp256k1N is wrong")
	}
	if new(big.Int).SetBytes(secp256k1HalfN[:]).Cmp(new(big.Int).Rsh(n, 1)) != 0 {
		t.Error("secp256k1HalfN is wrong")
	}
}

func TestProposalType(t *testing.T) {
	td := devDomain.TypedData(Proposal{})
	const want = "Proposal(string action,bytes32 proposalId,address wallet,string path," +
		"string organization,string contentType,string paymentTier,bytes32 messageHash)"
	if got := string(td.EncodeType(PrimaryType)); got != want {
		t.Errorf("encodeType = %q\nwant %q", got, want)
	}
}

func TestMessageHash(t *testing.T) {
	// keccak256("") is a well-known constant; the point is that this is
	// Keccak, not NIST SHA3-256.
	if got := MessageHash(nil).Hex(); got != "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470" {
		t.Errorf("MessageHash(nil) = %s", got)
	}
}

func TestRoundTrip(t *testing.T) {
	key := testKey(t, "alice")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	for _, p := range []Proposal{
		sampleProposal(addr),
		{Action: ActionDelete, ProposalID: common.Hash{1}, Wallet: addr, Path: "/acme/x", Organization: "acme", PaymentTier: "express"},
		{Wallet: addr}, // all empty
	} {
		sig, err := Sign(devDomain, p, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(sig) != SignatureLen || (sig[64] != 27 && sig[64] != 28) {
			t.Fatalf("Sign = %x: want 65 bytes with v 27/28", sig)
		}
		again, _ := Sign(devDomain, p, key)
		if string(again) != string(sig) {
			t.Error("Sign is not deterministic")
		}
		got, err := Recover(devDomain, p, sig)
		if err != nil || got != addr {
			t.Fatalf("Recover = %s, %v; want %s", got.Hex(), err, addr.Hex())
		}
		if err := Verify(devDomain, p, sig, addr); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if _, err := ParseSignature(hexutil.Encode(sig)); err != nil {
			t.Fatalf("ParseSignature(Sign(...)): %v", err)
		}
		h, err := devDomain.Digest(p)
		if err != nil {
			t.Fatal(err)
		}
		if ref := referenceDigest(devDomain, p); h != ref {
			t.Fatalf("Digest = %s, hand-written EIP-712 = %s", h.Hex(), ref.Hex())
		}
	}
}

func TestWrongWallet(t *testing.T) {
	alice, bob := testKey(t, "alice"), testKey(t, "bob")
	aliceAddr, bobAddr := crypto.PubkeyToAddress(alice.PublicKey), crypto.PubkeyToAddress(bob.PublicKey)
	p := sampleProposal(aliceAddr)
	sig, err := Sign(devDomain, p, alice)
	if err != nil {
		t.Fatal(err)
	}
	// Claimed wallet differs from the one in the proposal.
	if err := Verify(devDomain, p, sig, bobAddr); !errors.Is(err, ErrWrongSigner) {
		t.Errorf("verify for bob: %v, want ErrWrongSigner", err)
	}
	// Proposal names bob, signed by alice.
	p.Wallet = bobAddr
	sig, err = Sign(devDomain, p, alice)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(devDomain, p, sig, bobAddr); !errors.Is(err, ErrWrongSigner) {
		t.Errorf("alice signing for bob: %v, want ErrWrongSigner", err)
	}
	// Addresses compare as values: checksummed or lowercase input is the same wallet.
	p.Wallet = aliceAddr
	sig, _ = Sign(devDomain, p, alice)
	lower := common.HexToAddress(strings.ToLower(aliceAddr.Hex()))
	if err := Verify(devDomain, p, sig, lower); err != nil {
		t.Errorf("lowercase address: %v", err)
	}
}

// TestEveryFieldIsBound checks that a signature is bound to each field of
// the proposal and the domain: changing any one of them breaks it.
func TestEveryFieldIsBound(t *testing.T) {
	key := testKey(t, "alice")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	p0 := sampleProposal(addr)
	sig, err := Sign(devDomain, p0, key)
	if err != nil {
		t.Fatal(err)
	}
	h0, _ := devDomain.Digest(p0)

	tests := []struct {
		name string
		d    func(*Domain)
		p    func(*Proposal)
	}{
		{name: "path", p: func(p *Proposal) { p.Path = "/acme/docs/other.md" }},
		{name: "path prefix", p: func(p *Proposal) { p.Path = "/acme/docs/readme.md/" }},
		{name: "proposalId", p: func(p *Proposal) { p.ProposalID[31] ^= 1 }},
		{name: "action", p: func(p *Proposal) { p.Action = ActionDelete }},
		{name: "tier", p: func(p *Proposal) { p.PaymentTier = "express" }},
		{name: "tier case", p: func(p *Proposal) { p.PaymentTier = "STANDARD" }},
		{name: "messageHash", p: func(p *Proposal) { p.MessageHash = MessageHash([]byte("# Hello!\n")) }},
		{name: "messageHash zero", p: func(p *Proposal) { p.MessageHash = common.Hash{} }},
		{name: "organization", p: func(p *Proposal) { p.Organization = "acme2" }},
		{name: "contentType", p: func(p *Proposal) { p.ContentType = "text/plain" }},
		// Shifting text between adjacent strings changes their hashes.
		{name: "org/contentType boundary", p: func(p *Proposal) { p.Organization, p.ContentType = "acmet", "ext/markdown" }},
		{name: "chainId", d: func(d *Domain) { d.ChainID = 1 }},
		{name: "contract", d: func(d *Domain) { d.VerifyingContract[19] ^= 1 }},
		{name: "zero contract", d: func(d *Domain) { d.VerifyingContract = common.Address{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, p := devDomain, p0
			if tt.d != nil {
				tt.d(&d)
			}
			if tt.p != nil {
				tt.p(&p)
			}
			h, err := d.Digest(p)
			if err != nil {
				t.Fatal(err)
			}
			if h == h0 {
				t.Fatal("digest unchanged")
			}
			if err := Verify(d, p, sig, addr); !errors.Is(err, ErrWrongSigner) {
				t.Fatalf("Verify = %v, want ErrWrongSigner", err)
			}
		})
	}
}

func TestVZeroOne(t *testing.T) {
	key := testKey(t, "alice")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	p := sampleProposal(addr)
	sig, _ := Sign(devDomain, p, key)
	raw := append([]byte(nil), sig...)
	raw[64] -= 27
	if err := Verify(devDomain, p, raw, addr); err != nil {
		t.Fatalf("v=%d: %v", raw[64], err)
	}
	if raw[64] != sig[64]-27 {
		t.Fatal("Verify modified the caller's signature")
	}
	// ParseSignature accepts v 0/1 and normalizes it to 27/28.
	if got, err := ParseSignature(hexutil.Encode(raw)); err != nil || string(got) != string(sig) {
		t.Fatalf("ParseSignature(v=%d) = %x, %v; want %x", raw[64], got, err, sig)
	}
	// The other parity recovers a different key.
	raw[64] ^= 1
	if err := Verify(devDomain, p, raw, addr); !errors.Is(err, ErrWrongSigner) && !errors.Is(err, ErrMalformedSignature) {
		t.Fatalf("flipped v: %v", err)
	}
	for _, v := range []byte{2, 26, 29, 35, 36, 255} {
		bad := append([]byte(nil), sig...)
		bad[64] = v
		if err := Verify(devDomain, p, bad, addr); !errors.Is(err, ErrMalformedSignature) {
			t.Errorf("v=%d: Verify = %v, want ErrMalformedSignature", v, err)
		}
		if _, err := ParseSignature(hexutil.Encode(bad)); !errors.Is(err, ErrMalformedSignature) {
			t.Errorf("v=%d: ParseSignature = %v, want ErrMalformedSignature", v, err)
		}
	}
}

// TestHighS builds the malleated twin of a valid signature (s' = n - s,
// v flipped), shows it is mathematically valid for the same key, and checks
// that we refuse it.
func TestHighS(t *testing.T) {
	key := testKey(t, "alice")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	p := sampleProposal(addr)
	sig, _ := Sign(devDomain, p, key)

	n := crypto.S256().Params().N
	s := new(big.Int).SetBytes(sig[32:64])
	mal := append([]byte(nil), sig...)
	new(big.Int).Sub(n, s).FillBytes(mal[32:64])
	mal[64] = 27 + 28 - mal[64] // flip v

	h, _ := devDomain.Digest(p)
	raw := append([]byte(nil), mal...)
	raw[64] -= 27
	if pub, err := crypto.Ecrecover(h[:], raw); err != nil || common.BytesToAddress(crypto.Keccak256(pub[1:])[12:]) != addr {
		t.Fatalf("malleated signature should recover the same key without our check (err %v)", err)
	}

	if err := Verify(devDomain, p, mal, addr); !errors.Is(err, ErrHighS) {
		t.Errorf("Verify = %v, want ErrHighS", err)
	}
	if _, err := Recover(devDomain, p, mal); !errors.Is(err, ErrHighS) {
		t.Errorf("Recover = %v, want ErrHighS", err)
	}
	if _, err := ParseSignature(hexutil.Encode(mal)); !errors.Is(err, ErrHighS) {
		t.Errorf("ParseSignature = %v, want ErrHighS", err)
	}
	raw[64] = mal[64] - 27
	if err := Verify(devDomain, p, raw, addr); !errors.Is(err, ErrHighS) {
		t.Errorf("Verify(v 0/1) = %v, want ErrHighS", err)
	}

	// The boundary: s = n/2 is low, n/2 + 1 is high.
	edge := append([]byte(nil), sig...)
	copy(edge[32:64], secp256k1HalfN[:])
	if err := checkSignature(edge); err != nil {
		t.Errorf("s = n/2: %v", err)
	}
	edge[63]++
	if err := checkSignature(edge); !errors.Is(err, ErrHighS) {
		t.Errorf("s = n/2+1: %v, want ErrHighS", err)
	}
}

func TestParseSignatureMalformed(t *testing.T) {
	key := testKey(t, "alice")
	sig, _ := Sign(devDomain, sampleProposal(crypto.PubkeyToAddress(key.PublicKey)), key)
	good := hexutil.Encode(sig)
	if got, err := ParseSignature("0x" + strings.ToUpper(good[2:])); err != nil || string(got) != string(sig) {
		t.Errorf("uppercase hex digits: %x, %v", got, err)
	}

	withRS := func(r, s []byte) string {
		b := append([]byte(nil), sig...)
		copy(b[:32], common.LeftPadBytes(r, 32))
		copy(b[32:64], common.LeftPadBytes(s, 32))
		return hexutil.Encode(b)
	}
	for name, in := range map[string]string{
		"empty":        "",
		"prefix only":  "0x",
		"no prefix":    good[2:],
		"no prefix 66": "00" + good[2:],
		"0X prefix":    "0X" + good[2:],
		"short":        good[:len(good)-2],
		"long":         good + "00",
		"odd":          good[:len(good)-1],
		"non-hex":      good[:10] + "zz" + good[12:],
		"space":        " " + good[:len(good)-1],
		"r zero":       withRS(nil, sig[32:64]),
		"r = n":        withRS(secp256k1N[:], sig[32:64]),
		"r max":        withRS(common.MaxHash[:], sig[32:64]),
		"s zero":       withRS(sig[:32], nil),
		"s = n":        withRS(sig[:32], secp256k1N[:]),
		"v 29":         good[:len(good)-2] + "1d",
	} {
		if _, err := ParseSignature(in); !errors.Is(err, ErrMalformedSignature) {
			t.Errorf("%s: ParseSignature(%q) = %v, want ErrMalformedSignature", name, in, err)
		}
	}
}

func TestRecoverMalformed(t *testing.T) {
	p := sampleProposal(common.Address{1})
	for _, sig := range [][]byte{nil, {}, make([]byte, 64), make([]byte, 66), make([]byte, 65)} {
		if _, err := Recover(devDomain, p, sig); !errors.Is(err, ErrMalformedSignature) {
			t.Errorf("Recover(%d bytes) = %v, want ErrMalformedSignature", len(sig), err)
		}
		if err := Verify(devDomain, p, sig, p.Wallet); !errors.Is(err, ErrMalformedSignature) {
			t.Errorf("Verify(%d bytes) = %v, want ErrMalformedSignature", len(sig), err)
		}
	}
	// An r that is not the x-coordinate of any curve point passes the range
	// checks but recovers nothing.
	h, _ := devDomain.Digest(p)
	for x := byte(1); x < 100; x++ {
		sig := make([]byte, 65)
		sig[31], sig[63] = x, 1
		if _, err := crypto.Ecrecover(h[:], sig); err == nil {
			continue
		}
		if _, err := Recover(devDomain, p, sig); !errors.Is(err, ErrMalformedSignature) {
			t.Errorf("r=%d off curve: Recover = %v, want ErrMalformedSignature", x, err)
		}
		return
	}
	t.Fatal("no off-curve r found")
}

func TestNilInputs(t *testing.T) {
	p := sampleProposal(common.Address{1})
	if _, err := Sign(devDomain, p, nil); err == nil {
		t.Error("Sign with nil key succeeded")
	}
	if _, err := Sign(devDomain, p, &ecdsa.PrivateKey{D: big.NewInt(1)}); err == nil { //nolint:staticcheck // SA1019: a key without a curve, on purpose
		t.Error("Sign with curveless key succeeded")
	}
	if err := (&Signer{}).Verify(p, make([]byte, 65), p.Wallet); err == nil {
		t.Error("zero Signer verified")
	}
	var s *Signer
	if err := s.Verify(p, make([]byte, 65), p.Wallet); err == nil {
		t.Error("nil Signer verified")
	}
	if _, err := s.Digest(p); err == nil {
		t.Error("nil Signer digest succeeded")
	}
}

// TestTypedDataJSON checks the exported payload: its JSON, as a wallet or
// clef would receive it, hashes to Digest, and callers get their own copy.
func TestTypedDataJSON(t *testing.T) {
	key := testKey(t, "alice")
	p := sampleProposal(crypto.PubkeyToAddress(key.PublicKey))
	want, _ := devDomain.Digest(p)

	td := devDomain.TypedData(p)
	b, err := json.Marshal(td)
	if err != nil {
		t.Fatal(err)
	}
	var back apitypes.TypedData
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	h, _, err := apitypes.TypedDataAndHash(back)
	if err != nil {
		t.Fatal(err)
	}
	if common.BytesToHash(h) != want {
		t.Fatalf("JSON payload hashes to %x, Digest is %s\n%s", h, want.Hex(), b)
	}

	td.Types[PrimaryType][0].Name = "mutated"
	td.Types["EIP712Domain"][0].Type = "bytes"
	if h, _ := devDomain.Digest(p); h != want {
		t.Fatal("mutating TypedData's result changed later digests")
	}
}

func TestSignerConcurrent(t *testing.T) {
	s, err := NewSigner(devDomain)
	if err != nil {
		t.Fatal(err)
	}
	if s.Domain() != devDomain {
		t.Fatal("Domain() mismatch")
	}
	key := testKey(t, "alice")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := sampleProposal(addr)
			p.ProposalID[0] = byte(i)
			sig, err := s.Sign(p, key)
			if err == nil {
				err = s.Verify(p, sig, addr)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
