package events

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// Query parameters and the header of a stream request.
const (
	paramWallets       = "wallets"
	paramOrganizations = "organizations"
	paramPath          = "path"
	// ParamLastEventID and HeaderLastEventID name the resumption point
	// (ResumeValue), on every stream route.
	ParamLastEventID  = "lastEventId"
	HeaderLastEventID = "Last-Event-ID"
)

// Bounds of a filter: each subscriber's filter is matched against every
// event, so its size is the cost of a subscriber.
const (
	maxFilterValues = 100
	maxPathDepth    = 6 + proposal.MaxPathDepth // root, fan-out, wallet, organization, then the node path
)

// Filter selects the events a stream sends. The zero Filter (nil) sends
// everything.
type Filter struct {
	wallets map[string]bool // lowercase 0x addresses; nil: any
	orgs    map[string]bool // nil: any; only with wallets
	path    string          // prefix on segment boundaries; "" or "/": any
}

// ParseFilter reads the filters of a stream request:
//
//   - wallets: addresses, comma-separated or repeated, any case;
//   - organizations: organization names, comma-separated or repeated, only
//     together with wallets (the contract's rule): the events of those
//     wallets in those organizations;
//   - path: one path prefix, matched on segment boundaries (/a/b matches
//     /a/b and /a/b/c, not /a/bc); a trailing slash is ignored.
//
// Other parameters are ignored. An invalid value is an invalid_field error
// naming the parameter.
func ParseFilter(q url.Values) (*Filter, *apierror.Error) {
	f := &Filter{}
	wallets, err := listParam(q, paramWallets)
	if err != nil {
		return nil, err
	}
	for _, w := range wallets {
		if !isAddress(w) {
			return nil, apierror.Field(paramWallets, "%q is not a 0x-prefixed 20-byte hex address", Clip(w))
		}
		if f.wallets == nil {
			f.wallets = map[string]bool{}
		}
		f.wallets[strings.ToLower(w)] = true
	}
	orgs, err := listParam(q, paramOrganizations)
	if err != nil {
		return nil, err
	}
	if len(orgs) > 0 && f.wallets == nil {
		return nil, apierror.Field(paramOrganizations, "only together with wallets")
	}
	for _, o := range orgs {
		if !proposal.ValidOrganization(o) {
			return nil, apierror.Field(paramOrganizations, "%q is not an organization name ([a-z0-9][a-z0-9_-]{0,63})", Clip(o))
		}
		if f.orgs == nil {
			f.orgs = map[string]bool{}
		}
		f.orgs[o] = true
	}
	if paths, ok := q[paramPath]; ok {
		if len(paths) != 1 {
			return nil, apierror.Field(paramPath, "give one path prefix, not %d", len(paths))
		}
		p, ok := cleanPath(paths[0])
		if !ok {
			return nil, apierror.Field(paramPath, "%q is not a path (/segment/..., segments of [A-Za-z0-9._:-], at most %d)", Clip(paths[0]), maxPathDepth)
		}
		f.path = p
	}
	return f, nil
}

// listParam collects the values of a list parameter, comma-separated or
// repeated. Empty items are errors: they are typos, not "any".
func listParam(q url.Values, name string) ([]string, *apierror.Error) {
	var out []string
	for _, v := range q[name] {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				return nil, apierror.Field(name, "empty value")
			}
			out = append(out, item)
			if len(out) > maxFilterValues {
				return nil, apierror.Field(name, "at most %d values", maxFilterValues)
			}
		}
	}
	return out, nil
}

func isAddress(s string) bool {
	if len(s) != 42 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return false
	}
	for i := 2; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// cleanPath validates a path prefix and drops a trailing slash ("/" stays:
// everything).
func cleanPath(p string) (string, bool) {
	if p == "/" {
		return p, true
	}
	p = strings.TrimSuffix(p, "/")
	if len(p) < 2 || p[0] != '/' {
		return "", false
	}
	segs := strings.Split(p[1:], "/")
	if len(segs) > maxPathDepth {
		return "", false
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", false
		}
		for i := range len(s) {
			c := s[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
				return "", false
			}
		}
	}
	return p, true
}

// Clip keeps error messages short whatever a client sends.
func Clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Match reports whether the stream sends ev.
func (f *Filter) Match(ev *ledgerpb.Event) bool {
	if f == nil {
		return true
	}
	if f.wallets != nil {
		if !f.wallets[ev.GetWallet()] {
			return false
		}
		if f.orgs != nil && !f.orgs[ev.GetOrganization()] {
			return false
		}
	}
	if f.path != "" && f.path != "/" {
		p := ev.GetPath()
		if p != f.path && (!strings.HasPrefix(p, f.path) || p[len(f.path)] != '/') {
			return false
		}
	}
	return true
}

// ParseResumePoint returns the event id a request resumes after
// (ResumeValue), the decimal form of a uint64. ok is false when the request
// names none: the stream then starts at new events.
func ParseResumePoint(header string, q url.Values) (after uint64, ok bool, err *apierror.Error) {
	value, field, present, err := ResumeValue(header, q)
	if err != nil || !present {
		return 0, false, err
	}
	id, valid := parseEventID(value)
	if !valid {
		return 0, false, apierror.Field(field, "%q is not an event id (a decimal sequence number)", Clip(value))
	}
	return id, true, nil
}

// ResumeValue returns the resumption point a stream request names, as
// given: the Last-Event-ID header (what EventSource sends when it
// reconnects), else the lastEventId query parameter (for clients that
// cannot set headers; the header wins, because a reconnecting EventSource
// repeats the URL it was opened with). field is where it came from, for an
// error about it; present is false when the request names none. Repeating
// the parameter is an error.
func ResumeValue(header string, q url.Values) (value, field string, present bool, err *apierror.Error) {
	if header != "" {
		return header, HeaderLastEventID, true, nil
	}
	vs, given := q[ParamLastEventID]
	if !given {
		return "", "", false, nil
	}
	if len(vs) != 1 {
		return "", "", false, apierror.Field(ParamLastEventID, "give one event id, not %d", len(vs))
	}
	return vs[0], ParamLastEventID, true, nil
}

// parseEventID accepts the decimal form of a uint64, digits only.
func parseEventID(s string) (uint64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil
}
