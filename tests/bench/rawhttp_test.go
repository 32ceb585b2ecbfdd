package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"time"
)

// rawGetter asks one path again and again on one keep-alive HTTP/1.1
// connection. It is the edge benchmark's load generator: net/http's
// Transport runs two goroutines per connection and hands every response
// over a channel, which on a shared 2-core machine takes as much CPU per
// request as the edge being measured. This writes a pre-built request and
// reads the answer with one buffered reader, about a third of that.
type rawGetter struct {
	addr string
	req  []byte
	conn net.Conn
	r    *bufio.Reader
}

func newRawGetter(addr, path string) *rawGetter {
	return &rawGetter{
		addr: addr,
		req:  []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: contentledger-bench\r\n\r\n"),
	}
}

// get sends the request and reads the whole answer, returning its status.
// A connection the server closed is dialled again, once.
func (g *rawGetter) get() (int, error) {
	for attempt := 0; ; attempt++ {
		status, reusable, err := g.roundTrip()
		if !reusable {
			g.close()
		}
		if err == nil || attempt > 0 || !errors.Is(err, errStaleConn) {
			return status, err
		}
	}
}

// errStaleConn marks a failure before any byte of the answer: the server
// closed an idle connection, and the request can be sent again.
var errStaleConn = errors.New("connection closed before the answer")

func (g *rawGetter) roundTrip() (status int, reusable bool, err error) {
	fresh := g.conn == nil
	if fresh {
		if g.conn, err = net.DialTimeout("tcp", g.addr, 10*time.Second); err != nil {
			return 0, false, err
		}
		g.r = bufio.NewReaderSize(g.conn, 32<<10)
	}
	if err := g.conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return 0, false, err
	}
	if _, err := g.conn.Write(g.req); err != nil {
		return 0, false, staleIf(!fresh, err)
	}
	line, err := g.r.ReadSlice('\n')
	if err != nil {
		return 0, false, staleIf(!fresh && len(line) == 0, err)
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, false, fmt.Errorf("status line %q", line)
	}
	length, chunked, closing := int64(-1), false, false
	for {
		line, err := g.r.ReadSlice('\n')
		if err != nil {
			return status, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, false, fmt.Errorf("header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return status, false, fmt.Errorf("Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		if _, err = io.Copy(io.Discard, httputil.NewChunkedReader(g.r)); err == nil {
			err = g.skipTrailer()
		}
	case length >= 0:
		_, err = g.r.Discard(int(length))
	default: // the body runs to the end of the connection
		_, err = io.Copy(io.Discard, g.r)
		closing = true
	}
	return status, err == nil && !closing, err
}

// skipTrailer reads the trailer of a chunked body up to its empty line,
// which the chunked reader leaves unread.
func (g *rawGetter) skipTrailer() error {
	for {
		line, err := g.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return nil
		}
	}
}

func staleIf(stale bool, err error) error {
	if stale {
		return fmt.Errorf("%w: %w", errStaleConn, err)
	}
	return err
}

func (g *rawGetter) close() {
	if g.conn != nil {
		g.conn.Close()
		g.conn, g.r = nil, nil
	}
}
