package proposal

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// DefaultPrimaryType is the node type of a node whose message names none.
const DefaultPrimaryType = "nt:unstructured"

const (
	// PrimaryTypeProperty names the node type in a message object.
	PrimaryTypeProperty = "jcr:primaryType"
	// TextProperty holds a message that is not a JSON object.
	TextProperty = "message"
	// CIDProperty holds the CID of a binary asset. With IntentProperty, it
	// is one of the two ledger: properties a client may write.
	CIDProperty = "ledger:cid"
	// IntentProperty names a completed upload intent by its token
	// (docs/adr/0037): apply replaces it with the CID the upload recorded,
	// as ledger:cid, and rejects the write when the intent is not the
	// wallet's or not completed.
	IntentProperty = "ledger:intent"
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
	if isObject(message) {
		return expandObject(path, message)
	}
	return []NodeSpec{{Path: path, PrimaryType: DefaultPrimaryType, Properties: []Property{{Name: TextProperty, ValueJSON: quoteText(message)}}}}, nil
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

// checkName accepts property and child names: path-segment characters, not
// "." or "..", and nothing in the system namespace except ledger:cid and
// ledger:intent.
func checkName(name string) error {
	if len(name) > maxNameBytes || !validSegment(name) {
		return fmt.Errorf("name %q is not 1-%d of [A-Za-z0-9._:-] (and not . or ..)", name, maxNameBytes)
	}
	if strings.HasPrefix(name, systemNamespace) && name != CIDProperty && name != IntentProperty {
		return fmt.Errorf("name %q is in the system namespace %q", name, systemNamespace)
	}
	return nil
}
