package ledgerclient

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// parseAll reads every message of r and the error that ended it.
func parseAll(r io.Reader, limit int) ([]SSEMessage, *SSEReader, error) {
	s := NewSSEReader(r, limit)
	var out []SSEMessage
	for {
		m, err := s.Next()
		if err != nil {
			return out, s, err
		}
		out = append(out, m)
	}
}

func TestSSEReader(t *testing.T) {
	stream := "\xEF\xBB\xBFretry: 2000\n\n" +
		": keep-alive\n\n" +
		"id: 1\nevent: content\ndata: {\"id\":\"1\"}\n\n" +
		"event: gap\r\ndata: {\"afterId\":\"1\"}\r\n\r\n" + // CRLF, no id: carries 1 over
		"id:2\revent:delete\rdata:a\rdata:\rdata: b\r\r" + // CR only; no space after the colon
		"data\n\n" + // a field without a colon: empty data
		"id: 3\nevent: content\n\n" + // no data: not dispatched, but the id counts
		"event: x\ndata: y\nretry: 1x\nunknown: z\n\n" +
		"id: 4\ndata: unfinished" // dropped at the end of the stream
	want := []SSEMessage{
		{ID: "1", HasID: true, Event: "content", Data: `{"id":"1"}`},
		{ID: "1", Event: "gap", Data: `{"afterId":"1"}`},
		{ID: "2", HasID: true, Event: "delete", Data: "a\n\nb"},
		{ID: "2", Event: "message", Data: ""},
		{ID: "3", Event: "x", Data: "y"},
	}
	for name, r := range map[string]io.Reader{
		"whole":       strings.NewReader(stream),
		"byte a time": iotest.OneByteReader(strings.NewReader(stream)),
	} {
		got, s, err := parseAll(r, 0)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("%s: ended with %v", name, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s:\n got  %+v\n want %+v", name, got, want)
		}
		if s.Retry() != 2*time.Second || s.LastEventID() != "4" {
			t.Fatalf("%s: retry %s, last id %q", name, s.Retry(), s.LastEventID())
		}
	}
}

// TestSSEReaderCRNeedsNoLookahead: a message ending in CR is dispatched at
// once, without waiting for a byte that may be an LF.
func TestSSEReaderCRNeedsNoLookahead(t *testing.T) {
	pr, pw := io.Pipe()
	s := NewSSEReader(pr, 0)
	go func() { _, _ = pw.Write([]byte("id: 7\rdata: x\r\r")) }()
	got := make(chan SSEMessage, 1)
	go func() {
		m, _ := s.Next()
		got <- m
	}()
	select {
	case m := <-got:
		if m.ID != "7" || m.Data != "x" {
			t.Fatalf("message %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a message ending in CR waited for more input")
	}
	pw.Close()
}

func TestSSEReaderLimits(t *testing.T) {
	if _, _, err := parseAll(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 64); !errors.Is(err, ErrSSETooLong) {
		t.Fatalf("long line: %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("x", 30)+"\n", 10) + "\n"
	if _, _, err := parseAll(strings.NewReader(many), 64); !errors.Is(err, ErrSSETooLong) {
		t.Fatalf("long message: %v", err)
	}
	if _, _, err := parseAll(strings.NewReader("id: a\x00b\ndata: x\n\n"), 0); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
}

// encodeSSE writes messages in the framing the parser reads.
func encodeSSE(msgs []SSEMessage) []byte {
	var b bytes.Buffer
	for _, m := range msgs {
		if m.HasID {
			b.WriteString("id: " + m.ID + "\n")
		}
		b.WriteString("event: " + m.Event + "\n")
		for line := range strings.SplitSeq(m.Data, "\n") {
			b.WriteString("data: " + line + "\n")
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// FuzzSSEReader: the stream is outside input. Whatever it holds, parsing
// ends in an error (EOF or a limit), never a panic; no message breaks the
// limit or carries a line end in its name or id; parsing byte by byte gives
// the same messages; and the messages written out again parse to
// themselves.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"id: 1\nevent: content\ndata: {}\n\n",
		"retry: 10\n\n: keep-alive\n\nevent: gap\ndata: {\"afterId\":\"1\"}\n\n",
		"id:2\revent:x\rdata:a\rdata:\r\r",
		"\xEF\xBB\xBFdata\r\n\r\n",
		"id: 3\n\ndata: x\n\n",
	} {
		f.Add([]byte(s))
	}
	const limit = 256
	f.Fuzz(func(t *testing.T, in []byte) {
		msgs, _, err := parseAll(bytes.NewReader(in), limit)
		if err == nil {
			t.Fatal("parsing ended without an error")
		}
		for _, m := range msgs {
			if len(m.Data) >= limit || strings.ContainsAny(m.Event, "\r\n") || strings.ContainsAny(m.ID, "\r\n\x00") || m.Event == "" {
				t.Fatalf("message %+v", m)
			}
		}
		slow, _, slowErr := parseAll(iotest.OneByteReader(bytes.NewReader(in)), limit)
		if !slices.Equal(slow, msgs) || (slowErr == io.EOF) != (err == io.EOF) {
			t.Fatalf("byte by byte: %+v (%v), whole: %+v (%v)", slow, slowErr, msgs, err)
		}
		// Only what the writer can express goes round: an id of this
		// message (a carried-over one is not written again) and one
		// without a leading space (the parser takes one off).
		var round []SSEMessage
		for _, m := range msgs {
			if m.HasID && !strings.HasPrefix(m.ID, " ") && !strings.HasPrefix(m.Event, " ") {
				round = append(round, m)
			}
		}
		again, _, err := parseAll(bytes.NewReader(encodeSSE(round)), 4*limit)
		if !errors.Is(err, io.EOF) || !slices.Equal(again, round) {
			t.Fatalf("round trip of %+v: %+v (%v)", round, again, err)
		}
	})
}
