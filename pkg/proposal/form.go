// Package proposal parses and validates proposal submissions (ADR 0002 to
// 0004): the form fields of POST /v1/propose-write and /v1/propose-delete,
// the content path a proposal targets, and the expansion of a message into
// content nodes. Every error names the offending field, so a client can fix
// its request without guessing.
package proposal

import (
	"crypto/sha256"
	"encoding/binary"
	"net/url"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/signing"
)

// Action is what a proposal does.
type Action string

const (
	Write  Action = "write"
	Delete Action = "delete"
)

// Form field names, as the contract spells them.
const (
	FieldProposalID     = "proposalId"
	FieldWalletAddress  = "walletAddress"
	FieldMessage        = "message"
	FieldEthereumTxHash = "ethereumTxHash"
	FieldSignature      = "signature"
	FieldOrganization   = "organization"
	FieldContentType    = "contentType"
	FieldPaymentTier    = "paymentTier"
	FieldPath           = "path"
)

// DefaultMaxMessageBytes is the default limit on a message (1 MiB).
const DefaultMaxMessageBytes = 1 << 20

// Options tunes parsing. The zero value is not valid; start from
// DefaultOptions.
type Options struct {
	// ContentRoot is the first segment of every content path.
	ContentRoot string
	// MaxMessageBytes bounds the message field.
	MaxMessageBytes int
	// RequireTxHash makes ethereumTxHash mandatory (chain-backed modes).
	RequireTxHash bool
}

// DefaultOptions returns the defaults: root "ledger", 1 MiB messages, and a
// transaction hash required.
func DefaultOptions() Options {
	return Options{ContentRoot: DefaultContentRoot, MaxMessageBytes: DefaultMaxMessageBytes, RequireTxHash: true}
}

// Submission is a parsed, validated proposal form. Its signature has the
// right shape but is not yet verified against the wallet.
type Submission struct {
	Action         Action
	ProposalID     common.Hash
	Wallet         common.Address
	Message        []byte
	MessageHash    common.Hash // zero for deletes
	EthereumTxHash common.Hash // zero when absent
	Signature      []byte      // 65 bytes
	Organization   string
	ContentType    string
	Class          payment.Class
	SubPath        string // path below the organization
	Path           string // full content path
}

// hexString reports whether s is "0x" followed by exactly digits hex digits.
func hexString(s string, digits int) bool {
	if len(s) != 2+digits || s[:2] != "0x" {
		return false
	}
	return allBytes(s[2:], func(c byte) bool {
		return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
	})
}

// decodeHex fills dst from s when s is "0x" followed by exactly 2*len(dst)
// hex digits, and reports whether it was. Decoding into the caller's array
// keeps intake from allocating for every hash and address it parses.
func decodeHex(dst []byte, s string) bool {
	if !hexString(s, 2*len(dst)) {
		return false
	}
	for i := range dst {
		dst[i] = hexValue(s[2+2*i])<<4 | hexValue(s[3+2*i])
	}
	return true
}

// ParseHash decodes s when it is "0x" followed by exactly 64 hex digits in
// either case, the form of proposal ids and transaction hashes, and reports
// whether it was.
func ParseHash(s string) (common.Hash, bool) {
	var h common.Hash
	ok := decodeHex(h[:], s)
	return h, ok
}

// hexValue is the value of a hex digit hexString has accepted.
func hexValue(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// FormFieldsBytes is what a proposal form may carry beyond its message:
// every other field is bounded and small, and intake reads no more (a
// route's body limit is the message, encoded, plus this).
const FormFieldsBytes = 64 << 10

// ParseWrite parses the form of POST /v1/propose-write.
func ParseWrite(form url.Values, opts Options) (*Submission, error) {
	return parse(Write, form, opts)
}

// ParseDelete parses the form of POST /v1/propose-delete. It takes the same
// fields as a write; path is required and message must be absent or empty.
func ParseDelete(form url.Values, opts Options) (*Submission, error) {
	return parse(Delete, form, opts)
}

// parse checks fields in a fixed order, so that a form with several faults
// always reports the same one first.
func parse(action Action, form url.Values, opts Options) (*Submission, error) {
	s := &Submission{Action: action}
	for field, values := range form {
		if len(values) > 1 {
			return nil, apierror.Field(field, "given %d times; give it once", len(values))
		}
	}
	get := func(field string) string { return form.Get(field) }

	id, ok := ParseHash(get(FieldProposalID))
	if !ok {
		return nil, apierror.Field(FieldProposalID, "must be 0x followed by 64 hex digits")
	}
	s.ProposalID = id

	wallet, err := parseAddress(get(FieldWalletAddress))
	if err != nil {
		return nil, err
	}
	if wallet == (common.Address{}) {
		return nil, apierror.New(apierror.PathForbidden, "the zero wallet's subtree is reserved").WithDetail("field", FieldWalletAddress)
	}
	s.Wallet = wallet

	msg, present := form[FieldMessage]
	switch {
	case action == Write && (!present || len(msg[0]) == 0):
		return nil, apierror.Field(FieldMessage, "is required")
	case action == Delete && present && len(msg[0]) > 0:
		return nil, apierror.Field(FieldMessage, "must be empty for a delete")
	case present && len(msg[0]) > opts.MaxMessageBytes:
		return nil, apierror.New(apierror.ContentTooLarge, "message is %d bytes, the limit is %d", len(msg[0]), opts.MaxMessageBytes).
			WithDetail("field", FieldMessage).WithDetail("limit", opts.MaxMessageBytes)
	}
	if action == Write {
		s.Message = []byte(msg[0])
		s.MessageHash = signing.MessageHash(s.Message)
	}

	switch tx := get(FieldEthereumTxHash); {
	case tx == "" && opts.RequireTxHash:
		return nil, apierror.Field(FieldEthereumTxHash, "is required on a chain-backed network")
	case tx == "":
	default:
		if s.EthereumTxHash, ok = ParseHash(tx); !ok {
			return nil, apierror.Field(FieldEthereumTxHash, "must be 0x followed by 64 hex digits")
		}
	}

	sig, err := signing.ParseSignature(get(FieldSignature))
	if err != nil {
		return nil, apierror.Field(FieldSignature, "%v", err)
	}
	s.Signature = sig

	s.Organization = DefaultOrganization
	if org := get(FieldOrganization); org != "" {
		if !ValidOrganization(org) {
			return nil, apierror.Field(FieldOrganization, "must match [a-z0-9][a-z0-9_-]{0,63}")
		}
		s.Organization = org
	}

	if ct := get(FieldContentType); ct != "" {
		if !ValidContentType(ct) {
			return nil, apierror.Field(FieldContentType, "must be 1-64 of [A-Za-z0-9._:-] (and not . or ..)")
		}
		s.ContentType = ct
	}

	s.Class = payment.Standard
	if tier := get(FieldPaymentTier); tier != "" {
		c, err := payment.ParseClass(tier)
		if err != nil {
			return nil, apierror.Field(FieldPaymentTier, "must be standard, express or priority")
		}
		s.Class = c
	}

	switch sub := get(FieldPath); {
	case sub == "" && action == Delete:
		return nil, apierror.Field(FieldPath, "is required for a delete")
	case sub == "":
		s.SubPath = DefaultSubPath(s.ContentType, s.ProposalID)
	default:
		if err := CheckSubPath(sub); err != nil {
			return nil, apierror.Field(FieldPath, "%v", err)
		}
		s.SubPath = sub
	}
	s.Path = ContentPath(opts.ContentRoot, s.Wallet, s.Organization, s.SubPath)

	if action == Write {
		if err := checkMessage(s.Path, s.Message); err != nil {
			return nil, apierror.Field(FieldMessage, "%v", err)
		}
	}
	return s, nil
}

// parseAddress accepts a 0x-prefixed address in one letter case, or in mixed
// case only with a valid EIP-55 checksum: a wrong checksum is a typo.
func parseAddress(s string) (common.Address, error) {
	var a common.Address
	if !decodeHex(a[:], s) {
		return common.Address{}, apierror.Field(FieldWalletAddress, "must be 0x followed by 40 hex digits")
	}
	if mixedCase(s[2:]) && a.Hex() != s {
		return common.Address{}, apierror.Field(FieldWalletAddress, "mixed-case address fails its EIP-55 checksum")
	}
	return a, nil
}

// mixedCase reports whether hex digits hold both upper- and lowercase
// letters, the only form that carries an EIP-55 checksum.
func mixedCase(digits string) bool {
	var upper, lower bool
	for i := range len(digits) {
		upper = upper || 'A' <= digits[i] && digits[i] <= 'F'
		lower = lower || 'a' <= digits[i] && digits[i] <= 'f'
	}
	return upper && lower
}

// Typed returns the EIP-712 struct the wallet signed for this submission.
func (s *Submission) Typed() signing.Proposal {
	return signing.Proposal{
		Action:       string(s.Action),
		ProposalID:   s.ProposalID,
		Wallet:       s.Wallet,
		Path:         s.Path,
		Organization: s.Organization,
		ContentType:  s.ContentType,
		PaymentTier:  s.Class.Name(),
		MessageHash:  s.MessageHash,
	}
}

// Digest identifies the submission's content: two submissions with the same
// proposal id are identical exactly when their digests are equal (ADR
// 0003). The signature is left out: ECDSA signatures of one payload may differ,
// and the signed payload is covered field by field.
func (s *Submission) Digest() common.Hash {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(s.Action))
	field(s.ProposalID[:])
	field(s.Wallet[:])
	field([]byte(s.Path))
	field([]byte(s.Organization))
	field([]byte(s.ContentType))
	field([]byte(s.Class.Name()))
	field(s.MessageHash[:])
	field(s.EthereumTxHash[:])
	return common.BytesToHash(h.Sum(nil))
}
