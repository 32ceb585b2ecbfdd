package proposal

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// The intake helpers below avoid go-ethereum's allocating conversions;
// these tests hold them to the conversions they replace.

func TestDecodeHex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, digits := range []int{40, 64} {
		gen := hexGen(digits)
		for range 100_000 {
			s := gen(r)
			dst := make([]byte, digits/2)
			ok := decodeHex(dst, s)
			if ok != hexString(s, digits) {
				t.Fatalf("decodeHex(%q) = %t, hexString says %t", s, ok, !ok)
			}
			if !ok {
				continue
			}
			if want := common.FromHex(s); string(dst) != string(want) {
				t.Fatalf("decodeHex(%q) = %x, want %x", s, dst, want)
			}
		}
	}
}

func TestMixedCase(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	gen := hexGen(40)
	for range 100_000 {
		s := gen(r)
		if !hexString(s, 40) {
			continue
		}
		body := s[2:]
		if got, want := mixedCase(body), body != strings.ToLower(body) && body != strings.ToUpper(body); got != want {
			t.Fatalf("mixedCase(%q) = %t, want %t", body, got, want)
		}
	}
}

func TestPathsFromHex(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 10_000 {
		var w common.Address
		var id common.Hash
		for i := range w {
			w[i] = byte(r.UintN(256))
		}
		for i := range id {
			id[i] = byte(r.UintN(256))
		}
		lw := strings.ToLower(w.Hex())
		if got, want := WalletRoot("ledger", w), "/ledger/"+lw[2:4]+"/"+lw[4:6]+"/"+lw[6:8]+"/"+lw; got != want {
			t.Fatalf("WalletRoot = %q, want %q", got, want)
		}
		if got, want := DefaultSubPath("page", id), "page/"+id.Hex()[2:18]; got != want {
			t.Fatalf("DefaultSubPath = %q, want %q", got, want)
		}
	}
	if got := DefaultSubPath("", common.Hash{0xab}); got != DefaultContentType+"/ab"+strings.Repeat("0", 14) {
		t.Fatalf("DefaultSubPath without a content type = %q", got)
	}
}

// FuzzCheckMessage: intake refuses exactly the messages Nodes refuses, with
// the same error.
func FuzzCheckMessage(f *testing.F) {
	for _, s := range []string{`{"a":{"b":1}}`, `text`, ` {"a":1}`, "\n{", `{"a":1,"a":2}`, `{`, ``, `"{"`, "\xff{", `[1]`} {
		f.Add(s)
	}
	const root = "/ledger/aa/bb/cc/0xaabbcc/default/page"
	f.Fuzz(func(t *testing.T, msg string) {
		_, want := Nodes(root, []byte(msg))
		got := checkMessage(root, []byte(msg))
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("checkMessage = %v, Nodes = %v", got, want)
		}
	})
}
