// Package openapi holds the edge's two published descriptions, embedded in
// the binary: openapi.yaml, the /ops/v1 contract the edge serves, and
// openapi-validator-source.yaml, the validator answers the edge accepts.
// They are the single source of truth: the route table is tested against
// the first, and every answer of a validator is checked against the second
// before the edge uses it.
package openapi

import (
	"context"
	_ "embed" // the documents are embedded
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// The documents are strings, so that nothing can change them.
var (
	//go:embed openapi.yaml
	edgeYAML string
	//go:embed openapi-validator-source.yaml
	sourceYAML string
)

// Documents are the two descriptions, as published and as loaded.
type Documents struct {
	// EdgeYAML and SourceYAML are served as they are.
	EdgeYAML, SourceYAML []byte
	Edge, Source         *openapi3.T
}

// Load parses and validates both documents. It fails only on a document
// that is not valid OpenAPI, which the package's tests rule out.
func Load() (*Documents, error) {
	edge, err := load("openapi.yaml", edgeYAML)
	if err != nil {
		return nil, err
	}
	source, err := load("openapi-validator-source.yaml", sourceYAML)
	if err != nil {
		return nil, err
	}
	return &Documents{EdgeYAML: []byte(edgeYAML), SourceYAML: []byte(sourceYAML), Edge: edge, Source: source}, nil
}

func load(name, data string) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("openapi: %s: %w", name, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: %s is not valid: %w", name, err)
	}
	return doc, nil
}

// ErrUndocumented is returned by Check for a status the source route does
// not list. The caller decides what it means: a 5xx is a validator that
// could not answer, anything else an answer outside the contract.
var ErrUndocumented = errors.New("status not in the source contract")

// SourceContract checks validator answers against the source document.
// It is read-only once built, so one is shared by every request.
type SourceContract struct {
	routes map[string]sourceRoute
}

type sourceRoute struct {
	byStatus map[int]*openapi3.Schema
	// marker is the contractVersion the 200 answer must carry, "" for
	// the routes without one (/health).
	marker string
}

// SourceContract indexes the GET answers of every route of the source
// document by path template and status.
func (d *Documents) SourceContract() (*SourceContract, error) {
	c := &SourceContract{routes: map[string]sourceRoute{}}
	for path, item := range d.Source.Paths.Map() {
		if item.Get == nil {
			return nil, fmt.Errorf("openapi: source route %s has no GET", path)
		}
		r := sourceRoute{byStatus: map[int]*openapi3.Schema{}}
		for code, resp := range item.Get.Responses.Map() {
			status, err := strconv.Atoi(code)
			if err != nil {
				return nil, fmt.Errorf("openapi: source route %s: response %q is not a status", path, code)
			}
			media := resp.Value.Content.Get("application/json")
			if media == nil || media.Schema == nil || media.Schema.Value == nil {
				return nil, fmt.Errorf("openapi: source route %s: response %d has no JSON schema", path, status)
			}
			r.byStatus[status] = media.Schema.Value
		}
		if ok := r.byStatus[200]; ok != nil {
			r.marker = markerOf(ok)
		}
		c.routes[path] = r
	}
	return c, nil
}

// markerOf returns the contractVersion a schema fixes: the single value of
// its contractVersion property's enum, looked up through allOf; "" when it
// fixes none.
func markerOf(s *openapi3.Schema) string {
	if p := s.Properties["contractVersion"]; p != nil && p.Value != nil && len(p.Value.Enum) == 1 {
		if m, ok := p.Value.Enum[0].(string); ok {
			return m
		}
	}
	for _, sub := range s.AllOf {
		if sub.Value != nil {
			if m := markerOf(sub.Value); m != "" {
				return m
			}
		}
	}
	return ""
}

// Routes lists the path templates of the source document.
func (c *SourceContract) Routes() []string {
	out := make([]string, 0, len(c.routes))
	for p := range c.routes {
		out = append(out, p)
	}
	return out
}

// Marker is the contractVersion of route's 200 answer.
func (c *SourceContract) Marker(route string) string { return c.routes[route].marker }

// Check validates a validator's answer to route, a path template of the
// source document: status must be listed for the route, and body must
// match its schema. A wrong marker is named as such, since it is the
// usual way a validator of another version shows.
func (c *SourceContract) Check(route string, status int, body []byte) error {
	r, ok := c.routes[route]
	if !ok {
		return fmt.Errorf("%s is not a route of the source contract", route)
	}
	schema := r.byStatus[status]
	if schema == nil {
		return fmt.Errorf("%w: %s answered %d", ErrUndocumented, route, status)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s answered %d with a body that is not JSON", route, status)
	}
	if status == 200 && r.marker != "" {
		obj, _ := v.(map[string]any)
		if got, _ := obj["contractVersion"].(string); got != r.marker {
			return fmt.Errorf("%s answered contractVersion %q, the edge reads %q", route, got, r.marker)
		}
	}
	if err := schema.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.EnableFormatValidation()); err != nil {
		return fmt.Errorf("%s answered %d with a body outside its contract: %s", route, status, schemaReason(err))
	}
	return nil
}

// schemaReason shortens a schema error to where and why, without the
// schema and value kin-openapi prints in full.
func schemaReason(err error) string {
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		return fmt.Sprintf("/%s: %s", strings.Join(se.JSONPointer(), "/"), se.Reason)
	}
	return err.Error()
}
