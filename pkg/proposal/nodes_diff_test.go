package proposal

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// diffPaths are the node paths the differential tests expand messages at:
// short and ordinary ones, and deep ones where the nesting limit bites after
// two levels, right away, or (beyond maxFullDepth) at once.
func diffPaths() []string {
	const root = "/ledger/aa/bb/cc/0xaabbcc/default"
	deep := func(segments int) string {
		return root + strings.Repeat("/s", segments-depthOf(root))
	}
	return []string{root + "/page", root + "/page/1", "/x", deep(maxFullDepth - 2), deep(maxFullDepth), deep(maxFullDepth + 1)}
}

// diffSeeds are messages around every rule Nodes applies and every corner
// of the JSON grammar.
func diffSeeds() []string {
	const cid = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	return []string{
		// FuzzNodes and FuzzCheckMessage
		`{"a":{"b":1}}`, `text`, `{"a":[1,{"b":2}]}`, `{"a":1,"a":2}`, `{`, `{"jcr:primaryType":"x"}`,
		` {"a":1}`, "\n{", ``, `"{"`, "\xff{", `[1]`,
		// text
		"hello world", "a<b>&c", "line\nbreak\ttab\r\x00\x01\x1f\x7f\b\f", "quote\" back\\slash",
		"caf\xc3\xa9", "\xff\xfe", "\xe2\x80\xa8 \xe2\x80\xa9", "\xef\xbf\xbd", "\xed\xa0\x80", "\xf0\x9f\x98\x80", "\xc3",
		" \t\r\n", "\v{}", "\u00a0{}", "\xef\xbb\xbf{}", "x{}",
		// objects and white space
		`{}`, ` {} `, "\t\r\n{\t\"a\"\r:\n1\t}\n", `{ }`, `{"a" : 1 , "b" : 2 }`, "{\"a\":\v1}", "{\"a\":\f1}",
		"{\"a\":1}\x00", `{}{}`, `{} x`, `{} 1`, `{}]`, `{"a":1}}`, `{"a":1,}`, `{,"a":1}`, `{"a":1 "b":2}`,
		`{"a"}`, `{"a":}`, `{"a" 1}`, `{1:2}`, `{a:1}`, `{'a':1}`, `{"a":1`, `{"a":`, `{"a"`, `{"`, `{:}`, `{]`, `{[`, `{{}}`,
		// keys
		`{"\u0061":1}`, `{"a\u0062":{"c":1}}`, `{"\u0061":1,"a":2}`, `{"a":1,"\u0061":{}}`, `{"a":{},"a":{}}`,
		`{"\/":1}`, `{"a\/b":1}`, `{"\u00e9":1}`, `{"\ud83d\ude00":1}`, `{"\ud800":1}`, "{\"\xff\":1}", "{\"\xff\":1,\"\xfe\":2}",
		`{"":1}`, `{".":1}`, `{"..":{}}`, `{"...":1}`, `{"a\nb":1}`, "{\"a\nb\":1}", `{"a\x":1}`, `{"\u12":1}`, `{"\uZZZZ":1}`,
		`{"` + strings.Repeat("k", maxNameBytes) + `":1}`, `{"` + strings.Repeat("k", maxNameBytes+1) + `":1}`,
		`{"ledger:revision":1}`, `{"ledger:":1}`, `{"ledger":1}`, `{"Ledger:x":1}`,
		// numbers
		`{"n":0}`, `{"n":-0}`, `{"n":1e5}`, `{"n":1E+5}`, `{"n":1e-5}`, `{"n":0.1}`, `{"n":1.50}`, `{"n":-0.0e-0}`,
		`{"n":01}`, `{"n":-01}`, `{"n":00}`, `{"n":1.}`, `{"n":.5}`, `{"n":+1}`, `{"n":-}`, `{"n":1e}`, `{"n":1e+}`,
		`{"n":0x1}`, `{"n":1.5.3}`, `{"n":1_000}`, `{"n":NaN}`, `{"n":Infinity}`, `{"n":-Infinity}`,
		`{"n":123456789012345678901234567890}`, `{"n":1e400}`, `{"n":-1e-400}`, `{"n":[1e400,-0,0.5E-3]}`,
		// literals and strings
		`{"v":true,"w":false,"x":null}`, `{"v":tru}`, `{"v":nul}`, `{"v":truex}`, `{"v":True}`, `{"v":nulll}`,
		`{"s":"\u0000\b\f\n\r\t\"\\\/"}`, `{"s":"\x"}`, `{"s":"\u00"}`, "{\"s\":\"a\tb\"}", "{\"s\":\"\x7f\"}",
		"{\"s\":\"\xff\"}", "{\"s\":\"\xe2\x80\xa8<>&\"}", `{"s":"\ud800"}`, `{"s":"unterminated}`, `{"s":"a\"}`,
		// arrays
		`{"a":[]}`, `{"a":[ ]}`, `{"a":[ 1 , "x y" , true , null ]}`, `{"a":["\" ,",1]}`, "{\"a\":[\n1,\t2\r]}",
		`{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":[[1]]}`, `{"a":[{}]}`, `{"a":[1,[]]}`, `{"a":[1`, `{"a":[`,
		`{"a":` + strings.Repeat("[", 100000) + `}`, `{"a":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`,
		`{"a":[01]}`, `{"a":[-]}`, `{"a":[tru]}`, `{"a":[1]]}`,
		// primary type and CID
		`{"jcr:primaryType":"cq:Page"}`, `{"jcr:primaryType":"cq\u003aPage"}`, `{"jcr:primaryType":1}`,
		`{"jcr:primaryType":null}`, `{"jcr:primaryType":""}`, `{"jcr:primaryType":"a/b"}`, `{"jcr:primaryType":".."}`,
		`{"jcr:primaryType":["x"]}`, `{"jcr:primaryType":{"a":1}}`, `{"jcr:primaryType":"x","jcr:primaryType":"y"}`,
		`{"jcr:primaryType":"x","jcr:primaryType":{}}`, `{"jcr:primaryType":{},"jcr:primaryType":"x"}`,
		`{"jcr:primaryType":"` + strings.Repeat("t", 300) + `"}`, `{"jcr:primaryType":"x"` + "\x00" + `}`,
		`{"ledger:cid":"` + cid + `"}`, `{"ledger:cid":"\u0051m` + cid[2:] + `"}`, `{"ledger:cid":1}`, `{"ledger:cid":null}`,
		`{"ledger:cid":"Qm"}`, `{"ledger:cid":["` + cid + `"]}`, `{"ledger:cid":{"a":1}}`, `{"ledger:cid":"` + cid + `x"}`,
		`{"ledger:intent":"0x` + strings.Repeat("aB", 32) + `"}`, `{"ledger:intent":"\u0030x` + strings.Repeat("ab", 32) + `"}`,
		`{"ledger:intent":"0x` + strings.Repeat("ab", 31) + `"}`, `{"ledger:intent":"` + strings.Repeat("ab", 32) + `"}`,
		`{"ledger:intent":1}`, `{"ledger:intent":["0x` + strings.Repeat("ab", 32) + `"]}`, `{"ledger:other":"x"}`,
		// nesting
		`{"z":{"v":1},"a":{"b":{"c":"d"}},"p":2}`, `{"b":{"y":{},"x":{}},"a":{"d":{"e":{}},"c":1}}`,
		`{"a":{"b":1},"a":2}`, `{"a":2,"a":{"b":1}}`, `{"x":{"a":1,"a":2}}`, `{"b":{},"a":{},"c":{}}`,
		nest(2), nest(3), nest(maxFullDepth), nest(MaxPathDepth + 1), nest(200),
		strings.Repeat(`{"a":`, 50000),
		`{"title":"Hello","tags":["a","b"],"jcr:content":{"text":"Hi.","count":3},"jcr:primaryType":"cq:Page"}`,
	}
}

// checkAgainstReference fails t when Nodes and referenceNodes disagree on
// message at path.
func checkAgainstReference(t *testing.T, path string, message []byte) {
	t.Helper()
	want, wantErr := referenceNodes(path, message)
	got, err := Nodes(path, message)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("Nodes(%q, %q):\nerror     %v\nreference %v", path, message, err, wantErr)
	case err != nil && !errors.Is(err, ErrMessage):
		t.Fatalf("Nodes(%q, %q): error %v does not wrap ErrMessage", path, message, err)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("Nodes(%q, %q):\ngot       %#v\nreference %#v", path, message, got, want)
	}
}

// FuzzNodesMatchesReference holds the hand-written expansion to the
// encoding/json one it replaced: the same messages refused, and the same
// nodes, byte for byte, for every message accepted.
func FuzzNodesMatchesReference(f *testing.F) {
	paths := diffPaths()
	for i, s := range diffSeeds() {
		f.Add(uint8(i%len(paths)), []byte(s))
	}
	f.Fuzz(func(t *testing.T, pathIndex uint8, message []byte) {
		checkAgainstReference(t, paths[int(pathIndex)%len(paths)], message)
	})
}

func TestNodesMatchesReferenceOnSeeds(t *testing.T) {
	for _, path := range diffPaths() {
		for _, s := range diffSeeds() {
			checkAgainstReference(t, path, []byte(s))
		}
	}
}

// TestNodesMatchesReferenceRandom compares the two expansions on messages
// built from the JSON grammar with random white space, escapes, numbers and
// nesting, some of them then broken by a random edit.
func TestNodesMatchesReferenceRandom(t *testing.T) {
	n := 40_000
	if testing.Short() {
		n = 4_000
	}
	r := rand.New(rand.NewPCG(11, 12))
	paths := diffPaths()
	for range n {
		msg := []byte(randomObject(r, 0))
		if r.IntN(3) == 0 {
			msg = mutate(r, msg)
		}
		checkAgainstReference(t, paths[r.IntN(len(paths))], msg)
	}
}

func randomSpace(r *rand.Rand) string {
	if r.IntN(3) != 0 {
		return ""
	}
	if r.IntN(30) == 0 {
		return []string{"\v", "\f", "\u00a0", "\x00"}[r.IntN(4)]
	}
	return []string{" ", "\t", "\r\n", "  \n "}[r.IntN(4)]
}

func randomKey(r *rand.Rand) string {
	keys := []string{
		"a", "b", "c", "d", "e", "title", "x:y", "a.b", "A-Z_0", "_", "Z", "a1", "a2", "jcr:primaryType", "ledger:cid", "ledger:x",
		"", ".", "..", `\u0061`, `a\u0062`, `\/`, `\u00e9`, "\xff", "a/b", `\ud800`, `\n`, strings.Repeat("k", 129),
	}
	if r.IntN(16) == 0 {
		return keys[r.IntN(len(keys))]
	}
	if r.IntN(2) == 0 {
		return keys[r.IntN(13)]
	}
	return string(rune('a'+r.IntN(26))) + string(rune('A'+r.IntN(26)))
}

func randomScalar(r *rand.Rand) string {
	scalars := []string{
		"0", "-0", "1", "12", "1e5", "1E+5", "1e-5", "0.1", "1.50", "-12.5e10", "123456789012345678901234567890", "1e400",
		"true", "false", "null", `""`, `"x"`, `"a b"`, `"\u0041\n\t\"\\\/"`, `"\ud83d\ude00"`, "\"\xe2\x80\xa8\"", "\"\xff\"",
		`"<&>"`, `"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"`, `"\u0051mYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"`,
		`"cq:Page"`, `"a/b"`, `".."`,
		"01", "-", "1.", ".5", "+1", "tru", "nul", "True", `"\x"`, "\"\x01\"", `"\u12"`,
	}
	if r.IntN(40) == 0 {
		return scalars[len(scalars)-11+r.IntN(11)]
	}
	return scalars[r.IntN(len(scalars)-11)]
}

func randomValue(r *rand.Rand, depth int) string {
	switch k := r.IntN(10); {
	case k < 5:
		return randomScalar(r)
	case k < 8:
		var b strings.Builder
		b.WriteString("[" + randomSpace(r))
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(randomSpace(r) + "," + randomSpace(r))
			}
			if r.IntN(15) == 0 {
				b.WriteString(randomValue(r, depth+1))
			} else {
				b.WriteString(randomScalar(r))
			}
		}
		b.WriteString(randomSpace(r) + "]")
		return b.String()
	case depth < 5:
		return randomObject(r, depth+1)
	}
	return "{}"
}

func randomObject(r *rand.Rand, depth int) string {
	var b strings.Builder
	b.WriteString(randomSpace(r) + "{" + randomSpace(r))
	for i := range r.IntN(6) {
		if i > 0 {
			b.WriteString(randomSpace(r) + "," + randomSpace(r))
		}
		b.WriteString(`"` + randomKey(r) + `"` + randomSpace(r) + ":" + randomSpace(r) + randomValue(r, depth))
	}
	b.WriteString(randomSpace(r) + "}" + randomSpace(r))
	return b.String()
}

// mutate breaks msg with one random edit: a byte dropped, replaced or added,
// the end cut, or something appended.
func mutate(r *rand.Rand, msg []byte) []byte {
	const edits = "{}[]:,\"\\ \t\n0-1e.tfnu\x00\x1f\xff"
	if len(msg) == 0 {
		return msg
	}
	i := r.IntN(len(msg))
	c := edits[r.IntN(len(edits))]
	switch r.IntN(5) {
	case 0:
		return append(msg[:i:i], msg[i+1:]...)
	case 1:
		msg[i] = c
		return msg
	case 2:
		return append(msg[:i:i], append([]byte{c}, msg[i:]...)...)
	case 3:
		return msg[:i]
	}
	return append(msg, []string{"{}", "x", " 1", "}", ","}[r.IntN(5)]...)
}

// TestUnquote holds unquote to encoding/json's decoding of strings, which
// Nodes applies to names and to jcr:primaryType and ledger:cid values.
func TestUnquote(t *testing.T) {
	const pieces = "ab\\\"/\xff\xc3\xa9\xe2\x80\xa8"
	escapes := []string{`\u0061`, `\ud83d`, `\ude00`, `\ud800`, `\udfff`, `\u00e9`, `\uFFFD`, `\n`, `\/`, `\\`, `\"`, `\b`, `\u0000`}
	r := rand.New(rand.NewPCG(13, 14))
	for range 100_000 {
		var b strings.Builder
		b.WriteByte('"')
		for range r.IntN(8) {
			if r.IntN(2) == 0 {
				b.WriteString(escapes[r.IntN(len(escapes))])
			} else if c := pieces[r.IntN(len(pieces))]; c != '\\' && c != '"' {
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
		lit := b.String()
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%q: %v", lit, err)
		}
		if got := unquote(lit); got != want {
			t.Fatalf("unquote(%q) = %q, want %q", lit, got, want)
		}
	}
}
