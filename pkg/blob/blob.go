// Package blob names the binaries that content references: by the CID of
// the content-addressed storage network that keeps them (IPFS), and by a
// blob id, the SHA-256 of their bytes (docs/adr/0037). Validators store
// the CIDs, never the bytes.
package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

const (
	// MaxCIDBytes is the most a CID takes as validators store it: the
	// contract's 46-byte CIDv0 text, or a CIDv1's binary form (36 bytes
	// for the SHA-256 CIDs accepted).
	MaxCIDBytes = 46
	// maxCIDText bounds the text parsed, before any decoding.
	maxCIDText = 128
	// IDLength is the length of a blob id's text: 64 hex digits.
	IDLength = 2 * sha256.Size
)

// ErrCID is the error every refused CID wraps.
var ErrCID = errors.New("invalid CID")

// ParseCID parses a CID as content references it: a CIDv0 (base58btc,
// "Qm…", 46 characters) or a CIDv1 in its canonical text (base32, "b…")
// with the dag-pb or raw codec, hashed with SHA-256 (what IPFS adds and
// every trustless gateway verifies). Other texts of the same CIDv1 are
// refused with the canonical one named, so that what a wallet signed is
// what validators store.
func ParseCID(s string) (cid.Cid, error) {
	if s == "" || len(s) > maxCIDText {
		return cid.Undef, fmt.Errorf("%w: must be a CIDv0 (Qm…) or a CIDv1 in base32 (b…) of at most %d characters", ErrCID, maxCIDText)
	}
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("%w %q: %v", ErrCID, s, err)
	}
	p := c.Prefix()
	if p.Codec != cid.DagProtobuf && p.Codec != cid.Raw {
		return cid.Undef, fmt.Errorf("%w %q: codec 0x%x; a binary is a UnixFS file (dag-pb, 0x70) or a raw block (0x55)", ErrCID, s, p.Codec)
	}
	if p.MhType != multihash.SHA2_256 || p.MhLength != sha256.Size {
		return cid.Undef, fmt.Errorf("%w %q: multihash 0x%x/%d; only sha2-256 (0x12/32) is accepted", ErrCID, s, p.MhType, p.MhLength)
	}
	if canonical := c.String(); canonical != s {
		return cid.Undef, fmt.Errorf("%w %q: not in canonical form; write it as %s", ErrCID, s, canonical)
	}
	return c, nil
}

// CIDFromBytes parses a CID's binary form as validators store it.
func CIDFromBytes(b []byte) (cid.Cid, error) {
	if len(b) == 0 || len(b) > MaxCIDBytes {
		return cid.Undef, fmt.Errorf("%w: %d bytes", ErrCID, len(b))
	}
	n, c, err := cid.CidFromBytes(b)
	if err != nil || n != len(b) {
		return cid.Undef, fmt.Errorf("%w: %x", ErrCID, b)
	}
	return c, nil
}

// ID is a blob id: the SHA-256 of the blob's bytes. Two uploads of the
// same bytes have the same id, whatever their CIDs (a CIDv0 and a CIDv1 of
// one file differ).
type ID [sha256.Size]byte

// IDOf returns the blob id of b.
func IDOf(b []byte) ID { return sha256.Sum256(b) }

// String is the id's text: 64 lowercase hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses a blob id's text: 64 hex digits, optionally followed by
// "#" and the blob's length in bytes, as Oak's data store writes its blob
// ids. size is -1 when the text carries no length.
func ParseID(s string) (id ID, size int64, err error) {
	size = -1
	text, length, hasLength := strings.Cut(s, "#")
	if hasLength {
		n, perr := strconv.ParseInt(length, 10, 64)
		if perr != nil || n < 0 || (len(length) > 1 && length[0] == '0') {
			return ID{}, 0, fmt.Errorf("blob id %q: the length after # must be a decimal number of bytes", s)
		}
		size = n
	}
	if len(text) != IDLength {
		return ID{}, 0, fmt.Errorf("blob id %q: must be the SHA-256 of the bytes, %d hex digits (optionally #<length>)", s, IDLength)
	}
	if _, err := hex.Decode(id[:], []byte(strings.ToLower(text))); err != nil {
		return ID{}, 0, fmt.Errorf("blob id %q: must be %d hex digits", s, IDLength)
	}
	return id, size, nil
}
