package signing

import (
	"crypto/ecdsa"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// Client registrations (POST /v1/register-client, docs/adr/0038): a wallet
// binds a client id to itself by signing the EIP-712 struct
//
//	ClientRegistration(string action,string clientId,address wallet)
//
// under the same domain as proposals (name, version, chain id, payment
// contract), with action fixed to ActionRegisterClient. Its type hash differs
// from Proposal's, so no proposal signature is a registration signature and
// no registration signature a proposal's; the domain stops its replay on
// another chain or against another contract. A registration is idempotent
// and never undone, so replaying it on the same cluster binds nothing new.
const (
	// ClientRegistrationType is the primary type of a registration.
	ClientRegistrationType = "ClientRegistration"
	// ActionRegisterClient is the action a registration names.
	ActionRegisterClient = "register-client"
	// MaxClientIDLen bounds a client id.
	MaxClientIDLen = 128
)

// ErrClientID is a client id that is empty, longer than MaxClientIDLen or
// has a character outside [A-Za-z0-9._:-].
var ErrClientID = errors.New("a client id is 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'")

// CheckClientID checks a client id's form.
func CheckClientID(id string) error {
	if len(id) == 0 || len(id) > MaxClientIDLen {
		return ErrClientID
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return ErrClientID
		}
	}
	return nil
}

// ClientRegistration is the signed struct of a registration. Field order and
// names are part of its type hash.
type ClientRegistration struct {
	ClientID string
	Wallet   common.Address
}

const clientRegistrationEncodeType = "ClientRegistration(string action,string clientId,address wallet)"

var (
	clientRegistrationTypeHash = crypto.Keccak256Hash([]byte(clientRegistrationEncodeType))
	// clientRegistrationFields is the type table wallets receive; never
	// modified (TypedData copies it).
	clientRegistrationFields = []apitypes.Type{
		{Name: "action", Type: "string"},
		{Name: "clientId", Type: "string"},
		{Name: "wallet", Type: "address"},
	}
)

// hashClientRegistration is hashStruct(ClientRegistration).
func hashClientRegistration(r ClientRegistration) common.Hash {
	var enc [4 * 32]byte
	copy(enc[0:32], clientRegistrationTypeHash[:])
	copy(enc[32:64], crypto.Keccak256([]byte(ActionRegisterClient)))
	copy(enc[64:96], crypto.Keccak256([]byte(r.ClientID)))
	copy(enc[96+12:128], r.Wallet[:])
	return crypto.Keccak256Hash(enc[:])
}

// ClientRegistrationData is the EIP-712 payload of r under d, as passed to
// eth_signTypedData_v4. It is freshly allocated.
func (d Domain) ClientRegistrationData(r ClientRegistration) apitypes.TypedData {
	return apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain":         append([]apitypes.Type(nil), eip712Domain...),
			ClientRegistrationType: append([]apitypes.Type(nil), clientRegistrationFields...),
		},
		PrimaryType: ClientRegistrationType,
		Domain:      d.typedDomain(),
		Message: apitypes.TypedDataMessage{
			"action": ActionRegisterClient, "clientId": r.ClientID, "wallet": r.Wallet.Hex(),
		},
	}
}

// ClientRegistrationDigest is the value a registration's signature signs.
func (s *Signer) ClientRegistrationDigest(r ClientRegistration) (common.Hash, error) {
	if s == nil || s.separator == (common.Hash{}) {
		return common.Hash{}, errors.New("signing: Signer not built by NewSigner")
	}
	return typedDataHash(s.separator, hashClientRegistration(r)), nil
}

// SignClientRegistration signs r with key (v in {27, 28}, low s).
func (s *Signer) SignClientRegistration(r ClientRegistration, key *ecdsa.PrivateKey) ([]byte, error) {
	if key == nil || key.D == nil || key.Curve == nil { //nolint:staticcheck // SA1019: checked because crypto.Sign uses it
		return nil, errors.New("signing: nil or incomplete private key")
	}
	h, err := s.ClientRegistrationDigest(r)
	if err != nil {
		return nil, err
	}
	return signDigest(h, key)
}

// VerifyClientRegistration checks that sig is r.Wallet's signature over r:
// the same signature rules as proposals (ParseSignature); a valid signature
// of another wallet, or over another client id, is ErrWrongSigner.
func (s *Signer) VerifyClientRegistration(r ClientRegistration, sig []byte) error {
	if err := checkSignature(sig); err != nil {
		return err
	}
	h, err := s.ClientRegistrationDigest(r)
	if err != nil {
		return err
	}
	got, err := recoverDigest(h, sig)
	if err != nil {
		return err
	}
	if got != r.Wallet {
		return fmt.Errorf("%w: recovered %s, expected %s", ErrWrongSigner, got.Hex(), r.Wallet.Hex())
	}
	return nil
}
