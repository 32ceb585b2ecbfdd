package proposal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/blob"
)

const (
	// DefaultContentRoot is the first path segment of all content.
	DefaultContentRoot = "ledger"
	// DefaultOrganization is used when a proposal names none.
	DefaultOrganization = "default"
	// DefaultContentType is the default path's first segment when a proposal
	// names no content type.
	DefaultContentType = "content"
	// MaxPathDepth bounds the segments below the organization.
	MaxPathDepth = 32
	// maxFullDepth bounds the segments of a full path: root, three fan-out
	// segments, wallet and organization, then MaxPathDepth below.
	maxFullDepth = 6 + MaxPathDepth
)

// The character classes below are checked by hand rather than with regexp:
// they run several times for every proposal at intake and at apply.
// TestCharacterClassesMatchTheirRegexps holds them to the expressions.

// segmentByte: [A-Za-z0-9._:-]
func segmentByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

// allBytes reports whether s is not empty and every byte satisfies ok.
func allBytes(s string, ok func(byte) bool) bool {
	for i := range len(s) {
		if !ok(s[i]) {
			return false
		}
	}
	return s != ""
}

// ErrPath is wrapped by path validation errors.
var ErrPath = errors.New("invalid path")

func validSegment(s string) bool {
	return s != "." && s != ".." && allBytes(s, segmentByte)
}

// ValidOrganization reports whether s is an allowed organization name.
// ^[a-z0-9][a-z0-9_-]{0,63}$
func ValidOrganization(s string) bool {
	lowerDigit := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	return len(s) <= 64 && s != "" && lowerDigit(s[0]) &&
		allBytes(s, func(c byte) bool { return lowerDigit(c) || c == '_' || c == '-' })
}

// ValidContentType reports whether s is an allowed content type label.
func ValidContentType(s string) bool { return len(s) <= 64 && validSegment(s) }

// CheckSubPath validates a node path below the organization: segments of
// [A-Za-z0-9._:-], no "." or "..", no empty segment, depth at most
// MaxPathDepth. A leading or trailing slash is not allowed.
func CheckSubPath(sub string) error {
	if sub == "" {
		return fmt.Errorf("%w: empty", ErrPath)
	}
	if n := strings.Count(sub, "/") + 1; n > MaxPathDepth {
		return fmt.Errorf("%w: %d segments, at most %d", ErrPath, n, MaxPathDepth)
	}
	for s := range strings.SplitSeq(sub, "/") {
		if !validSegment(s) {
			return fmt.Errorf("%w: segment %q is not [A-Za-z0-9._:-]+ (and not . or ..)", ErrPath, s)
		}
	}
	return nil
}

// WalletRoot returns /<root>/<xx>/<xx>/<xx>/<wallet>: the subtree a wallet
// owns, wallet lowercased with 0x.
func WalletRoot(root string, wallet common.Address) string {
	// Hex encoding by hand rather than lowercasing wallet.Hex(): that would
	// compute the EIP-55 checksum (a keccak256) only to throw it away.
	var w [2 + 2*common.AddressLength]byte
	copy(w[:], "0x")
	hex.Encode(w[2:], wallet[:])
	return "/" + root + "/" + string(w[2:4]) + "/" + string(w[4:6]) + "/" + string(w[6:8]) + "/" + string(w[:])
}

// ContentPath returns the full path of a node: the wallet root, the
// organization, then sub (already validated).
func ContentPath(root string, wallet common.Address, organization, sub string) string {
	return WalletRoot(root, wallet) + "/" + organization + "/" + sub
}

// DefaultSubPath is the node path used when a write names none:
// <contentType>/<first 16 hex of proposalId>.
func DefaultSubPath(contentType string, proposalID common.Hash) string {
	if contentType == "" {
		contentType = DefaultContentType
	}
	var prefix [16]byte
	hex.Encode(prefix[:], proposalID[:8])
	return contentType + "/" + string(prefix[:])
}

// ValidateCID accepts the CIDs content may reference (blob.ParseCID): a
// CIDv0 (46 characters, stored as is) or a CIDv1 in its canonical text.
func ValidateCID(cid string) error {
	_, err := blob.ParseCID(cid)
	return err
}
