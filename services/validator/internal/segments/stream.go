package segments

import (
	"bufio"
	"io"
)

// streamBufferBytes is the buffer the streamed views (archives, journal)
// write through: a network write per 64 KiB rather than per segment.
const streamBufferBytes = 64 << 10

// hookedWriter calls before ahead of every write to w.
type hookedWriter struct {
	w      io.Writer
	before func()
}

func (h hookedWriter) Write(p []byte) (int, error) {
	h.before()
	return h.w.Write(p)
}

// newStream buffers writes to w, calling beforeWrite (if not nil) ahead of
// each write that reaches w: the HTTP side extends its write deadline
// there, so that a client is cut off only when it takes no bytes for a
// while, not when the whole answer takes long.
func newStream(w io.Writer, beforeWrite func()) *bufio.Writer {
	if beforeWrite != nil {
		w = hookedWriter{w: w, before: beforeWrite}
	}
	return bufio.NewWriterSize(w, streamBufferBytes)
}
