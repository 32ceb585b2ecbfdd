package ledgerclient

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// SSEMessage is one message dispatched from a text/event-stream.
type SSEMessage struct {
	// ID is the stream's last event id when the message was dispatched:
	// set by this message's id field, or carried over from an earlier one
	// (the EventSource rule).
	ID string
	// HasID says this message had an id field of its own.
	HasID bool
	// Event is the event name; "message" when the message named none.
	Event string
	// Data is the data lines joined with "\n".
	Data string
}

// ErrSSETooLong is returned for a line, or the data of one message, longer
// than the reader's limit.
var ErrSSETooLong = errors.New("ledgerclient: event stream line or message too long")

// DefaultSSELimit bounds a line and the data of one message.
const DefaultSSELimit = 1 << 20

// SSEReader parses a text/event-stream as the HTML standard's EventSource
// does: lines end with CRLF, LF or CR; a blank line dispatches the message;
// lines starting with ':' are comments; a message without data is not
// dispatched; an unfinished message at the end of the stream is dropped.
type SSEReader struct {
	r     *bufio.Reader
	limit int
	// afterCR: the previous line ended with CR, so a LF that follows is
	// the rest of that line end. Remembered rather than peeked, so that a
	// line ending in CR is complete without waiting for the next byte.
	afterCR bool
	started bool
	lastID  string
	retry   time.Duration
	line    []byte
}

// NewSSEReader reads r; limit bounds a line and a message's data (<= 0:
// DefaultSSELimit).
func NewSSEReader(r io.Reader, limit int) *SSEReader {
	if limit <= 0 {
		limit = DefaultSSELimit
	}
	return &SSEReader{r: bufio.NewReader(r), limit: limit}
}

// Retry is the reconnection delay the stream last asked for (retry:
// field), 0 when it named none.
func (s *SSEReader) Retry() time.Duration { return s.retry }

// LastEventID is the stream's last event id so far, dispatched or not.
func (s *SSEReader) LastEventID() string { return s.lastID }

// Next returns the next message. At the end of the stream it returns
// io.EOF; other errors are the reader's, or ErrSSETooLong.
func (s *SSEReader) Next() (SSEMessage, error) {
	var (
		event, data strings.Builder
		hasData     bool
		hasID       bool
	)
	for {
		line, err := s.readLine()
		if err != nil {
			return SSEMessage{}, err
		}
		if len(line) == 0 {
			if !hasData {
				event.Reset()
				hasID = false
				continue
			}
			m := SSEMessage{ID: s.lastID, HasID: hasID, Event: event.String(), Data: data.String()}
			m.Data = m.Data[:len(m.Data)-1] // the newline after the last data line
			if m.Event == "" {
				m.Event = "message"
			}
			return m, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			event.Reset()
			event.Write(value)
		case "data":
			if data.Len()+len(value)+1 > s.limit {
				return SSEMessage{}, ErrSSETooLong
			}
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID, hasID = string(value), true
			}
		case "retry":
			if ms, ok := digits(value); ok {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// readLine returns the next line without its end. The slice is valid until
// the next call.
func (s *SSEReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if !s.started {
			s.started = true
			// A byte order mark may start the stream; it is not content.
			if c == 0xEF {
				if bom, err := s.r.Peek(2); err == nil && bom[0] == 0xBB && bom[1] == 0xBF {
					_, _ = s.r.Discard(2)
					continue
				}
			}
		}
		if s.afterCR {
			s.afterCR = false
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\n':
			return s.line, nil
		case '\r':
			s.afterCR = true
			return s.line, nil
		}
		if len(s.line) >= s.limit {
			return nil, ErrSSETooLong
		}
		s.line = append(s.line, c)
	}
}

// digits parses a retry value: ASCII digits only, as the standard asks.
func digits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}
