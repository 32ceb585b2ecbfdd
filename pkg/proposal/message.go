package proposal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// DefaultPrimaryType is the node type of a node whose message names none.
const DefaultPrimaryType = "nt:unstructured"

const (
	// PrimaryTypeProperty names the node type in a message object.
	PrimaryTypeProperty = "jcr:primaryType"
	// TextProperty holds a message that is not a JSON object.
	TextProperty = "message"
	// CIDProperty holds the CID of a binary asset, the only ledger: property
	// a client may write.
	CIDProperty = "ledger:cid"
	// systemNamespace is reserved for properties the system writes.
	systemNamespace = "ledger:"
	// maxNameBytes bounds property and child node names.
	maxNameBytes = 128
)

// Property is one node property with its value as canonical JSON text.
type Property struct {
	Name      string
	ValueJSON string
}

// NodeSpec is one node a message writes: the node itself or a child node
// made from a nested object.
type NodeSpec struct {
	Path        string
	PrimaryType string
	Properties  []Property // sorted by name
}

// ErrMessage is wrapped by every error Nodes returns.
var ErrMessage = errors.New("invalid message")

// Nodes expands a message into the node at path and one child node per nested
// object, parents before children, children in name order. A message that is
// a JSON object becomes properties; any other text is kept whole as the
// string property "message". Text that starts like an object ('{') but is not
// valid JSON is refused rather than silently stored as text.
//
// Nodes is deterministic: apply calls it on every validator, and intake
// checks every message with it first (checkMessage) so that apply never
// meets a message it refuses.
func Nodes(path string, message []byte) ([]NodeSpec, error) {
	if !isObject(message) {
		text, err := json.Marshal(string(message))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMessage, err)
		}
		return []NodeSpec{{Path: path, PrimaryType: DefaultPrimaryType, Properties: []Property{{Name: TextProperty, ValueJSON: string(text)}}}}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(message))
	dec.UseNumber()
	var out []NodeSpec
	if err := readObject(dec, path, depthOf(path), &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMessage, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrMessage)
	}
	return out, nil
}

// isObject reports whether Nodes reads message as a JSON object rather than
// keeping it whole as text.
func isObject(message []byte) bool {
	trimmed := bytes.TrimLeft(message, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

// checkMessage returns the error Nodes returns for message at path, for
// intake, which keeps no nodes. Text is never refused (it is stored as one
// JSON string, and encoding a string cannot fail), so only an object is
// expanded: intake does not encode every text message only to drop it.
func checkMessage(path string, message []byte) error {
	if !isObject(message) {
		return nil
	}
	_, err := Nodes(path, message)
	return err
}

// depthOf counts the segments of a full path ("/a/b" has 2).
func depthOf(path string) int { return strings.Count(path, "/") }

// readObject reads one object (its '{' not yet consumed) as the node at path.
func readObject(dec *json.Decoder, path string, depth int, out *[]NodeSpec) error {
	if tok, err := dec.Token(); err != nil {
		return err
	} else if tok != json.Delim('{') {
		return fmt.Errorf("expected an object at %s", path)
	}
	node := NodeSpec{Path: path, PrimaryType: DefaultPrimaryType}
	at := len(*out)
	*out = append(*out, node)
	seen := map[string]bool{}
	type child struct {
		name string
		raw  json.RawMessage
	}
	var children []child
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string) // object keys are always strings
		if seen[name] {
			return fmt.Errorf("duplicate key %q at %s", name, path)
		}
		seen[name] = true
		if err := checkName(name); err != nil {
			return fmt.Errorf("at %s: %v", path, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		raw = bytes.TrimSpace(raw)
		switch {
		case raw[0] == '{':
			if depth+1 > maxFullDepth {
				return fmt.Errorf("nesting at %s/%s is deeper than %d path segments", path, name, maxFullDepth)
			}
			children = append(children, child{name, raw})
		case name == PrimaryTypeProperty:
			var t string
			if err := json.Unmarshal(raw, &t); err != nil || !validSegment(t) {
				return fmt.Errorf("%s at %s must be a name string", PrimaryTypeProperty, path)
			}
			node.PrimaryType = t
		default:
			value, err := canonicalValue(raw)
			if err != nil {
				return fmt.Errorf("property %q at %s: %v", name, path, err)
			}
			if name == CIDProperty {
				if err := checkCIDValue(value); err != nil {
					return fmt.Errorf("property %q at %s: %v", name, path, err)
				}
			}
			node.Properties = append(node.Properties, Property{Name: name, ValueJSON: value})
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	sort.Slice(node.Properties, func(i, j int) bool { return node.Properties[i].Name < node.Properties[j].Name })
	(*out)[at] = node
	sort.Slice(children, func(i, j int) bool { return children[i].name < children[j].name })
	for _, c := range children {
		d := json.NewDecoder(bytes.NewReader(c.raw))
		d.UseNumber()
		if err := readObject(d, path+"/"+c.name, depth+1, out); err != nil {
			return err
		}
	}
	return nil
}

// checkName accepts property and child names: path-segment characters, not
// "." or "..", and nothing in the system namespace except ledger:cid.
func checkName(name string) error {
	if len(name) > maxNameBytes || !validSegment(name) {
		return fmt.Errorf("name %q is not 1-%d of [A-Za-z0-9._:-] (and not . or ..)", name, maxNameBytes)
	}
	if strings.HasPrefix(name, systemNamespace) && name != CIDProperty {
		return fmt.Errorf("name %q is in the system namespace %q", name, systemNamespace)
	}
	return nil
}

// canonicalValue re-encodes a scalar or an array of scalars compactly.
// Numbers keep their literal text, so every validator stores the same bytes.
func canonicalValue(raw json.RawMessage) (string, error) {
	if raw[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var items []any
		if err := dec.Decode(&items); err != nil {
			return "", err
		}
		for _, it := range items {
			switch it.(type) {
			case map[string]any, []any:
				return "", errors.New("arrays may hold only strings, numbers, booleans and null")
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func checkCIDValue(valueJSON string) error {
	var cid string
	if err := json.Unmarshal([]byte(valueJSON), &cid); err != nil {
		return errors.New("must be a CID string")
	}
	return ValidateCID(cid)
}
