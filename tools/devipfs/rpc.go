package devipfs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ipfs/boxo/ipld/merkledag"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"

	"github.com/contentledger/contentledger/pkg/httpserver"
)

// The RPC routes: a subset of kubo's /api/v0 (docs.ipfs.tech/reference/kubo/rpc).
const (
	routeAdd = "/api/v0/add"
	routeCat = "/api/v0/cat"
)

// maxAddParts bounds the files of one add request.
const maxAddParts = 64

// Kubo's error codes (go-ipfs-cmds ErrorType): the JSON body's Code.
const (
	codeNormal = 0 // the command failed
	codeClient = 1 // the request is wrong
)

// kuboError is kubo's error body: {"Message": "...", "Code": 0, "Type": "error"}.
// The RPC API answers it rather than pkg/apierror's, since its clients are
// IPFS clients, which read Message.
type kuboError struct {
	Message string
	Code    int
	Type    string
}

// rpcError is an error answer: its HTTP status and kubo's body.
type rpcError struct {
	status int
	body   kuboError
}

func (e *rpcError) Error() string { return e.body.Message }

// clientError is a 400 with kubo's client code.
func clientError(format string, args ...any) *rpcError {
	return &rpcError{status: http.StatusBadRequest, body: kuboError{Message: fmt.Sprintf(format, args...), Code: codeClient, Type: "error"}}
}

// failure is an answer with status and kubo's normal code.
func failure(status int, format string, args ...any) *rpcError {
	return &rpcError{status: status, body: kuboError{Message: fmt.Sprintf(format, args...), Code: codeNormal, Type: "error"}}
}

func writeRPCError(w http.ResponseWriter, e *rpcError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(e.body)
}

// addEvent is one line of kubo's add answer. Size is a string in kubo's.
type addEvent struct {
	Name string
	Hash string
	Size string
}

// rpcHandler serves the RPC API. Like kubo's, it takes POST only.
func (n *Node) rpcHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var serve func(http.ResponseWriter, *http.Request) *rpcError
		switch r.URL.Path {
		case routeAdd:
			serve = n.serveAdd
		case routeCat:
			serve = n.serveCat
		default:
			writeRPCError(w, failure(http.StatusNotFound, "%s is not served: this node answers POST %s and %s only", r.URL.Path, routeAdd, routeCat))
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeRPCError(w, failure(http.StatusMethodNotAllowed, "%s takes POST", r.URL.Path))
			return
		}
		if e := serve(w, r); e != nil {
			writeRPCError(w, e)
		}
	})
}

// fixedAddOptions are kubo's add options that would change the CIDs this
// node makes, with the values they may take here (kubo's defaults): other
// values are refused rather than ignored. Options that change only the
// answer's form (progress, quiet, pin, ...) are ignored.
var fixedAddOptions = map[string]func(string) bool{
	"chunker":             func(v string) bool { return v == "size-262144" || v == "default" },
	"hash":                func(v string) bool { return v == "sha2-256" },
	"cid-base":            func(string) bool { return false },
	"trickle":             isFalse,
	"wrap-with-directory": isFalse,
	"only-hash":           isFalse,
	"inline":              isFalse,
	"nocopy":              isFalse,
	"fscache":             isFalse,
	"hidden":              isFalse,
	"recursive":           isFalse,
}

// parseAddOptions reads add's query: cid-version (0, the default, or 1)
// and raw-leaves (default: true with CIDv1, as in kubo).
func parseAddOptions(q url.Values) (AddOptions, *rpcError) {
	var o AddOptions
	for name, values := range q {
		if len(values) > 1 {
			return o, clientError("option %q is given %d times", name, len(values))
		}
		if allowed, known := fixedAddOptions[name]; known && !allowed(values[0]) {
			return o, clientError("option %s=%q is not supported by this node (it imports with kubo's defaults: 256 KiB chunks, balanced layout, sha2-256, one file a CID)",
				name, values[0])
		}
	}
	switch v := q.Get("cid-version"); v {
	case "", "0":
	case "1":
		o.CIDVersion = 1
	default:
		return o, clientError("cid-version is %q; give 0 or 1", v)
	}
	o.RawLeaves = o.CIDVersion == 1
	if vs, ok := q["raw-leaves"]; ok {
		raw, err := parseFlag(vs[0])
		if err != nil {
			return o, clientError("raw-leaves is %q; give true or false", vs[0])
		}
		o.RawLeaves = raw
	}
	return o, nil
}

// parseFlag reads a boolean option; present without a value, it is a bare
// flag: true.
func parseFlag(v string) (bool, error) {
	if v == "" {
		return true, nil
	}
	return strconv.ParseBool(v)
}

func isFalse(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && !b
}

// serveAdd imports each file of the multipart body and answers kubo's
// events, one JSON object a line.
func (n *Node) serveAdd(w http.ResponseWriter, r *http.Request) *rpcError {
	o, e := parseAddOptions(r.URL.Query())
	if e != nil {
		return e
	}
	if r.ContentLength > n.maxAdd {
		return failure(http.StatusRequestEntityTooLarge, "the request body exceeds %d bytes", n.maxAdd)
	}
	r.Body = http.MaxBytesReader(w, r.Body, n.maxAdd)
	mr, err := r.MultipartReader()
	if err != nil {
		return clientError("the body is not a multipart form with a file: %v", err)
	}
	var events []addEvent
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return bodyError(err, n.maxAdd)
		}
		if len(events) == maxAddParts {
			return clientError("more than %d files in one request", maxAddParts)
		}
		ev, e := n.addPart(r, part, o)
		_ = part.Close()
		if e != nil {
			return e
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		return clientError("the request carries no file")
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, ev := range events {
		_ = enc.Encode(ev)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Chunked-Output", "1")
	_, _ = w.Write(body.Bytes())
	return nil
}

// addPart imports one part of an add request.
func (n *Node) addPart(r *http.Request, part *multipart.Part, o AddOptions) (addEvent, *rpcError) {
	switch ct := part.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/x-directory"):
		return addEvent{}, clientError("directories are not supported by this node: add files one by one")
	case strings.HasPrefix(ct, "application/symlink"):
		return addEvent{}, clientError("symlinks are not supported by this node")
	}
	// kubo's clients send the file's path escaped (url.QueryEscape); a
	// name that is not escaped is taken as it is.
	name := part.FileName()
	if unescaped, err := url.QueryUnescape(name); err == nil {
		name = unescaped
	}
	if strings.Contains(name, "/") {
		return addEvent{}, clientError("the file name %q has a directory; directories are not supported by this node", name)
	}
	body := &bodyReader{r: part}
	added, err := n.add(r.Context(), body, o)
	switch {
	case body.err != nil:
		return addEvent{}, bodyError(body.err, n.maxAdd)
	case err != nil:
		return addEvent{}, failure(http.StatusInternalServerError, "adding %q: %v", name, err)
	}
	if name == "" {
		name = added.Cid.String()
	}
	return addEvent{Name: name, Hash: added.Cid.String(), Size: strconv.FormatUint(added.Size, 10)}, nil
}

// bodyError answers a failure to read the request's body.
func bodyError(err error, limit int64) *rpcError {
	if httpserver.IsTooLarge(err) {
		return failure(http.StatusRequestEntityTooLarge, "the request body exceeds %d bytes", limit)
	}
	return clientError("reading the request body: %v", err)
}

// bodyReader keeps the error of reading the body, which tells a broken
// request from a failure of the node when the importer fails.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

// catRequest is cat's query: the CID and the byte range asked for.
type catRequest struct {
	cid    cid.Cid
	offset int64
	length int64 // -1: to the end
}

// parseCatRequest reads cat's query: arg (a CID, or /ipfs/ and a CID),
// offset and length (kubo's options).
func parseCatRequest(q url.Values) (catRequest, *rpcError) {
	req := catRequest{length: -1}
	args := q["arg"]
	if len(args) != 1 {
		return req, clientError("give one CID as arg (got %d)", len(args))
	}
	arg := strings.TrimPrefix(args[0], "/ipfs/")
	if strings.Contains(arg, "/") {
		return req, clientError("arg %q is a path; this node cats a CID only", args[0])
	}
	c, err := cid.Decode(arg)
	if err != nil {
		return req, clientError("arg %q is not a CID: %v", args[0], err)
	}
	req.cid = c
	for name, dst := range map[string]*int64{"offset": &req.offset, "length": &req.length} {
		vs, ok := q[name]
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(vs[0], 10, 64)
		if len(vs) > 1 || err != nil || v < 0 {
			return req, clientError("%s is %q; give one count of bytes, 0 or more", name, strings.Join(vs, ","))
		}
		*dst = v
	}
	return req, nil
}

// serveCat streams the bytes of a UnixFS file. A failure after the first
// byte is reported in the X-Stream-Error trailer, as kubo does.
func (n *Node) serveCat(w http.ResponseWriter, r *http.Request) *rpcError {
	req, e := parseCatRequest(r.URL.Query())
	if e != nil {
		return e
	}
	reader, err := n.open(r.Context(), req.cid)
	switch {
	case ipld.IsNotFound(err):
		return failure(http.StatusNotFound, "%s is not stored on this node (it is offline: it holds what was added to it)", req.cid)
	case errors.Is(err, uio.ErrIsDir):
		return clientError("%s is a directory; cat reads files", req.cid)
	case errors.Is(err, uio.ErrUnkownNodeType), errors.Is(err, merkledag.ErrNotProtobuf):
		return clientError("%s is not a UnixFS file", req.cid)
	case err != nil:
		return failure(http.StatusInternalServerError, "reading %s: %v", req.cid, err)
	}
	defer reader.Close()
	size := int64(reader.Size())
	offset := min(req.offset, size)
	length := size - offset
	if req.length >= 0 {
		length = min(length, req.length)
	}
	if _, err := reader.Seek(offset, io.SeekStart); err != nil {
		return failure(http.StatusInternalServerError, "reading %s: %v", req.cid, err)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Length", strconv.FormatInt(length, 10))
	w.Header().Set("Trailer", "X-Stream-Error")
	if _, err := io.CopyN(w, reader, length); err != nil && r.Context().Err() == nil {
		w.Header().Set("X-Stream-Error", err.Error())
	}
	return nil
}
