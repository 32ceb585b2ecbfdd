// Package access decides which bearer tokens open which access lane of the
// validator's HTTP API. A lane is a set of routes with one purpose (submit,
// ops-read, operator, mock); each route of the API's route table names the
// lane it belongs to. Tokens come from the environment and from a tokens
// file that is re-read when it changes, so they can be rotated without a
// restart. See DESIGN.md.
package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"
)

// Lane is a set of routes that one kind of caller needs.
type Lane string

// The lanes.
const (
	// Submit is an author's: proposing writes and deletes, proposal
	// status, content and wallet reads.
	Submit Lane = "submit"
	// OpsRead is every read a dashboard, the edge or Prometheus needs.
	OpsRead Lane = "ops-read"
	// Operator changes the cluster or the GC accounts: membership, GC
	// limits, executing debt, paying it by hand.
	Operator Lane = "operator"
	// Mock moves the MOCK mode epoch clock (MOCK mode only).
	Mock Lane = "mock"
)

// all names every lane in a tokens file.
const all = "all"

// Lanes returns every lane, in the order of their privilege.
func Lanes() []Lane { return []Lane{Submit, OpsRead, Mock, Operator} }

// ParseLane reads a lane's name.
func ParseLane(s string) (Lane, bool) {
	l := Lane(s)
	return l, slices.Contains(Lanes(), l)
}

// Decision is what a token is worth on a lane.
type Decision int

// The decisions.
const (
	// Open: no token guards the lane; anyone may use it.
	Open Decision = iota
	// Granted: the token is one of the lane's.
	Granted
	// Missing: the lane is guarded and no token was given (401).
	Missing
	// Denied: the token given is not one of the lane's (403).
	Denied
)

// Tokens are the tokens of each lane. The zero value guards nothing. A
// Tokens is not changed once in use: a reload builds a new one.
type Tokens struct {
	lanes map[Lane][]token
}

// token is one token of a lane: its digest, compared in constant time,
// and its value, for the validator's own calls to its peers.
type token struct {
	digest [sha256.Size]byte
	value  string
}

// Add lets value open lane.
func (t *Tokens) Add(lane Lane, value string) {
	if t.lanes == nil {
		t.lanes = map[Lane][]token{}
	}
	t.lanes[lane] = append(t.lanes[lane], token{digest: sha256.Sum256([]byte(value)), value: value})
}

// AddAll lets value open every lane.
func (t *Tokens) AddAll(value string) {
	for _, l := range Lanes() {
		t.Add(l, value)
	}
}

// Guarded reports whether a token is needed on lane.
func (t Tokens) Guarded(lane Lane) bool { return len(t.lanes[lane]) > 0 }

// Check decides what value is worth on lane; value "" is no token. Every
// token of the lane is compared, each in constant time, so the time taken
// tells nothing of which token came close.
func (t Tokens) Check(lane Lane, value string) Decision {
	tokens := t.lanes[lane]
	switch {
	case len(tokens) == 0:
		return Open
	case value == "":
		return Missing
	}
	digest := sha256.Sum256([]byte(value))
	match := 0
	for _, tk := range tokens {
		match |= subtle.ConstantTimeCompare(digest[:], tk.digest[:])
	}
	if match == 1 {
		return Granted
	}
	return Denied
}

// First returns a token of lane, "" when it is open: what the validator
// presents when it calls its peers on that lane.
func (t Tokens) First(lane Lane) string {
	if tokens := t.lanes[lane]; len(tokens) > 0 {
		return tokens[0].value
	}
	return ""
}

// count is the number of tokens of each lane, for logs (never the tokens).
func (t Tokens) count() map[Lane]int {
	out := map[Lane]int{}
	for _, l := range Lanes() {
		out[l] = len(t.lanes[l])
	}
	return out
}

// Merge returns the tokens of t and u together.
func (t Tokens) Merge(u Tokens) Tokens {
	var out Tokens
	for _, src := range []Tokens{t, u} {
		for l, tokens := range src.lanes {
			for _, tk := range tokens {
				out.Add(l, tk.value)
			}
		}
	}
	return out
}

// ParseList reads a comma-separated list of tokens for lane (an
// environment setting), checking each with check.
func ParseList(lane Lane, list string, check func(string) error) (Tokens, error) {
	var t Tokens
	for v := range strings.SplitSeq(list, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if err := check(v); err != nil {
			return Tokens{}, fmt.Errorf("a token of the %s lane %w", lane, err)
		}
		t.Add(lane, v)
	}
	return t, nil
}

// ParseFile reads a tokens file: one token per line, after the lanes it
// opens, comma-separated ("all" for every lane):
//
//	# the edge and Prometheus
//	ops-read 9c1f...
//	operator,ops-read 4b7e...
//	all 0d2a...
//
// Blank lines and lines starting with # are skipped. A token may appear on
// several lines. Errors name the line, never the token.
func ParseFile(data []byte, check func(string) error) (Tokens, error) {
	var t Tokens
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lanes, value, ok := strings.Cut(line, " ")
		value = strings.TrimSpace(value)
		if !ok || value == "" || strings.ContainsAny(value, " \t") {
			return Tokens{}, fmt.Errorf("line %d: want \"<lane>[,<lane>...] <token>\"", i+1)
		}
		if err := check(value); err != nil {
			return Tokens{}, fmt.Errorf("line %d: the token %w", i+1, err)
		}
		for name := range strings.SplitSeq(lanes, ",") {
			if name == all {
				t.AddAll(value)
				continue
			}
			l, ok := ParseLane(name)
			if !ok {
				return Tokens{}, fmt.Errorf("line %d: unknown lane %q (want %s or %s)", i+1, name, laneNames(), all)
			}
			t.Add(l, value)
		}
	}
	return t, nil
}

// laneNames lists the lanes' names for messages.
func laneNames() string {
	var names []string
	for _, l := range Lanes() {
		names = append(names, string(l))
	}
	return strings.Join(names, ", ")
}

// MinTokenLen is the shortest token accepted outside MOCK mode: a bearer
// token is a password that never expires, and one that can be guessed opens
// its lane to anyone.
const MinTokenLen = 16

// StrongToken refuses a token shorter than MinTokenLen or with control
// characters (it could not be sent in a header).
func StrongToken(v string) error {
	if err := PrintableToken(v); err != nil {
		return err
	}
	if len(v) < MinTokenLen {
		return fmt.Errorf("is %d characters long; give at least %d (e.g. openssl rand -hex 32)", len(v), MinTokenLen)
	}
	return nil
}

// PrintableToken refuses a token with characters a header cannot carry.
func PrintableToken(v string) error {
	for _, r := range v {
		if r <= ' ' || r == 0x7f || r > 0x7e {
			return fmt.Errorf("holds a character a header cannot carry (only printable ASCII, no spaces)")
		}
	}
	return nil
}
