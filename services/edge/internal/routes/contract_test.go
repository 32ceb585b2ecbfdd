package routes

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/services/edge/internal/auth"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// table returns the route table of an edge built the way New builds it.
func table(t *testing.T) []route {
	t.Helper()
	pool, err := upstream.NewPool(upstream.Config{URLs: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, contract := documents(t)
	return (&server{up: pool, contract: contract, log: zap.NewNop()}).routes()
}

// example fills a path template with a valid value of each parameter.
func example(template string) string {
	return strings.NewReplacer("{proposalId}", knownID, "{walletAddress}", knownWallet, "{transactionId}", knownTx).Replace(template)
}

// TestRouteTableIsTheDocument holds the route table and /openapi.yaml to
// the same paths, in both directions, and checks what echo registered.
func TestRouteTableIsTheDocument(t *testing.T) {
	docs, _ := documents(t)
	if docs.Edge.Info.Version != "1.0.0" || !strings.HasPrefix(docs.Edge.OpenAPI, "3.") {
		t.Fatalf("edge document is OpenAPI %s version %s", docs.Edge.OpenAPI, docs.Edge.Info.Version)
	}
	var code, documented []string
	for _, r := range table(t) {
		code = append(code, r.path)
	}
	for p, item := range docs.Edge.Paths.Map() {
		documented = append(documented, p)
		if item.Get == nil || len(item.Operations()) != 1 {
			t.Errorf("%s: the document gives it other operations than GET", p)
		}
	}
	sort.Strings(code)
	sort.Strings(documented)
	if !slices.Equal(code, documented) {
		t.Fatalf("route table and /openapi.yaml differ:\ncode:       %v\ndocumented: %v", code, documented)
	}
	if n := len(slices.DeleteFunc(slices.Clone(code), func(p string) bool { return !strings.HasPrefix(p, "/ops/v1/") })); n != 42 {
		t.Errorf("%d /ops/v1 routes; the contract's table has 42", n)
	}

	e := New(Config{}, nil, nil, zap.NewNop())
	registered := map[string]bool{}
	for _, r := range e.Routes() {
		if r.Method == http.MethodGet && !strings.HasSuffix(r.Path, "*") {
			registered[r.Path] = true
		}
	}
	for _, p := range documented {
		if !registered[echoPath(p)] {
			t.Errorf("%s is documented and not registered", p)
		}
		delete(registered, echoPath(p))
	}
	for p := range registered {
		t.Errorf("%s is registered and not documented", p)
	}
}

// TestConsumedSourcesAreInTheSourceDocument: every source route the code
// reads is a path of /openapi-validator-source.yaml, which describes
// every source route a validator serves (the four snapshots the edge
// does not read among them: tests/e2e holds it to /v1/index).
func TestConsumedSourcesAreInTheSourceDocument(t *testing.T) {
	_, contract := documents(t)
	described := contract.Routes()
	for _, r := range consumedSources() {
		if !slices.Contains(described, r) {
			t.Errorf("the edge reads %s, which the source document does not describe", r)
		}
	}
}

// TestErrorCodesAreTheDocument holds codeStatus to x-error-codes.
func TestErrorCodesAreTheDocument(t *testing.T) {
	docs, _ := documents(t)
	for _, c := range errorCodes(t, docs.Edge) {
		status, retryable := codeStatus(c.Code)
		if status != c.Status || retryable != c.Retryable {
			t.Errorf("%s: code answers %d retryable %v, the document says %d %v", c.Code, status, retryable, c.Status, c.Retryable)
		}
	}
}

type errorCode struct {
	Code      string `json:"code"`
	Status    int    `json:"status"`
	Retryable bool   `json:"retryable"`
}

func errorCodes(t *testing.T, doc *openapi3.T) []errorCode {
	t.Helper()
	raw, err := json.Marshal(doc.Extensions["x-error-codes"])
	if err != nil {
		t.Fatal(err)
	}
	var out []errorCode
	if err := json.Unmarshal(raw, &out); err != nil || len(out) == 0 {
		t.Fatalf("x-error-codes: %v %s", err, raw)
	}
	return out
}

// TestLiveAnswersMatchTheDocument asks every route of an edge in front of
// three healthy validators, and a few ways to fail, and validates every
// answer against the document's schema for its route and status.
func TestLiveAnswersMatchTheDocument(t *testing.T) {
	docs, _ := documents(t)
	codes := map[string]bool{}
	for _, c := range errorCodes(t, docs.Edge) {
		codes[c.Code] = true
	}
	fc := newCluster(t, 3)
	open := edge(t, auth.Lanes{}, fc.urls()...)
	locked := edge(t, auth.Lanes{APIToken: "general", RuntimeToken: "runtime"}, fc.urls()...)
	down := edge(t, auth.Lanes{}, deadURL(t))

	check := func(template, url string) {
		t.Helper()
		status, header, raw := fetch(t, http.MethodGet, url, "")
		validate(t, docs.Edge, template, status, header, raw, codes)
	}
	for _, r := range table(t) {
		check(r.path, open.URL+example(r.path))
		if strings.HasPrefix(r.path, opsPrefix) {
			check(r.path, locked.URL+example(r.path))
			check(r.path, down.URL+example(r.path))
		}
	}
	check("/ops/v1/explorer/proposal/{proposalId}", open.URL+"/ops/v1/explorer/proposal/"+unknownID)
	check("/ops/v1/explorer/proposal/{proposalId}", open.URL+"/ops/v1/explorer/proposal/0x12")
	check("/ops/v1/transactions/{transactionId}", open.URL+"/ops/v1/transactions/nothex")
	check("/ops/v1/transactions/{transactionId}", open.URL+"/ops/v1/transactions/"+unknownID)
	check("/ops/v1/fragmentation/metrics/{walletAddress}", open.URL+"/ops/v1/fragmentation/metrics/0x12")
	check("/ops/v1/events/recent", open.URL+"/ops/v1/events/recent?limit=51")
	check("/ops/v1/fragmentation/top", open.URL+"/ops/v1/fragmentation/top?limit=0")
	check("/ops/v1/fragmentation/top", open.URL+"/ops/v1/fragmentation/top?limit=1")
	check("/ops/v1/fragmentation/metrics/{walletAddress}", open.URL+"/ops/v1/fragmentation/metrics/0x"+strings.Repeat("3", 40))
}

// validate checks one answer against the document: its status is listed
// for the route, its body matches that status's schema, and an error's
// code is one of x-error-codes.
func validate(t *testing.T, doc *openapi3.T, template string, status int, header http.Header, raw []byte, codes map[string]bool) {
	t.Helper()
	op := doc.Paths.Value(template).Get
	resp := op.Responses.Status(status)
	if resp == nil {
		t.Errorf("%s answered %d, which the document does not list: %s", template, status, raw)
		return
	}
	if !strings.HasPrefix(template, opsPrefix) && template != "/health" {
		if ct := header.Get("Content-Type"); resp.Value.Content.Get(ct) == nil {
			t.Errorf("%s: content type %q is not documented", template, ct)
		}
		return
	}
	media := resp.Value.Content.Get("application/json")
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("%s: not JSON: %s", template, raw)
		return
	}
	if err := media.Schema.Value.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.EnableFormatValidation(), openapi3.MultiErrors()); err != nil {
		t.Errorf("%s answered %d outside the document: %v\n%s", template, status, err, raw)
	}
	if status >= 400 {
		code, _ := v.(map[string]any)["error"].(map[string]any)["code"].(string)
		if !codes[code] {
			t.Errorf("%s answered code %q, which x-error-codes does not list", template, code)
		}
	}
}

// TestDesignTableIsTheRouteTable holds the table "Routes and their
// sources" of DESIGN.md to the /ops/v1 routes of the code, each named once:
// every route says what it reads, and none is left waiting for a source
// route (TestAuthMatrix expects 200 from each in front of healthy
// validators).
func TestDesignTableIsTheRouteTable(t *testing.T) {
	design, err := os.ReadFile("../../DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(design), "<!-- routes:begin -->")
	section, _, ended := strings.Cut(section, "<!-- routes:end -->")
	if !found || !ended {
		t.Fatal("DESIGN.md: no routes:begin and routes:end markers")
	}
	row := regexp.MustCompile(`(?m)^\| ([a-z][^|]*[^ |]) \|`)
	var documented []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if m[1] == "route" { // the header
			continue
		}
		for name := range strings.SplitSeq(m[1], ", ") {
			documented = append(documented, opsPrefix+name)
		}
	}
	var code []string
	for _, r := range table(t) {
		if strings.HasPrefix(r.path, opsPrefix) {
			code = append(code, r.path)
		}
	}
	sort.Strings(documented)
	sort.Strings(code)
	if !slices.Equal(documented, code) {
		t.Fatalf("DESIGN.md names:\n%s\nthe route table has:\n%s", strings.Join(documented, "\n"), strings.Join(code, "\n"))
	}
}
