package proposal

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// benchForms are proposal forms as clients send them: the pipeline
// benchmark's (tests/bench: a 1 KiB text message, an EIP-55 checksummed
// wallet, an explicit path) and a page written as a JSON object.
func benchForms() map[string]url.Values {
	text := make([]byte, 1024)
	for i := range text {
		text[i] = 'a' + byte(i%26)
	}
	form := func(message, contentType string) url.Values {
		return url.Values{
			FieldProposalID:     {testID},
			FieldWalletAddress:  {common.HexToAddress(testWallet).Hex()},
			FieldMessage:        {message},
			FieldEthereumTxHash: {testTx},
			FieldSignature:      {testSig},
			FieldOrganization:   {DefaultOrganization},
			FieldContentType:    {contentType},
			FieldPaymentTier:    {"standard"},
			FieldPath:           {contentType + "/" + testID[2:18]},
		}
	}
	return map[string]url.Values{
		"message=text1KiB": form(string(text), "bench"),
		"message=page": form(`{"jcr:primaryType":"cq:Page","title":"Hello","tags":["a","b"],`+
			`"jcr:content":{"text":"`+strings.Repeat("Hi. ", 64)+`","count":3}}`, "page"),
	}
}

// BenchmarkParseWrite is the form parsing a validator does for every write
// it receives, before the signature is checked.
func BenchmarkParseWrite(b *testing.B) {
	for name, form := range benchForms() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseWrite(form, DefaultOptions()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSubmission is the per-proposal work the pipeline does with a
// parsed submission besides verifying it: its content digest and the
// struct that was signed.
func BenchmarkSubmission(b *testing.B) {
	s, err := ParseWrite(benchForms()["message=text1KiB"], DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("op=Digest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Digest()
		}
	})
	b.Run("op=Typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Typed()
		}
	})
}
