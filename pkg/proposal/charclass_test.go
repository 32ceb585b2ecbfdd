package proposal

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestCharacterClassesMatchTheirRegexps checks the hand-written validators
// against the regular expressions that define them, on random strings drawn
// from an alphabet around every class boundary.
func TestCharacterClassesMatchTheirRegexps(t *testing.T) {
	const alphabet = "aAzZ09_-.:/QmIOl1lx@ \x00\xff"
	for _, tc := range []struct {
		re   string
		fn   func(string) bool
		gen  func(r *rand.Rand) string
		name string
	}{
		{`^[a-z0-9][a-z0-9_-]{0,63}$`, ValidOrganization, nil, "organization"},
		{`^[A-Za-z0-9._:-]{1,64}$`, func(s string) bool { return ValidContentType(s) || s == "." || s == ".." }, nil, "content type"},
		{`^[A-Za-z0-9._:-]+$`, func(s string) bool { return validSegment(s) || s == "." || s == ".." }, nil, "segment"},
		{`^0x[0-9a-fA-F]{64}$`, func(s string) bool { return hexString(s, 64) }, hexGen(64), "hash"},
		{`^0x[0-9a-fA-F]{40}$`, func(s string) bool { return hexString(s, 40) }, hexGen(40), "address"},
	} {
		re := regexp.MustCompile(tc.re)
		r := rand.New(rand.NewPCG(1, 2))
		for range 200_000 {
			var s string
			if tc.gen != nil && r.IntN(2) == 0 {
				s = tc.gen(r)
			} else {
				b := make([]byte, r.IntN(70))
				for i := range b {
					b[i] = alphabet[r.IntN(len(alphabet))]
				}
				s = string(b)
			}
			if got, want := tc.fn(s), re.MatchString(s); got != want {
				t.Fatalf("%s: %q: got %t, the regexp says %t", tc.name, s, got, want)
			}
		}
		// Every single byte, alone and in a valid context.
		for c := range 256 {
			for _, s := range []string{string(rune(c)), "a" + string([]byte{byte(c)})} {
				if got, want := tc.fn(s), re.MatchString(s); got != want {
					t.Fatalf("%s: %q: got %t, the regexp says %t", tc.name, s, got, want)
				}
			}
		}
	}
}

// hexGen makes strings close to 0x and n hex digits: valid or off by one.
func hexGen(n int) func(r *rand.Rand) string {
	return func(r *rand.Rand) string {
		const digits = "0123456789abcdefABCDEFgG"
		b := []byte("0x")
		if r.IntN(8) == 0 {
			b = []byte("0X")
		}
		for range n - 1 + r.IntN(3) {
			b = append(b, digits[r.IntN(len(digits)-r.IntN(2)*2)])
		}
		return string(b)
	}
}
