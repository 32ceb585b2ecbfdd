package blobgateway

// Verified reads
//
// A validator reads a binary's bytes twice: when an upload intent is
// completed (to check them against the declaration) and when /api/blob
// serves them. Both go through boxo's gateway handler over its CAR
// backend: the backend asks the configured gateway for the CID as a
// trustless CAR stream (dag-scope=entity, with entity-bytes for a range),
// checks every block against its CID as it arrives and walks the UnixFS
// DAG, and the handler turns the verified blocks into the file's bytes,
// answering ranges. A gateway that sends other bytes than the CID's makes
// the read fail; it can never make the validator serve them. The handler
// runs in-process: no listener, the caller's request goes through it.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"time"

	boxogateway "github.com/ipfs/boxo/gateway"
	"github.com/ipfs/go-cid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contentledger/contentledger/pkg/blob"
)

// DefaultReadTimeout bounds one read when the caller gives no timeout.
const DefaultReadTimeout = 5 * time.Minute

// Reader reads binaries through a gateway, verified. It is safe for
// concurrent use.
type Reader struct {
	handler http.Handler
	timeout time.Duration
}

// NewReader returns a Reader of the gateway at base (ParseBase), asking it
// with client (nil: a client of boxo's defaults). A read takes at most
// timeout and answers at most maxBytes of a file (larger: 413... as boxo's
// handler answers a response over its size limit).
func NewReader(base *url.URL, client *http.Client, timeout time.Duration, maxBytes int64) (*Reader, error) {
	if timeout == 0 {
		timeout = DefaultReadTimeout
	}
	// The backend's metrics go to a registry of their own: the validator's
	// /metrics are its own figures, and tests start several validators in
	// one process.
	backend, err := boxogateway.NewRemoteCarBackend([]string{base.String()}, client,
		boxogateway.WithPrometheusRegistry(prometheus.NewRegistry()))
	if err != nil {
		return nil, err
	}
	h := boxogateway.NewHandler(boxogateway.Config{
		DeserializedResponses:    true,
		NoDNSLink:                true,
		DisableHTMLErrors:        true,
		RetrievalTimeout:         timeout,
		MaxRequestDuration:       timeout,
		MaxUnixFSDAGResponseSize: maxBytes,
		MetricsRegistry:          prometheus.NewRegistry(),
	}, backend)
	return &Reader{handler: h, timeout: timeout}, nil
}

// Serve answers r with the bytes of c, verified, as an HTTP file
// response: Range, If-None-Match and HEAD as a gateway answers them.
// contentType, when set, replaces the gateway's guess. The caller has
// checked c (blob.ParseCID).
func (rd *Reader) Serve(w http.ResponseWriter, r *http.Request, c cid.Cid, contentType string) {
	ctx, cancel := context.WithTimeout(r.Context(), rd.timeout)
	defer cancel()
	in := r.Clone(ctx)
	in.URL = &url.URL{Path: "/ipfs/" + c.String()}
	in.RequestURI = in.URL.Path
	in.Host = "localhost"
	// Only the file's bytes: no CAR, raw block or listing the caller
	// could ask for with Accept or ?format.
	in.Header.Del("Accept")
	rd.handler.ServeHTTP(&typedWriter{ResponseWriter: w, contentType: contentType}, in)
}

// typedWriter sets the declared content type on the answer's headers and
// hides the gateway's own headers that name its paths.
type typedWriter struct {
	http.ResponseWriter
	contentType string
}

func (w *typedWriter) WriteHeader(code int) {
	h := w.Header()
	if w.contentType != "" && (code == http.StatusOK || code == http.StatusPartialContent) {
		h.Set("Content-Type", w.contentType)
	}
	h.Del("X-Ipfs-Path")
	h.Del("X-Ipfs-Roots")
	w.ResponseWriter.WriteHeader(code)
}

func (w *typedWriter) Write(b []byte) (int, error) { return w.ResponseWriter.Write(b) }

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (w *typedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Digest is what Measure found.
type Digest struct {
	ID   blob.ID
	Size int64
}

// ErrTooLarge says the binary is larger than the limit Measure was given.
var ErrTooLarge = errors.New("the binary is larger than declared")

// Measure reads the whole of c, verified, and returns its SHA-256 and
// size. It reads at most limit bytes: a binary larger fails with
// ErrTooLarge.
func (rd *Reader) Measure(ctx context.Context, c cid.Cid, limit int64) (Digest, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return Digest{}, err
	}
	m := &measuringWriter{header: http.Header{}, hash: sha256.New(), limit: limit}
	rd.Serve(m, req, c, "")
	switch {
	case m.tooLarge:
		return Digest{}, ErrTooLarge
	case m.code != http.StatusOK:
		return Digest{}, &FetchError{StatusCode: m.code, Message: m.errBody()}
	case m.failed():
		return Digest{}, &FetchError{Message: "the gateway's answer ended early or did not verify"}
	}
	var d Digest
	copy(d.ID[:], m.hash.Sum(nil))
	d.Size = m.n
	return d, nil
}

// FetchError is a read the gateway did not answer with the binary.
type FetchError struct {
	// StatusCode is the handler's status: 404 when the gateway does not
	// have the CID, 502/504 when it failed or timed out; 0 when the
	// answer began and broke off.
	StatusCode int
	Message    string
}

func (e *FetchError) Error() string {
	if e.StatusCode == 0 {
		return "gateway: " + e.Message
	}
	return fmt.Sprintf("gateway: %d %s", e.StatusCode, e.Message)
}

// measuringWriter is an http.ResponseWriter that hashes a 200 answer's
// body and keeps a little of an error answer's.
type measuringWriter struct {
	header   http.Header
	code     int
	hash     hash.Hash
	n, limit int64
	tooLarge bool
	errText  []byte
}

func (m *measuringWriter) Header() http.Header { return m.header }

func (m *measuringWriter) WriteHeader(code int) {
	if m.code == 0 {
		m.code = code
	}
}

func (m *measuringWriter) Write(b []byte) (int, error) {
	if m.code == 0 {
		m.code = http.StatusOK
	}
	if m.code != http.StatusOK {
		if room := 512 - len(m.errText); room > 0 {
			m.errText = append(m.errText, b[:min(len(b), room)]...)
		}
		return len(b), nil
	}
	if m.n+int64(len(b)) > m.limit {
		m.tooLarge = true
		return 0, ErrTooLarge
	}
	m.n += int64(len(b))
	_, _ = m.hash.Write(b)
	return len(b), nil
}

// failed reports whether the handler said the body broke off: it then
// sets no Content-Length it honoured, so the size is compared with the
// header it sent.
func (m *measuringWriter) failed() bool {
	cl := m.header.Get("Content-Length")
	return cl != "" && cl != fmt.Sprint(m.n)
}

func (m *measuringWriter) errBody() string { return string(m.errText) }
