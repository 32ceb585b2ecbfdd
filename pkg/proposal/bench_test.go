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

// BenchmarkNodes is the expansion apply does for every write, on messages of
// about 1 KiB: plain text (the pipeline benchmark's) and a page as a JSON
// object with scalars, an array and two nested objects. impl=reference is
// the encoding/json expansion Nodes replaced.
func BenchmarkNodes(b *testing.B) {
	text := make([]byte, 1024)
	for i := range text {
		text[i] = 'a' + byte(i%26)
	}
	page := []byte(`{"jcr:primaryType":"cq:Page","title":"Hello, world","published":true,"rank":4.5,` +
		`"views":12873,"summary":null,"tags":["news", "tech", "go", 2026],` +
		`"jcr:content":{"jcr:primaryType":"nt:unstructured","text":"` + strings.Repeat("Hi. ", 190) + `","count":3},` +
		`"meta":{"author":"Ada","lang":"en","revision":7}}`)
	const path = "/ledger/aa/bb/cc/0xaabbcc/default/page/1"
	for _, m := range []struct {
		name    string
		message []byte
	}{{"object1KiB", page}, {"text1KiB", text}} {
		for _, impl := range []struct {
			name  string
			nodes func(string, []byte) ([]NodeSpec, error)
		}{{"reference", referenceNodes}, {"scanner", Nodes}} {
			b.Run("message="+m.name+"/impl="+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(m.message)))
				for b.Loop() {
					if _, err := impl.nodes(path, m.message); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
