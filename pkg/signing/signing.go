// Package signing defines what a content proposal's author signs and checks
// those signatures (design decision D1).
//
// Authors sign an EIP-712 typed-data struct, Proposal, with their Ethereum
// wallet (eth_signTypedData_v4). Typed data rather than a personal_sign
// string lets wallets show every field to the user and binds the signature
// to one chain and one payment contract through the EIP-712 domain. Every
// field that decides what the network does with a proposal is in the struct
// and writes and deletes sign the same struct, so a captured signature
// cannot be replayed for another path, proposal, action, chain or contract.
//
// Hashing is go-ethereum's own EIP-712 implementation (signer/core/apitypes);
// tests pin it to the EIP-712 specification's example and to signatures
// made by ethers v6. See DESIGN.md for the reasoning.
//
// Clients and tests use [Sign]; validator nodes use [Verify], or a [Signer]
// built once per domain on hot paths.
package signing

import (
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// Domain and type constants. Changing any of them changes every digest and
// invalidates every signature clients have made, so they are fixed.
const (
	DomainName    = "ContentLedger"
	DomainVersion = "1"
	PrimaryType   = "Proposal"

	ActionWrite  = "write"
	ActionDelete = "delete"

	// SignatureLen is the length of r‖s‖v.
	SignatureLen = 65
)

// Errors returned by ParseSignature, Recover and Verify. They are wrapped
// with detail; test with errors.Is.
var (
	// ErrMalformedSignature: not 0x+130 hex, not 65 bytes, v outside
	// {0, 1, 27, 28}, r or s out of range, or no public key recovers.
	ErrMalformedSignature = errors.New("malformed signature")
	// ErrHighS: s > secp256k1n/2. Rejected so each signature has exactly one
	// accepted encoding (EIP-2); the twin (n-s, flipped v) is refused.
	ErrHighS = errors.New("signature s value is not canonical (high s)")
	// ErrWrongSigner: the signature is valid but was made by another wallet,
	// or over different data, or the proposal names another wallet.
	ErrWrongSigner = errors.New("signature is not from the proposal's wallet")
)

// Domain is the variable part of the EIP-712 domain; name and version are
// fixed. In MOCK mode both come from config (dev chain 1337 and its deployed
// contract, or the zero address when no chain runs at all).
type Domain struct {
	ChainID           uint64
	VerifyingContract common.Address // the payment contract
}

// Proposal is the signed struct. Field order and names are part of the
// EIP-712 type hash and must match what clients sign.
type Proposal struct {
	Action       string // ActionWrite or ActionDelete
	ProposalID   common.Hash
	Wallet       common.Address
	Path         string // the full content path the proposal targets
	Organization string
	ContentType  string
	PaymentTier  string      // lowercase class name, e.g. "standard"
	MessageHash  common.Hash // MessageHash(message); zero for deletes
}

// eip712Domain and proposalType are the type tables. They are never
// modified and never handed out: TypedData builds fresh copies for callers.
var (
	eip712Domain = []apitypes.Type{
		{Name: "name", Type: "string"},
		{Name: "version", Type: "string"},
		{Name: "chainId", Type: "uint256"},
		{Name: "verifyingContract", Type: "address"},
	}
	proposalType = []apitypes.Type{
		{Name: "action", Type: "string"},
		{Name: "proposalId", Type: "bytes32"},
		{Name: "wallet", Type: "address"},
		{Name: "path", Type: "string"},
		{Name: "organization", Type: "string"},
		{Name: "contentType", Type: "string"},
		{Name: "paymentTier", Type: "string"},
		{Name: "messageHash", Type: "bytes32"},
	}
	hashTypes = apitypes.Types{"EIP712Domain": eip712Domain, PrimaryType: proposalType}
)

// MessageHash is keccak256 of the exact message bytes, the value of
// Proposal.MessageHash for writes. Signing the hash rather than the message
// keeps the struct small for wallets while still binding the content.
func MessageHash(message []byte) common.Hash {
	return crypto.Keccak256Hash(message)
}

// typedDomain is the apitypes form of d.
func (d Domain) typedDomain() apitypes.TypedDataDomain {
	return apitypes.TypedDataDomain{
		Name:              DomainName,
		Version:           DomainVersion,
		ChainId:           (*math.HexOrDecimal256)(new(big.Int).SetUint64(d.ChainID)),
		VerifyingContract: d.VerifyingContract.Hex(),
	}
}

// message is the apitypes form of p for export: hex strings, as wallets and
// JSON want them (addresses EIP-55 checksummed).
func (p Proposal) message() apitypes.TypedDataMessage {
	return apitypes.TypedDataMessage{
		"action":       p.Action,
		"proposalId":   p.ProposalID.Hex(),
		"wallet":       p.Wallet.Hex(),
		"path":         p.Path,
		"organization": p.Organization,
		"contentType":  p.ContentType,
		"paymentTier":  p.PaymentTier,
		"messageHash":  p.MessageHash.Hex(),
	}
}

// hashMessage is message with raw bytes instead of hex, which apitypes
// encodes identically (tests check the JSON export hashes to Digest) but
// without hex round trips and the checksum's extra keccak on the hot path.
func (p *Proposal) hashMessage() apitypes.TypedDataMessage {
	return apitypes.TypedDataMessage{
		"action":       p.Action,
		"proposalId":   p.ProposalID[:],
		"wallet":       p.Wallet[:],
		"path":         p.Path,
		"organization": p.Organization,
		"contentType":  p.ContentType,
		"paymentTier":  p.PaymentTier,
		"messageHash":  p.MessageHash[:],
	}
}

// TypedData returns the full EIP-712 payload for p, as passed to
// eth_signTypedData_v4. It is freshly allocated; callers may modify it.
func (d Domain) TypedData(p Proposal) apitypes.TypedData {
	return apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": append([]apitypes.Type(nil), eip712Domain...),
			PrimaryType:    append([]apitypes.Type(nil), proposalType...),
		},
		PrimaryType: PrimaryType,
		Domain:      d.typedDomain(),
		Message:     p.message(),
	}
}

// Digest is the 32-byte EIP-712 hash of p under d, the value that is signed.
// It hashes the domain separator afresh; use a Signer to reuse it.
func (d Domain) Digest(p Proposal) (common.Hash, error) {
	s, err := NewSigner(d)
	if err != nil {
		return common.Hash{}, err
	}
	return s.Digest(p)
}

// Signer signs and verifies proposals for one Domain. It caches the domain
// separator, which is the same for every proposal. A Signer is immutable
// and safe for concurrent use; build it with NewSigner.
type Signer struct {
	domain    Domain
	shell     apitypes.TypedData // types and domain; apitypes validates both
	separator common.Hash
}

// NewSigner computes d's domain separator.
func NewSigner(d Domain) (*Signer, error) {
	s := &Signer{
		domain: d,
		shell:  apitypes.TypedData{Types: hashTypes, PrimaryType: PrimaryType, Domain: d.typedDomain()},
	}
	sep, err := domainSeparator(&s.shell)
	if err != nil {
		return nil, err
	}
	s.separator = sep
	return s, nil
}

// domainSeparator is hashStruct(EIP712Domain) of td's domain.
func domainSeparator(td *apitypes.TypedData) (common.Hash, error) {
	sep, err := td.HashStruct("EIP712Domain", td.Domain.Map())
	if err != nil {
		return common.Hash{}, fmt.Errorf("signing: domain separator: %w", err)
	}
	return common.BytesToHash(sep), nil
}

// Domain returns the domain s was built for.
func (s *Signer) Domain() Domain { return s.domain }

// DomainSeparator returns hashStruct(EIP712Domain) for s's domain.
func (s *Signer) DomainSeparator() common.Hash { return s.separator }

// Digest is keccak256(0x19 0x01 ‖ domainSeparator ‖ hashStruct(p)).
func (s *Signer) Digest(p Proposal) (common.Hash, error) {
	if s == nil {
		return common.Hash{}, errors.New("signing: nil Signer")
	}
	return digest(&s.shell, s.separator, p.hashMessage())
}

// digest is the EIP-712 encoding. Signer and the tests' specification
// example share it (and domainSeparator, signDigest, recoverDigest), so the
// spec vector exercises the production path.
func digest(td *apitypes.TypedData, separator common.Hash, msg apitypes.TypedDataMessage) (common.Hash, error) {
	structHash, err := td.HashStruct(td.PrimaryType, msg)
	if err != nil {
		return common.Hash{}, fmt.Errorf("signing: hash %s: %w", td.PrimaryType, err)
	}
	return crypto.Keccak256Hash([]byte{0x19, 0x01}, separator[:], structHash), nil
}

// Sign signs p with key and returns r‖s‖v with v in {27, 28}, the form
// wallets produce. Nonces are RFC 6979, so the result is deterministic and
// matches ethers' for the same key and data; s is always low.
func (s *Signer) Sign(p Proposal, key *ecdsa.PrivateKey) ([]byte, error) {
	// go-ethereum's crypto.Sign reads the raw scalar and panics on a nil one.
	if key == nil || key.D == nil || key.Curve == nil { //nolint:staticcheck // SA1019: checked because crypto.Sign uses it
		return nil, errors.New("signing: nil or incomplete private key")
	}
	h, err := s.Digest(p)
	if err != nil {
		return nil, err
	}
	return signDigest(h, key)
}

func signDigest(h common.Hash, key *ecdsa.PrivateKey) ([]byte, error) {
	sig, err := crypto.Sign(h[:], key)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	sig[64] += 27
	return sig, nil
}

// Recover returns the address that signed p. sig must pass the same checks
// as ParseSignature; v may be 0/1 or 27/28. sig is not modified.
func (s *Signer) Recover(p Proposal, sig []byte) (common.Address, error) {
	if err := checkSignature(sig); err != nil {
		return common.Address{}, err
	}
	h, err := s.Digest(p)
	if err != nil {
		return common.Address{}, err
	}
	return recoverDigest(h, sig)
}

// recoverDigest recovers the signer of h from a checked signature.
func recoverDigest(h common.Hash, sig []byte) (common.Address, error) {
	var rsv [SignatureLen]byte // crypto wants v in {0, 1}; don't touch sig
	copy(rsv[:], sig)
	if rsv[64] >= 27 {
		rsv[64] -= 27
	}
	pub, err := crypto.Ecrecover(h[:], rsv[:])
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: %v", ErrMalformedSignature, err)
	}
	// pub is 0x04 ‖ X ‖ Y; the address is the low 20 bytes of keccak(X ‖ Y).
	return common.BytesToAddress(crypto.Keccak256(pub[1:])[12:]), nil
}

// Verify checks that sig is wallet's signature over p. It also requires
// p.Wallet == wallet: the signed struct must name the wallet that is
// charged and credited, not just be signed by it. Addresses are compared as
// 20-byte values, so hex case never matters. Verify never panics.
func (s *Signer) Verify(p Proposal, sig []byte, wallet common.Address) error {
	if p.Wallet != wallet {
		return fmt.Errorf("%w: proposal names %s, expected %s", ErrWrongSigner, p.Wallet.Hex(), wallet.Hex())
	}
	got, err := s.Recover(p, sig)
	if err != nil {
		return err
	}
	if got != wallet {
		return fmt.Errorf("%w: recovered %s, expected %s", ErrWrongSigner, got.Hex(), wallet.Hex())
	}
	return nil
}

// Sign signs p under d with key; see Signer.Sign.
func Sign(d Domain, p Proposal, key *ecdsa.PrivateKey) ([]byte, error) {
	s, err := NewSigner(d)
	if err != nil {
		return nil, err
	}
	return s.Sign(p, key)
}

// Recover returns the address that signed p under d; see Signer.Recover.
func Recover(d Domain, p Proposal, sig []byte) (common.Address, error) {
	s, err := NewSigner(d)
	if err != nil {
		return common.Address{}, err
	}
	return s.Recover(p, sig)
}

// Verify checks that sig is wallet's signature over p under d; see
// Signer.Verify.
func Verify(d Domain, p Proposal, sig []byte, wallet common.Address) error {
	s, err := NewSigner(d)
	if err != nil {
		return err
	}
	return s.Verify(p, sig, wallet)
}

// ParseSignature decodes the wire form "0x" + 130 hex digits (either case)
// into 65 bytes r‖s‖v, rejecting anything Recover would reject except a
// failed recovery. v 0/1 is returned as 27/28: together with the low-s rule
// every accepted signature then has exactly one byte encoding.
func ParseSignature(s string) ([]byte, error) {
	if len(s) != 2+2*SignatureLen || s[:2] != "0x" {
		return nil, fmt.Errorf("%w: want 0x followed by %d hex digits", ErrMalformedSignature, 2*SignatureLen)
	}
	sig, err := hex.DecodeString(s[2:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedSignature, err)
	}
	if err := checkSignature(sig); err != nil {
		return nil, err
	}
	if sig[64] < 27 {
		sig[64] += 27
	}
	return sig, nil
}

// secp256k1 group order n and n/2, big-endian. Constants, never written.
var (
	secp256k1N = [32]byte{
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
		0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
	}
	secp256k1HalfN = [32]byte{
		0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
	}
)

// checkSignature validates the shape of r‖s‖v: length, v, 0 < r < n and
// 0 < s <= n/2 (s in (n/2, n) is ErrHighS). Byte comparison works because both are 32-byte big-endian.
func checkSignature(sig []byte) error {
	if len(sig) != SignatureLen {
		return fmt.Errorf("%w: %d bytes, want %d", ErrMalformedSignature, len(sig), SignatureLen)
	}
	switch v := sig[64]; v {
	case 0, 1, 27, 28:
	default:
		return fmt.Errorf("%w: v = %d, want 0, 1, 27 or 28", ErrMalformedSignature, v)
	}
	r, sv := sig[:32], sig[32:64]
	if isZero(r) || string(r) >= string(secp256k1N[:]) {
		return fmt.Errorf("%w: r out of range", ErrMalformedSignature)
	}
	if isZero(sv) || string(sv) >= string(secp256k1N[:]) {
		return fmt.Errorf("%w: s out of range", ErrMalformedSignature)
	}
	if string(sv) > string(secp256k1HalfN[:]) {
		return ErrHighS
	}
	return nil
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
