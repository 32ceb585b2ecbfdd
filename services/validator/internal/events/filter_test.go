package events

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// FuzzParseFilter: any query either fails with invalid_field naming one of
// the filter parameters, or gives a filter of canonical values only.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		"", "wallets=" + walletA, "wallets=" + walletA + "," + walletB + "&organizations=default,org-1",
		"organizations=x", "path=/ledger/a/b", "path=/", "path=/a/", "path=/a//b", "wallets=,", "path=%00",
		"wallets=0X" + strings.ToUpper(walletA[2:]) + "&path=/ledger",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, aerr := ParseFilter(q)
		if aerr != nil {
			if aerr.Code != apierror.InvalidField || aerr.Status() != 400 {
				t.Fatalf("%q: %v", raw, aerr)
			}
			switch aerr.Details["field"] {
			case paramWallets, paramOrganizations, paramPath:
			default:
				t.Fatalf("%q: error names %v", raw, aerr.Details["field"])
			}
			return
		}
		if len(flt.orgs) > 0 && len(flt.wallets) == 0 {
			t.Fatalf("%q: organizations without wallets accepted", raw)
		}
		for w := range flt.wallets {
			if !isAddress(w) || w != strings.ToLower(w) || w[1] != 'x' {
				t.Fatalf("%q: wallet %q kept", raw, w)
			}
		}
		for o := range flt.orgs {
			if !proposal.ValidOrganization(o) {
				t.Fatalf("%q: organization %q kept", raw, o)
			}
		}
		if flt.path != "" {
			if p, ok := cleanPath(flt.path); !ok || p != flt.path || (flt.path != "/" && strings.HasSuffix(flt.path, "/")) {
				t.Fatalf("%q: path %q kept", raw, flt.path)
			}
		}
	})
}

// FuzzParseResumePoint: an accepted id is the decimal form of a uint64,
// and the header, when set, decides.
func FuzzParseResumePoint(f *testing.F) {
	for _, s := range []string{"0", "1", "18446744073709551615", "18446744073709551616", "-1", "+1", " 1", "1e3", "007", ""} {
		f.Add(s, "lastEventId=5")
	}
	f.Fuzz(func(t *testing.T, header, rawQuery string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		id, ok, aerr := ParseResumePoint(header, q)
		if aerr != nil {
			if ok || aerr.Code != apierror.InvalidField {
				t.Fatalf("(%q, %q): %v", header, rawQuery, aerr)
			}
			want := ParamLastEventID
			if header != "" {
				want = HeaderLastEventID
			}
			if aerr.Details["field"] != want {
				t.Fatalf("(%q, %q): error names %v, want %s", header, rawQuery, aerr.Details["field"], want)
			}
			return
		}
		src := header
		if src == "" {
			vs, present := q[ParamLastEventID]
			if !present {
				if ok {
					t.Fatalf("(%q, %q): resumption point from nowhere", header, rawQuery)
				}
				return
			}
			src = vs[0]
		}
		back, err := strconv.ParseUint(src, 10, 64)
		if !ok || err != nil || back != id || strings.TrimLeft(src, "0123456789") != "" {
			t.Fatalf("(%q, %q) = %d, %v", header, rawQuery, id, ok)
		}
	})
}
