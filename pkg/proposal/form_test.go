package proposal

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
)

const (
	testID     = "0x9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c0b2d4f6e8a1c3e5b7d9f0a2c4e6b8d0f"
	testWallet = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	testTx     = "0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef"
	// A well-formed signature; these tests check shape only.
	testSig = "0x" + "1111111111111111111111111111111111111111111111111111111111111111" +
		"1111111111111111111111111111111111111111111111111111111111111111" + "1b"
)

func validWrite() url.Values {
	return url.Values{
		FieldProposalID:     {testID},
		FieldWalletAddress:  {testWallet},
		FieldMessage:        {`{"jcr:primaryType":"cq:Page","title":"Hello"}`},
		FieldEthereumTxHash: {testTx},
		FieldSignature:      {testSig},
		FieldOrganization:   {"acme"},
		FieldContentType:    {"page"},
		FieldPaymentTier:    {"express"},
	}
}

func TestParseWriteValid(t *testing.T) {
	s, err := ParseWrite(validWrite(), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := "/ledger/f3/9f/d6/0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266/acme/page/9f2c4e6a8b0d1f3e"
	if s.Path != want {
		t.Fatalf("path %s, want %s", s.Path, want)
	}
	if s.Class != payment.Express || s.Organization != "acme" || s.ContentType != "page" || len(s.Signature) != 65 {
		t.Fatalf("parsed %+v", s)
	}
	if s.Wallet != common.HexToAddress(testWallet) || s.EthereumTxHash != common.HexToHash(testTx) {
		t.Fatal("wallet or tx hash")
	}

	f := validWrite()
	f.Del(FieldOrganization)
	f.Del(FieldContentType)
	f.Del(FieldPaymentTier)
	f.Set(FieldPath, "pages/home/hero")
	s, err = ParseWrite(f, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s.Organization != DefaultOrganization || s.Class != payment.Standard || !strings.HasSuffix(s.Path, "/default/pages/home/hero") {
		t.Fatalf("defaults: %+v", s)
	}
	f.Set(FieldWalletAddress, strings.ToLower(testWallet))
	if _, err := ParseWrite(f, DefaultOptions()); err != nil {
		t.Fatalf("lowercase wallet: %v", err)
	}
	f.Del(FieldEthereumTxHash)
	opts := DefaultOptions()
	opts.RequireTxHash = false
	if _, err := ParseWrite(f, opts); err != nil {
		t.Fatalf("no tx hash in mock mode: %v", err)
	}
}

// TestParseWriteRejects has one case per field fault; each names its field.
func TestParseWriteRejects(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(url.Values)
		field string
		code  apierror.Code
	}{
		{"missing proposal id", func(f url.Values) { f.Del(FieldProposalID) }, FieldProposalID, apierror.InvalidField},
		{"short proposal id", func(f url.Values) { f.Set(FieldProposalID, testID[:65]) }, FieldProposalID, apierror.InvalidField},
		{"proposal id without 0x", func(f url.Values) { f.Set(FieldProposalID, testID[2:]+"00") }, FieldProposalID, apierror.InvalidField},
		{"non-hex proposal id", func(f url.Values) { f.Set(FieldProposalID, "0x"+strings.Repeat("g", 64)) }, FieldProposalID, apierror.InvalidField},
		{"missing wallet", func(f url.Values) { f.Del(FieldWalletAddress) }, FieldWalletAddress, apierror.InvalidField},
		{"short wallet", func(f url.Values) { f.Set(FieldWalletAddress, testWallet[:41]) }, FieldWalletAddress, apierror.InvalidField},
		{"bad checksum", func(f url.Values) { f.Set(FieldWalletAddress, "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266") }, FieldWalletAddress, apierror.InvalidField},
		{"zero wallet", func(f url.Values) { f.Set(FieldWalletAddress, "0x"+strings.Repeat("0", 40)) }, FieldWalletAddress, apierror.PathForbidden},
		{"missing message", func(f url.Values) { f.Del(FieldMessage) }, FieldMessage, apierror.InvalidField},
		{"empty message", func(f url.Values) { f.Set(FieldMessage, "") }, FieldMessage, apierror.InvalidField},
		{"broken JSON object", func(f url.Values) { f.Set(FieldMessage, `{"a":`) }, FieldMessage, apierror.InvalidField},
		{"system property", func(f url.Values) { f.Set(FieldMessage, `{"ledger:owner":"x"}`) }, FieldMessage, apierror.InvalidField},
		{"bad CID", func(f url.Values) { f.Set(FieldMessage, `{"ledger:cid":"QmTooShort"}`) }, FieldMessage, apierror.InvalidField},
		{"too large", func(f url.Values) { f.Set(FieldMessage, strings.Repeat("x", DefaultMaxMessageBytes+1)) }, FieldMessage, apierror.ContentTooLarge},
		{"missing tx hash", func(f url.Values) { f.Del(FieldEthereumTxHash) }, FieldEthereumTxHash, apierror.InvalidField},
		{"bad tx hash", func(f url.Values) { f.Set(FieldEthereumTxHash, "0x1234") }, FieldEthereumTxHash, apierror.InvalidField},
		{"missing signature", func(f url.Values) { f.Del(FieldSignature) }, FieldSignature, apierror.InvalidField},
		{"short signature", func(f url.Values) { f.Set(FieldSignature, testSig[:130]) }, FieldSignature, apierror.InvalidField},
		{"bad v", func(f url.Values) { f.Set(FieldSignature, testSig[:130]+"05") }, FieldSignature, apierror.InvalidField},
		{"uppercase organization", func(f url.Values) { f.Set(FieldOrganization, "Acme") }, FieldOrganization, apierror.InvalidField},
		{"organization with slash", func(f url.Values) { f.Set(FieldOrganization, "a/b") }, FieldOrganization, apierror.InvalidField},
		{"long organization", func(f url.Values) { f.Set(FieldOrganization, strings.Repeat("a", 65)) }, FieldOrganization, apierror.InvalidField},
		{"content type with slash", func(f url.Values) { f.Set(FieldContentType, "a/b") }, FieldContentType, apierror.InvalidField},
		{"content type dot-dot", func(f url.Values) { f.Set(FieldContentType, "..") }, FieldContentType, apierror.InvalidField},
		{"unknown tier", func(f url.Values) { f.Set(FieldPaymentTier, "gold") }, FieldPaymentTier, apierror.InvalidField},
		{"path with dot-dot", func(f url.Values) { f.Set(FieldPath, "a/../b") }, FieldPath, apierror.InvalidField},
		{"absolute path", func(f url.Values) { f.Set(FieldPath, "/a") }, FieldPath, apierror.InvalidField},
		{"path with empty segment", func(f url.Values) { f.Set(FieldPath, "a//b") }, FieldPath, apierror.InvalidField},
		{"path too deep", func(f url.Values) { f.Set(FieldPath, strings.Repeat("a/", MaxPathDepth)+"a") }, FieldPath, apierror.InvalidField},
		{"path with space", func(f url.Values) { f.Set(FieldPath, "a b") }, FieldPath, apierror.InvalidField},
		{"field given twice", func(f url.Values) { f.Add(FieldOrganization, "other") }, FieldOrganization, apierror.InvalidField},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := validWrite()
			tc.edit(f)
			_, err := ParseWrite(f, DefaultOptions())
			e := apierror.As(err)
			if e == nil {
				t.Fatalf("accepted: %v", err)
			}
			if e.Code != tc.code || e.Details["field"] != tc.field {
				t.Fatalf("got %s naming %v, want %s naming %s (%s)", e.Code, e.Details["field"], tc.code, tc.field, e.Message)
			}
		})
	}
}

func TestParseDelete(t *testing.T) {
	f := validWrite()
	f.Del(FieldMessage)
	f.Set(FieldPath, "page/9f2c4e6a8b0d1f3e")
	s, err := ParseDelete(f, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s.Action != Delete || s.MessageHash != (common.Hash{}) || !strings.HasSuffix(s.Path, "/acme/page/9f2c4e6a8b0d1f3e") {
		t.Fatalf("delete %+v", s)
	}
	f.Set(FieldMessage, "x")
	if e := apierror.As(func() error { _, err := ParseDelete(f, DefaultOptions()); return err }()); e == nil || e.Details["field"] != FieldMessage {
		t.Fatalf("delete with a message: %v", e)
	}
	f.Del(FieldMessage)
	f.Del(FieldPath)
	if e := apierror.As(func() error { _, err := ParseDelete(f, DefaultOptions()); return err }()); e == nil || e.Details["field"] != FieldPath {
		t.Fatalf("delete without a path: %v", e)
	}
}

func TestDigest(t *testing.T) {
	a, _ := ParseWrite(validWrite(), DefaultOptions())
	b, _ := ParseWrite(validWrite(), DefaultOptions())
	if a.Digest() != b.Digest() {
		t.Fatal("identical submissions differ")
	}
	f := validWrite()
	f.Set(FieldMessage, `{"title":"Changed"}`)
	c, _ := ParseWrite(f, DefaultOptions())
	if a.Digest() == c.Digest() {
		t.Fatal("different messages, same digest")
	}
	f = validWrite()
	f.Set(FieldSignature, "0x"+strings.Repeat("2", 128)+"1c")
	d, _ := ParseWrite(f, DefaultOptions())
	if a.Digest() != d.Digest() {
		t.Fatal("the signature changed the digest")
	}
}
