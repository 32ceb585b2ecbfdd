package signing

import (
	"crypto/ecdsa"
	"encoding/binary"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// referenceDigest is EIP-712 for Proposal written out by hand from the
// specification, independent of apitypes, as a second opinion in tests and
// fuzzing.
func referenceDigest(d Domain, p Proposal) common.Hash {
	k := crypto.Keccak256
	word := func(b []byte) []byte { return common.LeftPadBytes(b, 32) }
	var chain [8]byte
	binary.BigEndian.PutUint64(chain[:], d.ChainID)
	sep := k(
		k([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		k([]byte("ContentLedger")),
		k([]byte("1")),
		word(chain[:]),
		word(d.VerifyingContract[:]),
	)
	st := k(
		k([]byte("Proposal(string action,bytes32 proposalId,address wallet,string path,string organization,string contentType,string paymentTier,bytes32 messageHash)")),
		k([]byte(p.Action)),
		p.ProposalID[:],
		word(p.Wallet[:]),
		k([]byte(p.Path)),
		k([]byte(p.Organization)),
		k([]byte(p.ContentType)),
		k([]byte(p.PaymentTier)),
		p.MessageHash[:],
	)
	return crypto.Keccak256Hash([]byte{0x19, 0x01}, sep, st)
}

// testKey derives a fixed key from a label.
func testKey(t testing.TB, label string) *ecdsa.PrivateKey {
	t.Helper()
	key, err := crypto.ToECDSA(crypto.Keccak256([]byte(label)))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

var devDomain = Domain{
	ChainID:           1337,
	VerifyingContract: common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3"),
}

func sampleProposal(wallet common.Address) Proposal {
	return Proposal{
		Action:       ActionWrite,
		ProposalID:   crypto.Keccak256Hash([]byte("proposal-1")),
		Wallet:       wallet,
		Path:         "/acme/docs/readme.md",
		Organization: "acme",
		ContentType:  "text/markdown",
		PaymentTier:  "standard",
		MessageHash:  MessageHash([]byte("# Hello\n")),
	}
}
