// Package signing defines what a content proposal's author signs and checks
// those signatures (ADR 0002).
//
// Authors sign an EIP-712 typed-data struct, Proposal, with their Ethereum
// wallet (eth_signTypedData_v4). Typed data rather than a personal_sign
// string lets wallets show every field to the user and binds the signature
// to one chain and one payment contract through the EIP-712 domain. Every
// field that decides what the network does with a proposal is in the struct
// and writes and deletes sign the same struct, so a captured signature
// cannot be replayed for another path, proposal, action, chain or contract.
//
// The EIP-712 encoding of the two fixed structs is written out here rather
// than left to go-ethereum's generic encoder (signer/core/apitypes), which
// costs several times as much on the leader's hot path; tests pin it to the
// EIP-712 specification's example, to signatures made by ethers v6 and to
// apitypes. See DESIGN.md for the reasoning.
//
// Clients and tests use [Sign]; validator nodes use [Verify], or a [Signer]
// built once per domain on hot paths.
package signing

import (
	"crypto/ecdsa"
	"encoding/binary"
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

// eip712Domain and proposalType are the type tables wallets receive. They
// are never modified and never handed out: TypedData builds fresh copies
// for callers. Hashing does not read them; it uses the encodeType strings
// below, which TestEncodeType holds to these tables.
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
)

// encodeType of the two structs as EIP-712 spells them, and their keccak256,
// the type hashes that start each struct's encoding. Computed once; never
// written.
const (
	domainEncodeType   = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
	proposalEncodeType = "Proposal(string action,bytes32 proposalId,address wallet,string path," +
		"string organization,string contentType,string paymentTier,bytes32 messageHash)"
)

var (
	domainTypeHash   = crypto.Keccak256Hash([]byte(domainEncodeType))
	proposalTypeHash = crypto.Keccak256Hash([]byte(proposalEncodeType))
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
	separator common.Hash
}

// NewSigner computes d's domain separator. Every Domain can be hashed, so
// the error is always nil; it stays so that callers need not change.
func NewSigner(d Domain) (*Signer, error) {
	return &Signer{domain: d, separator: domainSeparatorOf(DomainName, DomainVersion, d.ChainID, d.VerifyingContract)}, nil
}

// Domain returns the domain s was built for.
func (s *Signer) Domain() Domain { return s.domain }

// DomainSeparator returns hashStruct(EIP712Domain) for s's domain.
func (s *Signer) DomainSeparator() common.Hash { return s.separator }

// Digest is keccak256(0x19 0x01 ‖ domainSeparator ‖ hashStruct(p)).
func (s *Signer) Digest(p Proposal) (common.Hash, error) {
	// A zero Signer has no separator; signing under the zero hash would
	// bind signatures to no domain at all.
	if s == nil || s.separator == (common.Hash{}) {
		return common.Hash{}, errors.New("signing: Signer not built by NewSigner")
	}
	return typedDataHash(s.separator, hashProposal(&p)), nil
}

// The EIP-712 encoding of our two structs. Every member is one 32-byte word
// of encodeData: a string as its keccak256, a bytes32 as itself, an address
// left-padded with zeros, a uint256 big-endian.

// domainSeparatorOf is hashStruct(EIP712Domain). Name and version are
// parameters, though the Signer always passes DomainName and DomainVersion,
// so that the specification's example ("Ether Mail") runs through it.
func domainSeparatorOf(name, version string, chainID uint64, contract common.Address) common.Hash {
	var enc [5 * 32]byte
	copy(enc[0:32], domainTypeHash[:])
	copy(enc[32:64], crypto.Keccak256([]byte(name)))
	copy(enc[64:96], crypto.Keccak256([]byte(version)))
	binary.BigEndian.PutUint64(enc[96+24:128], chainID)
	copy(enc[128+12:160], contract[:])
	return crypto.Keccak256Hash(enc[:])
}

// proposalWords is the length of Proposal's encoding in 32-byte words: the
// type hash and its eight members.
const proposalWords = 1 + 8

// hashProposal is hashStruct(Proposal), keccak256 of the type hash and the
// members in the type's order.
func hashProposal(p *Proposal) common.Hash {
	// Whatever is handed to the hasher escapes to the heap (it is an
	// interface), so one buffer holds the encoding and, after it, stages
	// each string for hashing: two allocations per proposal, this buffer and
	// the hasher, instead of one per string and per word.
	const encLen = proposalWords * 32
	buf := make([]byte, encLen+max(len(p.Action), len(p.Path), len(p.Organization), len(p.ContentType), len(p.PaymentTier)))
	enc, staged := buf[:encLen], buf[encLen:]
	word := func(i int) []byte { return enc[32*i : 32*(i+1)] }
	h := crypto.NewKeccakState()
	hashInto := func(dst, data []byte) {
		h.Reset()
		h.Write(data)
		_, _ = h.Read(dst) // squeezing a Keccak sponge cannot fail
	}
	hashString := func(i int, s string) { hashInto(word(i), staged[:copy(staged, s)]) }
	copy(word(0), proposalTypeHash[:])
	hashString(1, p.Action)
	copy(word(2), p.ProposalID[:])
	copy(word(3)[12:], p.Wallet[:])
	hashString(4, p.Path)
	hashString(5, p.Organization)
	hashString(6, p.ContentType)
	hashString(7, p.PaymentTier)
	copy(word(8), p.MessageHash[:])

	hashInto(word(0), enc) // enc is absorbed before the result overwrites its first word
	return common.Hash(word(0))
}

// typedDataHash is the EIP-712 digest of a struct: keccak256(0x19 0x01 ‖
// domain separator ‖ hashStruct).
func typedDataHash(separator, structHash common.Hash) common.Hash {
	var b [2 + 2*32]byte
	b[0], b[1] = 0x19, 0x01
	copy(b[2:34], separator[:])
	copy(b[34:66], structHash[:])
	return crypto.Keccak256Hash(b[:])
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
