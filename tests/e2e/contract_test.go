package e2e

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/edge/openapi"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// contractLimits are the query parameters whose errors the contract names
// (its Limits table); the parameter checks must reach each of them.
var contractLimits = []string{"/ops/v1/events/recent?limit", "/ops/v1/fragmentation/top?limit"}

// paramValues are the values a parameter of a document is given.
type paramValues struct {
	// known name what the traffic wrote.
	known []string
	// unknown is well formed and names nothing; "" for none.
	unknown string
	// missing: an unknown value must answer 404 (an id names one
	// record); otherwise 200 is right too (any address is a wallet).
	missing bool
}

// exchange is one live request and its answer.
type exchange struct {
	method string
	url    string
	status int
	header http.Header
	body   []byte
}

// String shows the exchange in a failure, the body cut to its first KiB.
func (x exchange) String() string {
	body := x.body
	if len(body) > 1024 {
		body = append(body[:1024:1024], "…"...)
	}
	return fmt.Sprintf("%s %s: %d %s %s", x.method, x.url, x.status, x.header.Get("Content-Type"), body)
}

func call(t *testing.T, method, u string) exchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return exchange{method: method, url: u, status: resp.StatusCode, header: resp.Header, body: body}
}

// request is one GET of a route: the URL below the base, its path
// parameters, and what its values are.
type request struct {
	target string
	params map[string]string
	kind   string // "known", "unknown" or "malformed"
	param  string // the path parameter the kind is about
}

// TestContract runs the whole system, writes a little content so that the
// views have something to show, and holds every live answer of the edge
// (/openapi.yaml) and of the validator (/openapi-validator-source.yaml) to
// the documents the edge serves, with kin-openapi's request and response
// validation: status listed for the route, Content-Type one of its media
// types, body within its schema, contractVersion marker included.
func TestContract(t *testing.T) {
	docs, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	source, err := docs.SourceContract()
	if err != nil {
		t.Fatal(err)
	}
	codes := errorCodes(t, docs.Edge)

	n := harness.Start(t, harness.Options{Mode: "MOCK"})
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	lower := strings.ToLower(wallet.Hex())
	ids := []string{
		commitMock(t, n, key, &ledgerclient.Proposal{ContentType: "page",
			Message: []byte(`{"jcr:primaryType":"cq:Page","title":"Contract","jcr:content":{"text":"checked"}}`)}),
		commitMock(t, n, key, &ledgerclient.Proposal{ContentType: "asset",
			Message: []byte(`{"jcr:primaryType":"dam:Asset","ledger:cid":"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"}`)}),
		commitMock(t, n, key, &ledgerclient.Proposal{ContentType: "page", Path: "page/short-lived",
			Message: []byte(`{"jcr:primaryType":"cq:Page","title":"Short-lived"}`)}),
		commitMock(t, n, key, &ledgerclient.Proposal{Action: proposal.Delete, ContentType: "page", Path: "page/short-lived"}),
	}
	// The storage views scan applied state on their own schedule: wait
	// until the edge shows the writes and the delete.
	harness.Eventually(t, 30*time.Second, func() bool {
		var w struct {
			Data api.WalletStats `json:"data"`
		}
		frag := call(t, http.MethodGet, n.EdgeURL+"/ops/v1/fragmentation/metrics/"+lower)
		x := call(t, http.MethodGet, n.EdgeURL+"/ops/v1/explorer/wallets/"+lower)
		return frag.status == http.StatusOK && x.status == http.StatusOK && json.Unmarshal(x.body, &w) == nil &&
			w.Data.TotalWrites >= 3 && w.Data.TotalDeletes >= 1
	})

	nobody := strings.ToLower(common.BytesToAddress(crypto.Keccak256([]byte("nobody"))[:20]).Hex())
	proposalIDs := paramValues{known: ids, unknown: ledgerclient.NewProposalID().Hex(), missing: true}

	t.Run("edge", func(t *testing.T) {
		values := map[string]paramValues{
			"proposalId": proposalIDs,
			// Both cases: the edge lowercases before it asks. A wallet
			// that wrote nothing and has no GC account is 404 on both
			// wallet routes.
			"walletAddress": {known: []string{lower, wallet.Hex()}, unknown: nobody, missing: true},
			// MOCK mode pays with no transaction: only an unknown one.
			"transactionId": {unknown: ledgerclient.NewProposalID().Hex(), missing: true},
			"limit":         {known: []string{"2"}},
		}
		for _, template := range routesOf(docs.Edge) {
			t.Run(template, func(t *testing.T) {
				checkEdgeRoute(t, n.EdgeURL, docs, codes, template, values)
			})
		}
	})

	// The figures the validators publish for the header, durability and
	// transport views reach them, with no gap: the software version, the
	// last commit's time (the delete, committed last) and the transport's
	// timeouts. MOCK mode opens no NATS connection: nats.connected is null
	// and no gap, since nothing is unknown.
	t.Run("published figures", func(t *testing.T) {
		var last api.ProposalStatus
		if err := harness.GetJSON(nil, 10*time.Second, n.ValidatorURL+api.StatusLink(ids[len(ids)-1]), &last); err != nil || last.CommittedAt == nil {
			t.Fatalf("the last proposal %+v: %v", last, err)
		}
		view := func(route string) map[string]any {
			var body struct {
				Data map[string]any `json:"data"`
			}
			x := call(t, http.MethodGet, n.EdgeURL+route)
			if x.status != http.StatusOK || json.Unmarshal(x.body, &body) != nil {
				t.Fatalf("%s", x)
			}
			if gaps, _ := body.Data["gaps"].([]any); len(gaps) != 0 {
				t.Errorf("%s: gaps %v", route, gaps)
			}
			return body.Data
		}
		if v, _ := view("/ops/v1/header")["version"].(string); v == "" {
			t.Errorf("header version %q", v)
		}
		if at, _ := view("/ops/v1/durability")["lastCommitAt"].(string); at != last.CommittedAt.Format(time.RFC3339Nano) {
			t.Errorf("durability lastCommitAt %q, the last commit was at %v", at, last.CommittedAt)
		}
		if nats, _ := view("/ops/v1/runtime/msgbus")["nats"].(map[string]any); nats == nil || nats["connected"] != nil {
			t.Errorf("msgbus nats %v", nats)
		}
		if totals, _ := view("/ops/v1/runtime/media-driver")["totals"].(map[string]any); totals["timeouts"] != float64(0) {
			t.Errorf("media-driver totals of a single validator, which has no link: %v", totals)
		}
	})

	// The operational events: the validator's own leader change, through
	// the edge's merge, and counted.
	t.Run("events", func(t *testing.T) {
		type event struct {
			Validator string `json:"validator"`
			api.OpsEvent
		}
		harness.Eventually(t, 10*time.Second, func() bool {
			var recent struct {
				Data struct {
					Events []event `json:"events"`
				} `json:"data"`
			}
			x := call(t, http.MethodGet, n.EdgeURL+"/ops/v1/events/recent?limit=50")
			if x.status != http.StatusOK || json.Unmarshal(x.body, &recent) != nil {
				t.Fatalf("events/recent: %s", x)
			}
			return slices.ContainsFunc(recent.Data.Events, func(e event) bool {
				return e.Type == "leader.changed" && e.Validator == api.NodeName(1) && e.Attributes.Leader != nil && *e.Attributes.Leader == 1
			})
		})
		var stats struct {
			Data struct {
				ByType            map[string]api.OpsEventTypeStats `json:"byType"`
				ValidatorsCounted int                              `json:"validatorsCounted"`
			} `json:"data"`
		}
		harness.Eventually(t, 10*time.Second, func() bool {
			x := call(t, http.MethodGet, n.EdgeURL+"/ops/v1/events/stats")
			if x.status != http.StatusOK || json.Unmarshal(x.body, &stats) != nil {
				t.Fatalf("events/stats: %s", x)
			}
			return stats.Data.ByType["leader.changed"].Total >= 1
		})
		if stats.Data.ValidatorsCounted != 1 || stats.Data.ByType["leader.changed"].LastAt == nil {
			t.Fatalf("events/stats: %+v", stats.Data)
		}
	})

	t.Run("validator", func(t *testing.T) {
		var status api.ConsensusStatus
		if err := harness.GetJSON(nil, 10*time.Second, n.ValidatorURL+"/v1/consensus/status", &status); err != nil || status.AppliedIndex == 0 {
			t.Fatalf("consensus status %+v: %v", status, err)
		}
		values := map[string]paramValues{
			"proposalId":    proposalIDs,
			"walletAddress": {known: []string{lower}, unknown: nobody, missing: true},
			"wallet":        {known: []string{lower}},
			"index":         {known: []string{strconv.FormatUint(status.AppliedIndex, 10)}},
			"limit":         {known: []string{"2"}},
			"runs":          {known: []string{"5"}},
			"transactionId": {unknown: ledgerclient.NewProposalID().Hex(), missing: true},
		}
		for _, template := range routesOf(docs.Source) {
			t.Run(template, func(t *testing.T) {
				checkSourceRoute(t, n.ValidatorURL, docs.Source, source.Marker(template), template, values)
			})
		}
	})

	// The contract's internal and local routes that are no source route
	// (methods and bodies "not shown"): each answers as ADR 0037, 0038,
	// 0039 and 0040 say, errors in the validator's error body.
	t.Run("internal", func(t *testing.T) {
		unknown := "0x" + strings.Repeat("77", 32)
		blobID := strings.Repeat("ab", 32)
		for _, c := range []struct {
			method, path, body string
			status             int
			want               string // the error code, or the answer's media type
		}{
			{http.MethodGet, "/v1/head", "", http.StatusOK, "application/json"},
			{http.MethodGet, "/v1/ngrok-url", "", http.StatusOK, "application/json"},
			{http.MethodPost, "/v1/register-client", "{}", http.StatusBadRequest, string(apierror.InvalidField)},
			{http.MethodGet, "/v1/register-client/unknown-client", "", http.StatusNotFound, string(apierror.NotFound)},
			{http.MethodPost, "/v1/follower/head-update", "{}", http.StatusBadRequest, string(apierror.InvalidField)},
			{http.MethodPost, "/v1/binary/declare-intent", "{}", http.StatusBadRequest, string(apierror.InvalidField)},
			{http.MethodGet, "/v1/binary/check-intent/" + unknown, "", http.StatusNotFound, string(apierror.NotFound)},
			{http.MethodPost, "/v1/binary/complete-upload", `{"token":"` + unknown + `","cid":"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"}`,
				http.StatusNotFound, string(apierror.NotFound)},
			{http.MethodGet, "/api/cid/" + blobID, "", http.StatusNotFound, string(apierror.NotFound)},
			{http.MethodGet, "/api/cid/gateway/" + blobID, "", http.StatusNotFound, string(apierror.NotFound)},
			{http.MethodGet, "/api/blob/" + blobID, "", http.StatusNotFound, string(apierror.NotFound)},
			{http.MethodGet, "/api/cid/stats", "", http.StatusOK, "application/json"},
			{http.MethodPost, "/v1/chat", `{"messages":[{"role":"user","content":"who leads?"}]}`, http.StatusServiceUnavailable, "chat_not_configured"},
			{http.MethodGet, "/chat", "", http.StatusOK, "text/html"},
		} {
			req, err := http.NewRequest(c.method, n.ValidatorURL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if c.method == http.MethodPost {
				req.Header.Set("Authorization", "Bearer "+harness.OperatorToken) // the operator routes' lane; the others are open in MOCK
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			var eb apierror.Body
			switch {
			case resp.StatusCode != c.status:
				t.Errorf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, body, c.status)
			case c.status < 300 && media != c.want:
				t.Errorf("%s %s: %s, want %s", c.method, c.path, media, c.want)
			case c.status >= 300 && (json.Unmarshal(body, &eb) != nil || eb.Error == nil || string(eb.Error.Code) != c.want):
				t.Errorf("%s %s: %s, want the error body with %s", c.method, c.path, body, c.want)
			}
		}
		// The operational event stream answers with the stream's media type.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.ValidatorURL+"/v1/ops/events/stream", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || media != "text/event-stream" {
			t.Errorf("/v1/ops/events/stream: %d %s", resp.StatusCode, media)
		}
	})

	t.Run("parameters", func(t *testing.T) {
		var checked []string
		for _, template := range routesOf(docs.Edge) {
			op := docs.Edge.Paths.Value(template).Get
			for _, p := range parameters(docs.Edge.Paths.Value(template)) {
				if p.In != openapi3.ParameterInQuery || !p.Schema.Value.Type.Is(openapi3.TypeInteger) {
					continue
				}
				checked = append(checked, template+"?"+p.Name)
				for _, bad := range badIntegers(p) {
					t.Run(template+"?"+bad, func(t *testing.T) {
						x := call(t, http.MethodGet, n.EdgeURL+template+"?"+bad)
						e := expectError(t, codes, x, http.StatusBadRequest, "invalid_parameter")
						if e.Error.Parameter != p.Name {
							t.Errorf("error.parameter %q, want %q: %s", e.Error.Parameter, p.Name, x)
						}
						if op.Responses.Status(x.status) == nil {
							t.Errorf("%d is not documented for %s: %s", x.status, template, x)
						}
						if err := conform(docs.Edge, template, nil, x, false); err != nil {
							t.Errorf("outside the document: %v\n%s", err, x)
						}
					})
				}
			}
		}
		for _, want := range contractLimits {
			if !slices.Contains(checked, want) {
				t.Errorf("%s is not documented as an integer query parameter; checked %v", want, checked)
			}
		}
	})

	t.Run("methods", func(t *testing.T) {
		envelope := docs.Edge.Components.Schemas["ErrorEnvelope"].Value
		for _, template := range routesOf(docs.Edge) {
			t.Run(template, func(t *testing.T) {
				target := fill(template, map[string]string{"proposalId": ids[0], "walletAddress": lower,
					"transactionId": ledgerclient.NewProposalID().Hex()})
				for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions} {
					x := call(t, method, n.EdgeURL+target)
					if x.status != http.StatusMethodNotAllowed || x.header.Get("Allow") != http.MethodGet {
						t.Errorf("%s, Allow %q, want 405 and Allow: GET", x, x.header.Get("Allow"))
						continue
					}
					if method == http.MethodHead {
						continue
					}
					expectError(t, codes, x, http.StatusMethodNotAllowed, "method_not_allowed")
					var v any
					if err := json.Unmarshal(x.body, &v); err != nil {
						t.Errorf("%s %s: %v", method, target, err)
					} else if err := envelope.VisitJSON(v, openapi3.EnableFormatValidation(), openapi3.MultiErrors()); err != nil {
						t.Errorf("%s %s: not the error envelope: %v\n%s", method, target, err, x.body)
					}
				}
			})
		}
	})
}

// checkEdgeRoute GETs one route of /openapi.yaml through the edge with
// every value of its parameters and validates each answer.
func checkEdgeRoute(t *testing.T, base string, docs *openapi.Documents, codes map[string]errorCode, template string, values map[string]paramValues) {
	for _, r := range requests(t, docs.Edge, template, values, true) {
		x := call(t, http.MethodGet, base+r.target)
		if err := conform(docs.Edge, template, r.params, x, r.kind != "malformed"); err != nil {
			t.Errorf("%s answer outside the document: %v\n%s", r.kind, err, x)
		}
		switch {
		case r.kind == "malformed":
			// Checked before any validator is asked: a malformed id names
			// nothing.
			expectError(t, codes, x, http.StatusNotFound, "not_found")
		case r.kind == "unknown" && (x.status == http.StatusNotFound || values[r.param].missing):
			expectError(t, codes, x, http.StatusNotFound, "not_found")
		case x.status/100 != 2:
			t.Errorf("%s: %s", r.kind, x)
		case strings.HasSuffix(template, ".yaml"):
			if want := servedDocument(docs, template); string(x.body) != want {
				t.Errorf("%s is not the embedded document (%d bytes, want %d)", template, len(x.body), len(want))
			}
		}
	}
}

// checkSourceRoute GETs one route of /openapi-validator-source.yaml from
// the validator and validates each answer; a 200 must carry the route's
// contractVersion marker.
func checkSourceRoute(t *testing.T, base string, doc *openapi3.T, marker, template string, values map[string]paramValues) {
	for _, r := range requests(t, doc, template, values, false) {
		x := call(t, http.MethodGet, base+r.target)
		if err := conform(doc, template, r.params, x, true); err != nil {
			t.Errorf("%s answer outside the document: %v\n%s", r.kind, err, x)
		}
		switch {
		case r.kind == "unknown" && (x.status == http.StatusNotFound || values[r.param].missing):
			var e struct {
				Error apierror.Error `json:"error"`
			}
			if x.status != http.StatusNotFound || json.Unmarshal(x.body, &e) != nil || e.Error.Code != apierror.NotFound {
				t.Errorf("unknown %s: %s, want 404 %s", r.param, x, apierror.NotFound)
			}
		case x.status != http.StatusOK:
			t.Errorf("%s: %s", r.kind, x)
		case marker != "":
			var v struct {
				ContractVersion string `json:"contractVersion"`
			}
			if err := json.Unmarshal(x.body, &v); err != nil || v.ContractVersion != marker {
				t.Errorf("contractVersion %q, the document declares %q: %s", v.ContractVersion, marker, x)
			}
		}
	}
}

// requests lists the GETs of a route: each known value of its path
// parameters, an unknown one and (malformed set) a malformed one; without
// path parameters, the route bare and, when it has optional query
// parameters, with each of them. A parameter nobody gave values for
// fails the test, so that a new parameter is not skipped unseen.
func requests(t *testing.T, doc *openapi3.T, template string, values map[string]paramValues, malformed bool) []request {
	t.Helper()
	var path, required, optional []*openapi3.Parameter
	for _, p := range parameters(doc.Paths.Value(template)) {
		switch {
		case p.In == openapi3.ParameterInPath:
			path = append(path, p)
		case p.In == openapi3.ParameterInQuery && p.Required:
			required = append(required, p)
		case p.In == openapi3.ParameterInQuery:
			optional = append(optional, p)
		default:
			t.Fatalf("%s: parameter %s in %s", template, p.Name, p.In)
		}
	}
	if len(path) > 1 {
		t.Fatalf("%s: more than one path parameter", template)
	}
	query := url.Values{}
	for _, p := range required {
		query.Set(p.Name, valuesOf(t, template, p, values)[0])
	}
	with := func(q url.Values) string {
		if len(q) == 0 {
			return ""
		}
		return "?" + q.Encode()
	}

	if len(path) == 0 {
		out := []request{{target: template + with(query), kind: "known"}}
		for _, p := range optional {
			for _, v := range valuesOf(t, template, p, values) {
				q := url.Values{}
				for k, vs := range query {
					q[k] = vs
				}
				q.Set(p.Name, v)
				out = append(out, request{target: template + with(q), kind: "known"})
			}
		}
		return out
	}
	p := path[0]
	pv, ok := values[p.Name]
	if !ok || (len(pv.known) == 0 && pv.unknown == "") {
		t.Fatalf("%s: no value for path parameter %s", template, p.Name)
	}
	var out []request
	add := func(kind, v string) {
		params := map[string]string{p.Name: v}
		out = append(out, request{target: fill(template, params) + with(query), params: params, kind: kind, param: p.Name})
	}
	for _, v := range pv.known {
		add("known", v)
	}
	if pv.unknown != "" {
		add("unknown", pv.unknown)
	}
	if malformed {
		add("malformed", "0x12")
	}
	return out
}

// valuesOf gives a query parameter its values: those given for its name,
// else every value of its enum.
func valuesOf(t *testing.T, template string, p *openapi3.Parameter, values map[string]paramValues) []string {
	t.Helper()
	if v := values[p.Name].known; len(v) > 0 {
		return v
	}
	var out []string
	if p.Schema != nil && p.Schema.Value != nil {
		for _, e := range p.Schema.Value.Enum {
			out = append(out, fmt.Sprint(e))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no value for query parameter %s", template, p.Name)
	}
	return out
}

// routesOf lists the paths of doc, sorted.
func routesOf(doc *openapi3.T) []string {
	return slices.Sorted(maps.Keys(doc.Paths.Map()))
}

// parameters are a path's and its GET's parameters, resolved.
func parameters(item *openapi3.PathItem) []*openapi3.Parameter {
	var out []*openapi3.Parameter
	for _, ref := range append(slices.Clone(item.Parameters), item.Get.Parameters...) {
		out = append(out, ref.Value)
	}
	return out
}

// badIntegers are query strings that put p outside its integer schema:
// below its minimum, above its maximum, not an integer, empty, repeated.
func badIntegers(p *openapi3.Parameter) []string {
	s := p.Schema.Value
	bad := []string{"x", "1.5", "", "1&" + p.Name + "=2"}
	if s.Min != nil {
		bad = append(bad, strconv.Itoa(int(*s.Min)-1))
	}
	if s.Max != nil {
		bad = append(bad, strconv.Itoa(int(*s.Max)+1))
	}
	out := make([]string, len(bad))
	for i, b := range bad {
		out[i] = p.Name + "=" + b
	}
	return out
}

func fill(template string, params map[string]string) string {
	for k, v := range params {
		template = strings.ReplaceAll(template, "{"+k+"}", v)
	}
	return template
}

func servedDocument(docs *openapi.Documents, template string) string {
	if template == "/openapi-validator-source.yaml" {
		return string(docs.SourceYAML)
	}
	return string(docs.EdgeYAML)
}

// conform validates a GET of template and its answer against doc with
// kin-openapi's filter: the request must be one the document allows
// (wellFormed; false for requests made malformed on purpose), and the
// answer's status must be listed for the route, its Content-Type one of
// that status's media types, and its body within the schema.
func conform(doc *openapi3.T, template string, params map[string]string, x exchange, wellFormed bool) error {
	item := doc.Paths.Value(template)
	req, err := http.NewRequest(http.MethodGet, x.url, nil)
	if err != nil {
		return err
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus:   true,
		MultiError:              true,
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()},
	}
	// Where and why, at the innermost schema that refused (through allOf),
	// without the schema and value printed in full.
	opts.WithCustomSchemaErrorFunc(func(e *openapi3.SchemaError) string {
		for {
			var inner *openapi3.SchemaError
			if !errors.As(e.Origin, &inner) {
				break
			}
			e = inner
		}
		return "/" + strings.Join(e.JSONPointer(), "/") + ": " + e.Reason
	})
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Options: opts,
		Route: &routers.Route{Spec: doc, Path: template, PathItem: item, Method: http.MethodGet, Operation: item.Get}}
	if wellFormed {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return fmt.Errorf("the request is outside the document: %w", err)
		}
	}
	// A YAML document is described as text, which kin-openapi would
	// decode into its values: the filter checks the status only, the
	// media type is checked here and the text by the caller.
	if mt, _, _ := mime.ParseMediaType(x.header.Get("Content-Type")); mt == "application/yaml" {
		opts.ExcludeResponseBody = true
		if r := item.Get.Responses.Status(x.status); r != nil && r.Value.Content.Get(mt) == nil {
			return fmt.Errorf("media type %s is not documented for %d", mt, x.status)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.status, Header: x.header, Options: opts}
	out.SetBodyBytes(x.body)
	return openapi3filter.ValidateResponse(context.Background(), out)
}

type errorCode struct {
	Code      string `json:"code"`
	Status    int    `json:"status"`
	Retryable bool   `json:"retryable"`
}

// errorCodes reads x-error-codes of the edge document.
func errorCodes(t *testing.T, doc *openapi3.T) map[string]errorCode {
	t.Helper()
	raw, err := json.Marshal(doc.Extensions["x-error-codes"])
	if err != nil {
		t.Fatal(err)
	}
	var list []errorCode
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		t.Fatalf("x-error-codes: %v %s", err, raw)
	}
	out := map[string]errorCode{}
	for _, c := range list {
		out[c.Code] = c
	}
	return out
}

type opsError struct {
	Version string `json:"version"`
	Error   struct {
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
		Parameter string `json:"parameter"`
	} `json:"error"`
}

// expectError checks that x is the ops error envelope with status and
// code, and that the code has that status and its retryable value in
// x-error-codes.
func expectError(t *testing.T, codes map[string]errorCode, x exchange, status int, code string) opsError {
	t.Helper()
	var e opsError
	if err := json.Unmarshal(x.body, &e); err != nil || x.status != status || e.Version != "v1" || e.Error.Code != code {
		t.Errorf("%s, want %d %s in the error envelope", x, status, code)
		return e
	}
	if c, ok := codes[code]; !ok || c.Status != status || c.Retryable != e.Error.Retryable {
		t.Errorf("%s: x-error-codes gives %s %+v", x, code, c)
	}
	return e
}

// commitMock signs and submits p in MOCK mode (no payment) and waits until
// it is COMMITTED; it returns the proposal id.
func commitMock(t *testing.T, n *harness.Network, key *ecdsa.PrivateKey, p *ledgerclient.Proposal) string {
	t.Helper()
	form, _, err := ledgerclient.Form(n.Config, key, p, common.Hash{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := n.Client.Submit(context.Background(), p.Action, form)
	if err != nil || sub.HTTPStatus != http.StatusAccepted {
		t.Fatalf("submit %s: %+v %v", p.Action, sub, err)
	}
	if s := final(t, n, p.ID); !api.Committed(s.Status) {
		t.Fatalf("%s %s: %s (%s)", p.Action, p.ID.Hex(), s.Status, s.Reason)
	}
	return p.ID.Hex()
}
