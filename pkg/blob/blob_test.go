package blob

import (
	"errors"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multibase"
	"github.com/multiformats/go-multihash"
)

func sumCID(t testing.TB, version uint64, codec uint64, mh uint64, data string) cid.Cid {
	t.Helper()
	c, err := cid.Prefix{Version: version, Codec: codec, MhType: mh, MhLength: -1}.Sum([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseCID(t *testing.T) {
	v0 := sumCID(t, 0, cid.DagProtobuf, multihash.SHA2_256, "a dag-pb node")
	v1raw := sumCID(t, 1, cid.Raw, multihash.SHA2_256, "some bytes")
	v1pb := sumCID(t, 1, cid.DagProtobuf, multihash.SHA2_256, "a dag-pb node")
	base58v1, err := v1raw.StringOfBase(multibase.Base58BTC)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want string // "" accepted; else a fragment of the error
	}{
		{v0.String(), ""},
		{"QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn", ""}, // the empty UnixFS directory
		{v1raw.String(), ""},
		{v1pb.String(), ""},
		{base58v1, "write it as " + v1raw.String()},
		{strings.ToUpper(v1raw.String()), "write it as " + v1raw.String()},
		{sumCID(t, 1, cid.DagCBOR, multihash.SHA2_256, "x").String(), "codec 0x71"},
		{sumCID(t, 1, cid.Raw, multihash.SHA2_512, "x").String(), "only sha2-256"},
		{sumCID(t, 1, cid.Raw, multihash.IDENTITY, "x").String(), "only sha2-256"},
		{"", "must be a CIDv0"},
		{strings.Repeat("b", 200), "must be a CIDv0"},
		{"Qm" + strings.Repeat("1", 44), "invalid CID"},
		{"not a cid", "invalid CID"},
	} {
		c, err := ParseCID(tc.in)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ParseCID(%q): %v", tc.in, err)
		case tc.want == "" && (c.String() != tc.in || len(c.Bytes()) > MaxCIDBytes):
			t.Errorf("ParseCID(%q) = %s (%d bytes)", tc.in, c, len(c.Bytes()))
		case tc.want != "" && (err == nil || !errors.Is(err, ErrCID) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ParseCID(%q): error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestParseID(t *testing.T) {
	id := IDOf([]byte("hello"))
	text := id.String()
	for _, tc := range []struct {
		in   string
		size int64
		ok   bool
	}{
		{text, -1, true},
		{strings.ToUpper(text), -1, true},
		{text + "#5", 5, true},
		{text + "#0", 0, true},
		{text + "#05", 0, false},
		{text + "#", 0, false},
		{text + "#-1", 0, false},
		{text[:63], 0, false},
		{text + "0", 0, false},
		{strings.Replace(text, text[:1], "g", 1), 0, false},
	} {
		got, size, err := ParseID(tc.in)
		if tc.ok != (err == nil) || (tc.ok && (got != id || size != tc.size)) {
			t.Errorf("ParseID(%q) = %s, %d, %v", tc.in, got, size, err)
		}
	}
}

// FuzzParseCID holds an accepted CID to its stored forms: its text is the
// input, its binary form fits MaxCIDBytes and parses back to it.
func FuzzParseCID(f *testing.F) {
	f.Add("QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn")
	f.Add(sumCID(f, 1, cid.Raw, multihash.SHA2_256, "x").String())
	f.Add("zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCID(s)
		if err != nil {
			return
		}
		if c.String() != s {
			t.Fatalf("%q parsed to %s", s, c)
		}
		back, err := CIDFromBytes(c.Bytes())
		if err != nil || !back.Equals(c) {
			t.Fatalf("%q: binary form does not parse back: %v", s, err)
		}
	})
}

// FuzzParseID holds an accepted blob id to its text.
func FuzzParseID(f *testing.F) {
	f.Add(IDOf(nil).String() + "#0")
	f.Fuzz(func(t *testing.T, s string) {
		id, size, err := ParseID(s)
		if err != nil {
			return
		}
		head, _, _ := strings.Cut(s, "#")
		if id.String() != strings.ToLower(head) || size < -1 {
			t.Fatalf("%q parsed to %s, %d", s, id, size)
		}
	})
}
