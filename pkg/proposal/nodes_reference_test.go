package proposal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
)

// referenceNodes is the encoding/json expansion Nodes replaced, kept
// unchanged as the definition Nodes must match: the same messages accepted
// and the same nodes, byte for byte (FuzzNodesMatchesReference).
func referenceNodes(path string, message []byte) ([]NodeSpec, error) {
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
	if err := referenceReadObject(dec, path, depthOf(path), &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMessage, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrMessage)
	}
	return out, nil
}

// referenceReadObject reads one object (its '{' not yet consumed) as the
// node at path.
func referenceReadObject(dec *json.Decoder, path string, depth int, out *[]NodeSpec) error {
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
			value, err := referenceCanonicalValue(raw)
			if err != nil {
				return fmt.Errorf("property %q at %s: %v", name, path, err)
			}
			if name == CIDProperty {
				if err := referenceCheckCIDValue(value); err != nil {
					return fmt.Errorf("property %q at %s: %v", name, path, err)
				}
			}
			if name == IntentProperty {
				if !regexp.MustCompile(`^"0x[0-9a-fA-F]{64}"$`).MatchString(value) {
					return fmt.Errorf("property %q at %s: must be an upload intent's token", name, path)
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
		if err := referenceReadObject(d, path+"/"+c.name, depth+1, out); err != nil {
			return err
		}
	}
	return nil
}

// referenceCanonicalValue re-encodes a scalar or an array of scalars
// compactly. Numbers keep their literal text, so every validator stores the
// same bytes.
func referenceCanonicalValue(raw json.RawMessage) (string, error) {
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

func referenceCheckCIDValue(valueJSON string) error {
	var cid string
	if err := json.Unmarshal([]byte(valueJSON), &cid); err != nil {
		return errors.New("must be a CID string")
	}
	return ValidateCID(cid)
}
