package proposal

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/apierror"
)

// FuzzParseWrite feeds arbitrary url-encoded bodies: parsing never panics,
// every refusal is an API error naming its field, and whatever is accepted
// has a path below the wallet's own subtree.
func FuzzParseWrite(f *testing.F) {
	f.Add(validWrite().Encode())
	f.Add("proposalId=0x00&message=%7B")
	f.Add(strings.Replace(validWrite().Encode(), "acme", "..", 1))
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		for _, parse := range []func(url.Values, Options) (*Submission, error){ParseWrite, ParseDelete} {
			s, err := parse(form, DefaultOptions())
			if err != nil {
				e := apierror.As(err)
				if e == nil {
					t.Fatalf("error without a code: %v", err)
				}
				if e.Code == apierror.InvalidField && e.Details["field"] == nil {
					t.Fatalf("invalid_field without a field: %v", e)
				}
				continue
			}
			prefix := WalletRoot(DefaultContentRoot, s.Wallet) + "/" + s.Organization + "/"
			if !strings.HasPrefix(s.Path, prefix) || strings.Contains(s.Path, "/../") || strings.Contains(s.Path, "//") {
				t.Fatalf("accepted path %q outside %q", s.Path, prefix)
			}
		}
	})
}

// FuzzCheckSubPath: an accepted path never escapes or has empty segments.
func FuzzCheckSubPath(f *testing.F) {
	for _, s := range []string{"a/b", "../a", "a/./b", "", "a//b", "x:y/z.w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sub string) {
		if CheckSubPath(sub) != nil {
			return
		}
		for _, seg := range strings.Split(sub, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted %q", sub)
			}
		}
	})
}

// FuzzNodes: expansion never panics, refusals wrap ErrMessage, and every node
// lies under the proposal's path.
func FuzzNodes(f *testing.F) {
	for _, s := range []string{`{"a":{"b":1}}`, `text`, `{"a":[1,{"b":2}]}`, `{"a":1,"a":2}`, `{`, `{"jcr:primaryType":"x"}`} {
		f.Add(s)
	}
	const root = "/ledger/aa/bb/cc/0xaabbcc/default/page"
	f.Fuzz(func(t *testing.T, msg string) {
		nodes, err := Nodes(root, []byte(msg))
		if err != nil {
			if !errors.Is(err, ErrMessage) {
				t.Fatalf("error %v does not wrap ErrMessage", err)
			}
			return
		}
		if len(nodes) == 0 || nodes[0].Path != root {
			t.Fatalf("first node is not the proposal's: %+v", nodes)
		}
		for _, n := range nodes {
			if n.Path != root && !strings.HasPrefix(n.Path, root+"/") {
				t.Fatalf("node %q outside %q", n.Path, root)
			}
		}
	})
}

// FuzzScanID: whenever ScanID finds an id, it is the one the form's full
// parse (url.ParseQuery, as intake reads it) gives.
func FuzzScanID(f *testing.F) {
	id := "0x" + strings.Repeat("ab", 32)
	for _, seed := range []string{
		"proposalId=" + id + "&message=x",
		"message=a%26proposalId%3D" + id + "&proposalId=" + id,
		"proposalId=" + id + "&proposalId=" + id,
		"proposal%49d=" + id,
		"proposalId=0x" + strings.Repeat("AB", 32) + ";x=1",
		"x=%zz&proposalId=" + id,
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, ok := ScanID(body)
		if !ok {
			return
		}
		form, err := url.ParseQuery(body)
		if err != nil || len(form[FieldProposalID]) != 1 {
			return // the full parse refuses the form
		}
		if want, valid := ParseHash(form.Get(FieldProposalID)); !valid || want != got {
			t.Fatalf("ScanID %s, the parse %q", got.Hex(), form.Get(FieldProposalID))
		}
	})
}
