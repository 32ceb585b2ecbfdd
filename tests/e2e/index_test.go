package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/openapi"
	"github.com/contentledger/contentledger/tests/harness"
)

// TestSourceDocumentIsTheIndex holds /openapi-validator-source.yaml to a
// running validator's /v1/index: every source route the validator serves
// is described, every route described is served (GET), and each described
// route's x-contract-layer is the layer the index gives it. Parameters are
// compared by position, not name (the validator's {id} is the document's
// {proposalId}).
func TestSourceDocumentIsTheIndex(t *testing.T) {
	docs, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := harness.Start(t, harness.Options{Mode: "MOCK"})
	var ix api.RouteIndex
	if err := harness.GetJSON(nil, 10*time.Second, n.ValidatorURL+"/v1/index", &ix); err != nil {
		t.Fatal(err)
	}
	// Every route of the contract is served (the MOCK mode test surfaces
	// too): none missing, none unserved.
	if len(ix.MissingRoutes) != 0 || len(ix.MissingSourceRoutes) != 0 || len(ix.ContractRoutes) == 0 {
		t.Fatalf("/v1/index: missing %v, missing source routes %v, %d contract routes", ix.MissingRoutes, ix.MissingSourceRoutes, len(ix.ContractRoutes))
	}
	for _, r := range ix.ContractRoutes {
		if !r.Served {
			t.Errorf("/v1/index: the contract's %s %s is not served", r.Method, r.Path)
		}
	}

	// Two routes of one pattern would hide each other in the maps.
	served := map[string]api.RouteEntry{} // by pattern
	for _, r := range ix.Routes {
		if r.Method != http.MethodGet {
			continue
		}
		if other, ok := served[pattern(r.Path)]; ok {
			t.Fatalf("the index lists %s and %s", other.Path, r.Path)
		}
		served[pattern(r.Path)] = r
	}
	described := map[string]string{} // the document's path by pattern
	for path, item := range docs.Source.Paths.Map() {
		if other, ok := described[pattern(path)]; ok {
			t.Fatalf("the document describes %s and %s", other, path)
		}
		described[pattern(path)] = path
		layer, _ := item.Extensions["x-contract-layer"].(string)
		r, ok := served[pattern(path)]
		switch {
		case !ok:
			t.Errorf("%s is described and the validator does not serve it", path)
		case layer != r.Layer:
			t.Errorf("%s: x-contract-layer %q, /v1/index gives %s the layer %q", path, layer, r.Path, r.Layer)
		}
	}
	var sources int
	for p, r := range served {
		if r.Layer != api.LayerSource {
			continue
		}
		sources++
		if _, ok := described[p]; !ok {
			t.Errorf("the validator serves the source route %s, which the document does not describe", r.Path)
		}
	}
	// The contract's source routes are 29 of them; a test that compared
	// nothing would pass too.
	if sources < 29 {
		t.Errorf("the index lists %d source routes", sources)
	}
}

// pattern writes a path template with its parameters unnamed.
func pattern(template string) string {
	parts := strings.Split(template, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			parts[i] = "{}"
		}
	}
	return strings.Join(parts, "/")
}
