package signing

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// go-ethereum's generic EIP-712 encoder (apitypes) is the reference the
// hand-written encoding in signing.go is held to. It is used only here.

// domainSeparator is hashStruct(EIP712Domain) of td's domain, computed the
// way a Signer computes it, so that the specification's example pins the
// production encoding of the domain.
func domainSeparator(td *apitypes.TypedData) (common.Hash, error) {
	chain := (*big.Int)(td.Domain.ChainId)
	if chain == nil || !chain.IsUint64() {
		return common.Hash{}, fmt.Errorf("chainId %v does not fit a Domain", chain)
	}
	if !common.IsHexAddress(td.Domain.VerifyingContract) {
		return common.Hash{}, fmt.Errorf("verifyingContract %q is not an address", td.Domain.VerifyingContract)
	}
	return domainSeparatorOf(td.Domain.Name, td.Domain.Version, chain.Uint64(), common.HexToAddress(td.Domain.VerifyingContract)), nil
}

// digest is the EIP-712 digest of any struct: apitypes' hashStruct of msg
// (the specification's Mail nests structs, which the hand-written encoder
// does not), then the Signer's final hash.
func digest(td *apitypes.TypedData, separator common.Hash, msg apitypes.TypedDataMessage) (common.Hash, error) {
	structHash, err := td.HashStruct(td.PrimaryType, msg)
	if err != nil {
		return common.Hash{}, fmt.Errorf("signing: hash %s: %w", td.PrimaryType, err)
	}
	return typedDataHash(separator, common.BytesToHash(structHash)), nil
}

// apitypesDigest is the digest a wallet computes from the exported payload:
// the domain separator and struct hash by apitypes, then the final hash.
func apitypesDigest(d Domain, p Proposal) (sep, structHash, digest common.Hash, err error) {
	td := d.TypedData(p)
	s, err := td.HashStruct("EIP712Domain", td.Domain.Map())
	if err != nil {
		return sep, structHash, digest, err
	}
	h, err := td.HashStruct(PrimaryType, td.Message)
	if err != nil {
		return sep, structHash, digest, err
	}
	all, _, err := apitypes.TypedDataAndHash(td)
	if err != nil {
		return sep, structHash, digest, err
	}
	return common.BytesToHash(s), common.BytesToHash(h), common.BytesToHash(all), nil
}

// checkAgainstApitypes compares every stage of the hand-written encoding
// with apitypes for one domain and proposal.
func checkAgainstApitypes(t testing.TB, d Domain, p Proposal) {
	t.Helper()
	wantSep, wantStruct, wantDigest, err := apitypesDigest(d, p)
	if err != nil {
		t.Fatalf("apitypes: %v\n%s", err, describe(p))
	}
	s, err := NewSigner(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.DomainSeparator(); got != wantSep {
		t.Fatalf("domain separator %s, apitypes %s for chain %d, contract %s", got.Hex(), wantSep.Hex(), d.ChainID, d.VerifyingContract.Hex())
	}
	if got := hashProposal(&p); got != wantStruct {
		t.Fatalf("hashStruct %s, apitypes %s\n%s", got.Hex(), wantStruct.Hex(), describe(p))
	}
	if got, err := s.Digest(p); err != nil || got != wantDigest {
		t.Fatalf("Digest %s, %v; apitypes %s\n%s", got.Hex(), err, wantDigest.Hex(), describe(p))
	}
}

// describe prints p with its strings quoted: random ones hold any bytes.
func describe(p Proposal) string {
	return fmt.Sprintf("action %q, proposalId %s, wallet %s, path %q, organization %q, contentType %q, paymentTier %q, messageHash %s",
		p.Action, p.ProposalID.Hex(), p.Wallet.Hex(), p.Path, p.Organization, p.ContentType, p.PaymentTier, p.MessageHash.Hex())
}

// TestEncodeType holds the encodeType strings the hashes use to the type
// tables wallets receive, and the type hashes to the strings.
func TestEncodeType(t *testing.T) {
	td := devDomain.TypedData(Proposal{})
	for _, c := range []struct {
		name, encodeType string
		typeHash         common.Hash
	}{
		{"EIP712Domain", domainEncodeType, domainTypeHash},
		{PrimaryType, proposalEncodeType, proposalTypeHash},
	} {
		if got := string(td.EncodeType(c.name)); got != c.encodeType {
			t.Errorf("apitypes encodeType(%s) = %q\nhashes use %q", c.name, got, c.encodeType)
		}
		if got := common.BytesToHash(td.TypeHash(c.name)); got != c.typeHash {
			t.Errorf("typeHash(%s) = %s, hashes use %s", c.name, got.Hex(), c.typeHash.Hex())
		}
	}
}

// randomString draws lengths around the Keccak block (136 bytes), where a
// staging or padding slip would show, and bytes that are not valid UTF-8.
func randomString(r *rand.Rand) string {
	var n int
	switch r.IntN(4) {
	case 0:
		n = 0
	case 1:
		n = r.IntN(32)
	case 2:
		n = 130 + r.IntN(16)
	default:
		n = r.IntN(700)
	}
	b := make([]byte, n)
	for i := range b {
		if r.IntN(8) == 0 {
			b[i] = byte(r.UintN(256))
		} else {
			b[i] = byte('a' + r.IntN(26))
		}
	}
	return string(b)
}

func randomBytes(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
}

// TestDigestMatchesApitypes compares the hand-written encoding with apitypes
// over many random proposals and domains.
func TestDigestMatchesApitypes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for range n {
		var d Domain
		switch r.IntN(3) {
		case 0:
			d = devDomain
		case 1:
			d.ChainID = r.Uint64()
			randomBytes(r, d.VerifyingContract[:])
		} // else the zero domain: chain 0, zero contract
		p := Proposal{
			Action:       []string{ActionWrite, ActionDelete, randomString(r)}[r.IntN(3)],
			Path:         randomString(r),
			Organization: randomString(r),
			ContentType:  randomString(r),
			PaymentTier:  randomString(r),
		}
		randomBytes(r, p.ProposalID[:])
		randomBytes(r, p.Wallet[:])
		if r.IntN(2) == 0 {
			randomBytes(r, p.MessageHash[:])
		}
		checkAgainstApitypes(t, d, p)
	}
	// One long path: several Keccak blocks in one string.
	p := sampleProposal(common.Address{1})
	p.Path = "/" + strings.Repeat("segment/", 200)
	checkAgainstApitypes(t, devDomain, p)
}

// FuzzDigest compares the hand-written encoding with apitypes for arbitrary
// field values.
func FuzzDigest(f *testing.F) {
	p := sampleProposal(common.Address{1})
	f.Add(p.Action, p.ProposalID[:], p.Wallet[:], p.Path, p.Organization, p.ContentType, p.PaymentTier,
		p.MessageHash[:], devDomain.ChainID, devDomain.VerifyingContract[:])
	f.Add("", []byte{}, []byte{}, "", "", "", "", []byte{}, uint64(0), []byte{})
	f.Add("delete", []byte{0xff}, crypto.Keccak256([]byte("w")), strings.Repeat("p", 136), "\xff\xfe", "日本", "EXPRESS",
		make([]byte, 32), ^uint64(0), crypto.Keccak256([]byte("c")))

	f.Fuzz(func(t *testing.T, action string, proposalID, wallet []byte, path, org, contentType, tier string,
		messageHash []byte, chainID uint64, contract []byte) {
		checkAgainstApitypes(t,
			Domain{ChainID: chainID, VerifyingContract: common.BytesToAddress(contract)},
			Proposal{
				Action:       action,
				ProposalID:   common.BytesToHash(proposalID),
				Wallet:       common.BytesToAddress(wallet),
				Path:         path,
				Organization: org,
				ContentType:  contentType,
				PaymentTier:  tier,
				MessageHash:  common.BytesToHash(messageHash),
			})
	})
}
