package signing

import (
	"crypto/ecdsa"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// BlobIntent is what a wallet signs to declare a binary upload
// (docs/adr/0037): the binary's size, MIME type and SHA-256, under an
// intent id the wallet picks at random. The id is the intent's token, so
// a captured signature declares nothing new: submitting it again names the
// same intent. It is signed under the same domain as proposals, so it is
// bound to one chain and contract, and its own type keeps it from ever
// being read as a proposal.
type BlobIntent struct {
	IntentID    common.Hash
	Wallet      common.Address
	Size        uint64
	MimeType    string
	ContentHash common.Hash // SHA-256 of the bytes: the blob id
}

// IntentPrimaryType is BlobIntent's EIP-712 type name.
const IntentPrimaryType = "BlobIntent"

var (
	blobIntentType = []apitypes.Type{
		{Name: "intentId", Type: "bytes32"},
		{Name: "wallet", Type: "address"},
		{Name: "size", Type: "uint256"},
		{Name: "mimeType", Type: "string"},
		{Name: "contentHash", Type: "bytes32"},
	}
	blobIntentTypeHash = crypto.Keccak256Hash([]byte(blobIntentEncodeType))
)

const blobIntentEncodeType = "BlobIntent(bytes32 intentId,address wallet,uint256 size,string mimeType,bytes32 contentHash)"

// IntentTypedData returns the EIP-712 payload for i, as passed to
// eth_signTypedData_v4.
func (d Domain) IntentTypedData(i BlobIntent) apitypes.TypedData {
	return apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain":    append([]apitypes.Type(nil), eip712Domain...),
			IntentPrimaryType: append([]apitypes.Type(nil), blobIntentType...),
		},
		PrimaryType: IntentPrimaryType,
		Domain:      d.typedDomain(),
		Message: apitypes.TypedDataMessage{
			"intentId":    i.IntentID.Hex(),
			"wallet":      i.Wallet.Hex(),
			"size":        (*math.HexOrDecimal256)(new(big.Int).SetUint64(i.Size)),
			"mimeType":    i.MimeType,
			"contentHash": i.ContentHash.Hex(),
		},
	}
}

// hashIntent is hashStruct(BlobIntent). It is not on a hot path: one
// declaration per upload.
func hashIntent(i *BlobIntent) common.Hash {
	var enc [6 * 32]byte
	copy(enc[0:32], blobIntentTypeHash[:])
	copy(enc[32:64], i.IntentID[:])
	copy(enc[64+12:96], i.Wallet[:])
	binary.BigEndian.PutUint64(enc[96+24:128], i.Size)
	copy(enc[128:160], crypto.Keccak256([]byte(i.MimeType)))
	copy(enc[160:192], i.ContentHash[:])
	return crypto.Keccak256Hash(enc[:])
}

// IntentDigest is the EIP-712 hash of i, the value that is signed.
func (s *Signer) IntentDigest(i BlobIntent) common.Hash {
	return typedDataHash(s.separator, hashIntent(&i))
}

// SignIntent signs i with key (r‖s‖v, v in {27, 28}).
func (s *Signer) SignIntent(i BlobIntent, key *ecdsa.PrivateKey) ([]byte, error) {
	if key == nil || key.D == nil || key.Curve == nil { //nolint:staticcheck // SA1019: checked because crypto.Sign uses it
		return nil, errors.New("signing: nil or incomplete private key")
	}
	return signDigest(s.IntentDigest(i), key)
}

// VerifyIntent checks that sig is wallet's signature over i, and that i
// names wallet.
func (s *Signer) VerifyIntent(i BlobIntent, sig []byte, wallet common.Address) error {
	if i.Wallet != wallet {
		return fmt.Errorf("%w: intent names %s, expected %s", ErrWrongSigner, i.Wallet.Hex(), wallet.Hex())
	}
	if err := checkSignature(sig); err != nil {
		return err
	}
	got, err := recoverDigest(s.IntentDigest(i), sig)
	if err != nil {
		return err
	}
	if got != wallet {
		return fmt.Errorf("%w: recovered %s, expected %s", ErrWrongSigner, got.Hex(), wallet.Hex())
	}
	return nil
}
