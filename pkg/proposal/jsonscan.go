package proposal

// Messages are read and written as JSON by hand rather than with
// encoding/json: apply expands every write on every validator, and
// encoding/json (a Decoder's tokens and raw values, then Compact and
// Unmarshal on each value) was close to half of apply's time on object
// messages. One pass over the bytes checks the grammar and the node rules
// together, and cuts names and values out of a single copy of the message.
//
// The result must not drift from what validators stored before: the
// differential fuzz test FuzzNodesMatchesReference holds Nodes to the
// encoding/json implementation it replaced (nodes_reference_test.go), the
// same messages accepted and the same nodes byte for byte.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxGuess bounds the slices expandObject sizes up front.
const maxGuess = 64

// objectScanner reads a message that is a JSON object into nodes.
type objectScanner struct {
	// msg is the message copied once: names and values are substrings of
	// it rather than one allocation each. They keep it alive, which costs
	// no more than the message they came from.
	msg string
	pos int // next byte to read
	out []NodeSpec
	// props and kids collect the properties and children of the objects
	// being read, innermost object last; each object takes its own off the
	// end when it closes.
	props []Property
	kids  []childSpan
	// done holds the properties of the objects closed so far, each node's
	// Properties a full slice expression of it: one allocation for all the
	// nodes rather than one each.
	done []Property
}

// childSpan is a child node of the object being read: its name and its
// subtree, out[start:end], parent first.
type childSpan struct {
	name       string
	start, end int
}

// expandObject is Nodes for a message that isObject.
func expandObject(path string, message []byte) ([]NodeSpec, error) {
	s := &objectScanner{msg: string(message)}
	// Every object is a '{' and every property a ':', so counting them
	// sizes the slices once (braces and colons inside strings only make the
	// guess larger, hence the bounds).
	objects, names := strings.Count(s.msg, "{"), strings.Count(s.msg, ":")
	s.out = make([]NodeSpec, 0, min(objects, maxGuess))
	s.kids = make([]childSpan, 0, min(objects-1, maxGuess))
	s.props = make([]Property, 0, min(names, maxGuess))
	s.done = make([]Property, 0, min(names, maxGuess))
	s.skipSpace()
	if err := s.object(path, depthOf(path)); err != nil {
		return nil, err
	}
	s.skipSpace()
	if s.pos < len(s.msg) {
		return nil, fmt.Errorf("%w: trailing data after the JSON object at offset %d", ErrMessage, s.pos)
	}
	return s.out, nil
}

// object reads the object whose '{' is at s.pos as the node at path (depth
// segments), appending it and then its children's subtrees to s.out.
// Recursion is bounded by maxFullDepth.
func (s *objectScanner) object(path string, depth int) error {
	at := len(s.out)
	s.out = append(s.out, NodeSpec{Path: path, PrimaryType: DefaultPrimaryType})
	propBase, kidBase := len(s.props), len(s.kids)
	typeKeys := 0
	s.pos++ // '{'
	s.skipSpace()
	if s.next() == '}' {
		s.pos++
		return s.closeObject(path, at, propBase, kidBase)
	}
	for {
		name, err := s.key()
		if err != nil {
			return fmt.Errorf("%w: at %s: %v", ErrMessage, path, err)
		}
		if name == PrimaryTypeProperty {
			// The only name that may be neither a property nor a child,
			// so the only one closeObject cannot see twice.
			if typeKeys++; typeKeys > 1 {
				return fmt.Errorf("%w: duplicate key %q at %s", ErrMessage, name, path)
			}
		}
		if err := checkName(name); err != nil {
			return fmt.Errorf("%w: at %s: %v", ErrMessage, path, err)
		}
		s.skipSpace()
		if s.next() != ':' {
			return fmt.Errorf("%w: at %s: %v", ErrMessage, path, s.syntaxError(fmt.Sprintf("after the object key %q", name)))
		}
		s.pos++
		s.skipSpace()
		switch {
		case s.next() == '{':
			if depth+1 > maxFullDepth {
				return fmt.Errorf("%w: nesting at %s/%s is deeper than %d path segments", ErrMessage, path, name, maxFullDepth)
			}
			start := len(s.out)
			if err := s.object(path+"/"+name, depth+1); err != nil {
				return err
			}
			s.kids = append(s.kids, childSpan{name: name, start: start, end: len(s.out)})
		case name == PrimaryTypeProperty:
			t, ok := s.stringValue()
			if !ok || !validSegment(t) {
				return fmt.Errorf("%w: %s at %s must be a name string", ErrMessage, PrimaryTypeProperty, path)
			}
			s.out[at].PrimaryType = t
		default:
			value, err := s.value()
			if err == nil && name == CIDProperty {
				err = checkCIDLiteral(value)
			} else if err == nil && name == IntentProperty {
				err = checkIntentLiteral(value)
			}
			if err != nil {
				return fmt.Errorf("%w: property %q at %s: %v", ErrMessage, name, path, err)
			}
			s.props = append(s.props, Property{Name: name, ValueJSON: value})
		}
		s.skipSpace()
		switch s.next() {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			return s.closeObject(path, at, propBase, kidBase)
		default:
			return fmt.Errorf("%w: at %s: %v", ErrMessage, path, s.syntaxError("after an object value"))
		}
	}
}

// closeObject finishes the node at out[at] once its '}' is read: properties
// sorted by name, children's subtrees in name order, no name twice.
func (s *objectScanner) closeObject(path string, at, propBase, kidBase int) error {
	props, kids := s.props[propBase:], s.kids[kidBase:]
	slices.SortFunc(props, func(a, b Property) int { return strings.Compare(a.Name, b.Name) })
	byName := func(a, b childSpan) int { return strings.Compare(a.name, b.name) }
	if !slices.IsSortedFunc(kids, byName) {
		// The subtrees follow the node in document order and fill the
		// rest of out; lay them out again in name order.
		slices.SortFunc(kids, byName)
		first := at + 1
		read := slices.Clone(s.out[first:])
		w := first
		for _, k := range kids {
			w += copy(s.out[w:], read[k.start-first:k.end-first])
		}
	}
	if name := repeatedName(props, kids); name != "" {
		return fmt.Errorf("%w: duplicate key %q at %s", ErrMessage, name, path)
	}
	if len(props) > 0 {
		start := len(s.done)
		s.done = append(s.done, props...)
		s.out[at].Properties = s.done[start:len(s.done):len(s.done)]
	}
	s.props, s.kids = s.props[:propBase], s.kids[:kidBase]
	return nil
}

// repeatedName returns a name that props and kids, each sorted by name,
// hold more than once between them, or "" (names are never empty).
func repeatedName(props []Property, kids []childSpan) string {
	prev := ""
	for i, j := 0, 0; i < len(props) || j < len(kids); {
		var name string
		if j == len(kids) || i < len(props) && props[i].Name <= kids[j].name {
			name = props[i].Name
			i++
		} else {
			name = kids[j].name
			j++
		}
		if name == prev {
			return name
		}
		prev = name
	}
	return ""
}

// key reads an object key and returns it decoded.
func (s *objectScanner) key() (string, error) {
	if s.next() != '"' {
		return "", s.syntaxError("where an object key belongs")
	}
	return s.decodedString()
}

// stringValue reads a value that must be a string and returns it decoded;
// ok is false for any other value or broken JSON.
func (s *objectScanner) stringValue() (value string, ok bool) {
	if s.next() != '"' {
		return "", false
	}
	value, err := s.decodedString()
	return value, err == nil
}

// decodedString reads the string literal whose '"' is at s.pos and returns
// its value.
func (s *objectScanner) decodedString() (string, error) {
	start := s.pos
	plain, err := s.str()
	switch {
	case err != nil:
		return "", err
	case plain:
		return s.msg[start+1 : s.pos-1], nil
	}
	return unquote(s.msg[start:s.pos]), nil
}

// checkCIDLiteral checks a property value (JSON text) that must be a CID
// string.
func checkCIDLiteral(value string) error {
	if value[0] != '"' {
		return errors.New("must be a CID string")
	}
	return ValidateCID(unquote(value))
}

// checkIntentLiteral checks a property value (JSON text) that must name an
// upload intent: a string of 0x and 64 hex digits.
func checkIntentLiteral(value string) error {
	if _, ok := IntentToken(value); !ok {
		return errors.New("must be an upload intent's token: a string of 0x and 64 hex digits")
	}
	return nil
}

// IntentToken reads the token a ledger:intent value (JSON text) names.
func IntentToken(valueJSON string) (token [32]byte, ok bool) {
	if len(valueJSON) != 2+2+64 || valueJSON[0] != '"' || valueJSON[len(valueJSON)-1] != '"' || valueJSON[1:3] != "0x" {
		return token, false
	}
	_, err := hex.Decode(token[:], []byte(valueJSON[3:len(valueJSON)-1]))
	return token, err == nil
}

// value reads a property value, a scalar or an array of scalars, and returns
// its compact JSON text: the literal text, less any space between array
// elements.
func (s *objectScanner) value() (string, error) {
	start := s.pos
	if s.next() == '[' {
		return s.array()
	}
	if err := s.scalar(); err != nil {
		return "", err
	}
	return s.msg[start:s.pos], nil
}

// array reads an array of scalars and returns its compact text.
func (s *objectScanner) array() (string, error) {
	start := s.pos
	s.pos++ // '['
	spaced := s.skipSpace()
	if s.next() != ']' {
		for {
			if err := s.scalar(); err != nil {
				return "", err
			}
			spaced = s.skipSpace() || spaced
			if s.next() != ',' {
				break
			}
			s.pos++
			spaced = s.skipSpace() || spaced
		}
		if s.next() != ']' {
			return "", s.syntaxError("after an array element")
		}
	}
	s.pos++ // ']'
	text := s.msg[start:s.pos]
	if spaced {
		text = compactArray(text)
	}
	return text, nil
}

// scalar reads a string, number, true, false or null.
func (s *objectScanner) scalar() error {
	switch c := s.next(); {
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || isDigit(c):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '[' || c == '{':
		// Refused at its opening bracket: arrays nested however deep cost
		// no stack.
		return errors.New("arrays may hold only strings, numbers, booleans and null")
	}
	return s.syntaxError("where a value belongs")
}

// literal reads word (true, false or null), whose first byte is at s.pos.
func (s *objectScanner) literal(word string) error {
	if strings.HasPrefix(s.msg[s.pos:], word) {
		s.pos += len(word)
		return nil
	}
	for i := 0; s.pos < len(s.msg) && s.msg[s.pos] == word[i]; i++ {
		s.pos++
	}
	return s.syntaxError("in the literal " + word)
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *objectScanner) number() error {
	m, i := s.msg, s.pos
	if m[i] == '-' {
		i++
	}
	switch {
	case i < len(m) && m[i] == '0':
		i++
	case i < len(m) && isDigit(m[i]):
		i = skipDigits(m, i)
	default:
		s.pos = i
		return s.syntaxError("in a number")
	}
	if i < len(m) && m[i] == '.' {
		i++
		if i == len(m) || !isDigit(m[i]) {
			s.pos = i
			return s.syntaxError("after the decimal point of a number")
		}
		i = skipDigits(m, i)
	}
	if i < len(m) && (m[i] == 'e' || m[i] == 'E') {
		i++
		if i < len(m) && (m[i] == '+' || m[i] == '-') {
			i++
		}
		if i == len(m) || !isDigit(m[i]) {
			s.pos = i
			return s.syntaxError("in the exponent of a number")
		}
		i = skipDigits(m, i)
	}
	s.pos = i
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipDigits returns the index of the first byte at or after i in m that is
// not a digit.
func skipDigits(m string, i int) int {
	for i < len(m) && isDigit(m[i]) {
		i++
	}
	return i
}

// str reads the string literal whose '"' is at s.pos. plain reports that it
// has no escapes and no byte beyond ASCII, so that the text between its
// quotes is its value.
func (s *objectScanner) str() (plain bool, err error) {
	m := s.msg
	plain = true
	for i := s.pos + 1; i < len(m); {
		c := m[i]
		if asciiIn(c, stringPlainLow, stringPlainHigh) {
			i++
			continue
		}
		switch {
		case c == '"':
			s.pos = i + 1
			return plain, nil
		case c == '\\':
			plain = false
			n := escapeLen(m[i:])
			if n == 0 {
				s.pos = min(i+1, len(m))
				return false, s.syntaxError("in a string escape")
			}
			i += n
		case c < ' ':
			s.pos = i
			return false, s.syntaxError("in a string")
		default: // beyond ASCII
			plain = false
			i++
		}
	}
	s.pos = len(m)
	return false, s.syntaxError("in a string")
}

// Sets of ASCII bytes for asciiIn, one bit per byte: bytes 0x00-0x3f in the
// low word, 0x40-0x7f in the high one. A set test is a single branch in the
// loops over string contents, which is where the time goes.
const (
	// stringPlainLow and stringPlainHigh: bytes a string holds as they are,
	// ' ' and above but " and \.
	stringPlainLow  uint64 = 0xffffffff_00000000 &^ (1 << '"')
	stringPlainHigh uint64 = 0xffffffff_ffffffff &^ (1 << ('\\' - 64))
	// textSafeLow and textSafeHigh: bytes encoding/json's Marshal writes
	// as they are, ' ' and above but " & < > and \.
	textSafeLow  uint64 = stringPlainLow &^ (1<<'&' | 1<<'<' | 1<<'>')
	textSafeHigh uint64 = stringPlainHigh
)

// asciiIn reports whether c is an ASCII byte in the set low, high.
func asciiIn(c byte, low, high uint64) bool {
	return c < utf8.RuneSelf && [2]uint64{low, high}[c>>6]>>(c&63)&1 != 0
}

// escapeLen returns the length of the escape sequence that starts m (at its
// '\'), or 0 when it is not a valid one.
func escapeLen(m string) int {
	if len(m) < 2 {
		return 0
	}
	switch m[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(m) >= 6 && hexRune(m[2:6]) >= 0 {
			return 6
		}
	}
	return 0
}

// hexRune decodes four hex digits, or returns -1.
func hexRune(h string) rune {
	var r rune
	for i := range 4 {
		c := h[i]
		switch {
		case isDigit(c):
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// skipSpace skips JSON white space (space, tab, CR, LF) and reports whether
// there was any.
func (s *objectScanner) skipSpace() bool {
	start := s.pos
	for s.pos < len(s.msg) {
		switch s.msg[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
			continue
		}
		break
	}
	return s.pos > start
}

// next returns the byte at s.pos, or 0 at the end (0 is never valid where
// next is asked).
func (s *objectScanner) next() byte {
	if s.pos < len(s.msg) {
		return s.msg[s.pos]
	}
	return 0
}

// syntaxError describes the byte at s.pos, which the grammar does not allow
// there (where says where it was met).
func (s *objectScanner) syntaxError(where string) error {
	if s.pos >= len(s.msg) {
		return fmt.Errorf("unexpected end of the message %s", where)
	}
	return fmt.Errorf("invalid character %q %s at offset %d", s.msg[s.pos:s.pos+1], where, s.pos)
}

// compactArray drops the white space between the tokens of an array the
// scanner has checked.
func compactArray(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	inString := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString && c == '\\':
			b.WriteByte(c)
			i++
			c = text[i]
		case inString:
			inString = c != '"'
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			continue
		case c == '"':
			inString = true
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unquote decodes a string literal the scanner has checked, as encoding/json
// does: escapes resolved, a surrogate pair joined, and a lone surrogate or
// invalid UTF-8 each replaced by U+FFFD.
func unquote(lit string) string {
	body := lit[1 : len(lit)-1]
	b := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			if body[i+1] != 'u' {
				b = append(b, unescape(body[i+1]))
				i += 2
				continue
			}
			r := hexRune(body[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(body)-i >= 6 && body[i] == '\\' && body[i+1] == 'u' {
					r2 = hexRune(body[i+2 : i+6])
				}
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(body[i:])
			b = utf8.AppendRune(b, r)
			i += n
		}
	}
	return string(b)
}

// unescape returns the byte a one-letter escape stands for.
func unescape(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // '"', '\\', '/'
}

// quoteText encodes text as a JSON string the way encoding/json's Marshal
// does, which is how text messages have always been stored: <, > and & and
// control characters escaped (\b, \f, \n, \r, \t by name), U+2028 and U+2029
// escaped, and each byte of invalid UTF-8 replaced by \ufffd.
func quoteText(text []byte) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(text) + 2)
	b.WriteByte('"')
	done := 0 // text[:done] is written
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			if asciiIn(c, textSafeLow, textSafeHigh) {
				i++
				continue
			}
			b.Write(text[done:i])
			switch c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			}
			i++
			done = i
			continue
		}
		r, n := utf8.DecodeRune(text[i:])
		var escaped string
		switch {
		case r == utf8.RuneError && n == 1:
			escaped = `\ufffd`
		case r == '\u2028':
			escaped = `\u2028`
		case r == '\u2029':
			escaped = `\u2029`
		default:
			i += n
			continue
		}
		b.Write(text[done:i])
		b.WriteString(escaped)
		i += n
		done = i
	}
	b.Write(text[done:])
	b.WriteByte('"')
	return b.String()
}
