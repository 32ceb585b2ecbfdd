package devipfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/gateway"
	"github.com/ipfs/boxo/ipld/merkledag"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
	"github.com/ipld/go-car/v2"
	"github.com/multiformats/go-multicodec"
	"github.com/multiformats/go-multihash"
	"github.com/prometheus/client_golang/prometheus"
)

// start starts a node on free loopback ports in dir and closes it when the
// test ends.
func start(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := Start(Config{DataDir: dir, GatewayAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// get answers a GET of u with the given headers: status, headers, body.
func get(t *testing.T, u string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// post sends body to the RPC API route with the query q.
func post(t *testing.T, n *Node, route string, q url.Values, contentType string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(n.APIURL()+route+"?"+q.Encode(), contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// multipartFiles is a multipart form with one part per file, as kubo's
// clients send it (form name "file", escaped file name).
func multipartFiles(t *testing.T, files map[string][]byte) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for name, content := range files {
		w, err := mw.CreateFormFile("file", url.QueryEscape(name))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(content)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), &buf
}

// apiAdd adds content through POST /api/v0/add and returns kubo's event.
func apiAdd(t *testing.T, n *Node, name string, content []byte, q url.Values) addEvent {
	t.Helper()
	ct, body := multipartFiles(t, map[string][]byte{name: content})
	// Streamed, without a length, as clients piping a file send it.
	code, _, out := post(t, n, routeAdd, q, ct, io.MultiReader(body))
	if code != http.StatusOK {
		t.Fatalf("add: %d %s", code, out)
	}
	var ev addEvent
	if err := json.Unmarshal(out, &ev); err != nil {
		t.Fatalf("add answered %s: %v", out, err)
	}
	return ev
}

// verifyBlock checks that data hashes to c with c's own hash function.
func verifyBlock(t *testing.T, c cid.Cid, data []byte) {
	t.Helper()
	decoded, err := multihash.Decode(c.Hash())
	if err != nil {
		t.Fatal(err)
	}
	sum, err := multihash.Sum(data, decoded.Code, decoded.Length)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sum, c.Hash()) {
		t.Fatalf("block %s: the bytes hash to %s", c, sum.B58String())
	}
}

// rootLinks decodes a dag-pb block and returns its links' CIDs.
func rootLinks(t *testing.T, c cid.Cid, data []byte) []cid.Cid {
	t.Helper()
	if c.Type() != uint64(multicodec.DagPb) {
		return nil
	}
	node, err := merkledag.DecodeProtobuf(data)
	if err != nil {
		t.Fatal(err)
	}
	var out []cid.Cid
	for _, l := range node.Links() {
		out = append(out, l.Cid)
	}
	return out
}

// checkCAR parses a CAR answer: its root is root, every block hashes to its
// CID, and the blocks hold the whole file want.
func checkCAR(t *testing.T, root cid.Cid, body, want []byte) {
	t.Helper()
	br, err := car.NewBlockReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("CAR: %v", err)
	}
	if len(br.Roots) != 1 || !br.Roots[0].Equals(root) {
		t.Fatalf("CAR roots %v, want [%s]", br.Roots, root)
	}
	store := blockstore.NewBlockstore(dssync.MutexWrap(ds.NewMapDatastore()))
	count := 0
	for {
		b, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("CAR block %d: %v", count, err)
		}
		verifyBlock(t, b.Cid(), b.RawData())
		checked, err := blocks.NewBlockWithCid(b.RawData(), b.Cid())
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(context.Background(), checked); err != nil {
			t.Fatal(err)
		}
		count++
	}
	// The file read back from the CAR's blocks alone, offline.
	dag := merkledag.NewDAGService(blockservice.New(store, nil))
	node, err := dag.Get(context.Background(), root)
	if err != nil {
		t.Fatalf("CAR without its root block: %v", err)
	}
	r, err := uio.NewDagReader(context.Background(), node, dag)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the CAR's blocks do not make the file: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the CAR's file differs: %d bytes, want %d", len(got), len(want))
	}
}

// checkServed reads c back through the gateway in every form, and through
// /api/v0/cat.
func checkServed(t *testing.T, n *Node, c cid.Cid, want []byte) {
	t.Helper()
	object := n.GatewayURL() + "/ipfs/" + c.String()

	code, _, body := get(t, object, nil)
	if code != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("GET %s: %d, %d bytes (want 200, %d bytes)", object, code, len(body), len(want))
	}

	// A range across a chunk boundary when there is one.
	from, to := len(want)/3, min(len(want)-1, len(want)/3+ChunkSize+100)
	code, h, body := get(t, object, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", from, to)})
	if code != http.StatusPartialContent || !bytes.Equal(body, want[from:to+1]) ||
		h.Get("Content-Range") != fmt.Sprintf("bytes %d-%d/%d", from, to, len(want)) {
		t.Fatalf("range %d-%d: %d, %q, %d bytes", from, to, code, h.Get("Content-Range"), len(body))
	}

	// The root block, trustless: by ?format=raw and by Accept.
	code, h, root := get(t, object+"?format=raw", nil)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/vnd.ipld.raw") {
		t.Fatalf("?format=raw: %d %s", code, h.Get("Content-Type"))
	}
	verifyBlock(t, c, root)
	if code, _, same := get(t, object, map[string]string{"Accept": "application/vnd.ipld.raw"}); code != http.StatusOK || !bytes.Equal(same, root) {
		t.Fatalf("Accept raw: %d, the block differs from ?format=raw's", code)
	}
	// A leaf block of a multi-block file, asked for by its own CID.
	if links := rootLinks(t, c, root); len(links) > 0 {
		leaf := links[len(links)-1]
		code, _, data := get(t, n.GatewayURL()+"/ipfs/"+leaf.String(), map[string]string{"Accept": "application/vnd.ipld.raw"})
		if code != http.StatusOK {
			t.Fatalf("leaf %s: %d", leaf, code)
		}
		verifyBlock(t, leaf, data)
	}

	// The whole DAG as a CAR, by ?format=car and by Accept.
	code, h, body = get(t, object+"?format=car", nil)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/vnd.ipld.car") {
		t.Fatalf("?format=car: %d %s", code, h.Get("Content-Type"))
	}
	checkCAR(t, c, body, want)
	code, _, body = get(t, object, map[string]string{"Accept": "application/vnd.ipld.car"})
	if code != http.StatusOK {
		t.Fatalf("Accept car: %d", code)
	}
	checkCAR(t, c, body, want)

	// cat, whole and in part.
	code, _, body = post(t, n, routeCat, url.Values{"arg": {c.String()}}, "", nil)
	if code != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("cat: %d, %d bytes", code, len(body))
	}
	code, h, body = post(t, n, routeCat, url.Values{"arg": {"/ipfs/" + c.String()}, "offset": {fmt.Sprint(from)}, "length": {"1000"}}, "", nil)
	end := min(len(want), from+1000)
	if code != http.StatusOK || !bytes.Equal(body, want[from:end]) || h.Get("X-Content-Length") != fmt.Sprint(end-from) {
		t.Fatalf("cat offset %d length 1000: %d, %d bytes, X-Content-Length %s", from, code, len(body), h.Get("X-Content-Length"))
	}
}

// TestAddAndRead adds small and multi-block content with CIDv0 and with
// CIDv1 raw leaves, through the Go API and through /api/v0/add, and reads
// it back through the gateway, deserialized and trustless, and cat.
func TestAddAndRead(t *testing.T) {
	n := start(t, t.TempDir())
	contents := map[string][]byte{
		"small":       randomBytes(t, 10_000),
		"multi-block": randomBytes(t, 3<<20+12_345), // 13 chunks and a bit
	}
	for name, content := range contents {
		for _, o := range []AddOptions{{}, {CIDVersion: 1, RawLeaves: true}} {
			t.Run(fmt.Sprintf("%s/v%d", name, o.CIDVersion), func(t *testing.T) {
				c, err := n.Add(context.Background(), bytes.NewReader(content), o)
				if err != nil {
					t.Fatal(err)
				}
				wantCodec := multicodec.DagPb
				if o.RawLeaves && len(content) <= ChunkSize {
					wantCodec = multicodec.Raw // one chunk: the raw leaf is the file
				}
				if c.Version() != uint64(o.CIDVersion) || c.Type() != uint64(wantCodec) {
					t.Fatalf("CID %s: version %d codec %x, want %d %x", c, c.Version(), c.Type(), o.CIDVersion, wantCodec)
				}
				// kubo's API names the same defaults: no options is CIDv0,
				// cid-version=1 implies raw leaves.
				q := url.Values{}
				if o.CIDVersion == 1 {
					q.Set("cid-version", "1")
				}
				ev := apiAdd(t, n, name+" 100%.bin", content, q)
				if ev.Hash != c.String() || ev.Name != name+" 100%.bin" || ev.Size == "" {
					t.Fatalf("/api/v0/add answered %+v, the Go API %s", ev, c)
				}
				// Size is the DAG's bytes: the file's alone when it is one
				// raw block, more with dag-pb wrapping and links.
				if size, _ := strconv.Atoi(ev.Size); wantCodec == multicodec.Raw && size != len(content) || size < len(content) {
					t.Fatalf("Size %s for %d bytes", ev.Size, len(content))
				}
				checkServed(t, n, c, content)
			})
		}
	}
}

// TestKnownCIDs: the node makes kubo's CIDs. "hello world\n" added with
// kubo's defaults is the well-known QmT78zSu…; with CIDv1 raw leaves it is
// one raw block named by its SHA-256.
func TestKnownCIDs(t *testing.T) {
	n := start(t, t.TempDir())
	hello := []byte("hello world\n")
	v0, err := n.Add(context.Background(), bytes.NewReader(hello), AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v0.String() != "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o" {
		t.Fatalf("hello world with kubo's defaults is %s", v0)
	}
	v1, err := n.Add(context.Background(), bytes.NewReader(hello), AddOptions{CIDVersion: 1, RawLeaves: true})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := multihash.Sum(hello, multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	if want := cid.NewCidV1(cid.Raw, sum); !v1.Equals(want) {
		t.Fatalf("hello world with CIDv1 raw leaves is %s, want %s", v1, want)
	}
	// The probe validators send (blobgateway.ProbeCID): the empty
	// directory, held from the first start, in CIDv1 and in CIDv0.
	for _, probe := range []string{"bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354", "QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"} {
		code, h, body := get(t, n.GatewayURL()+"/ipfs/"+probe, map[string]string{"Accept": "application/vnd.ipld.raw"})
		if code != http.StatusOK || !bytes.Equal(body, []byte{0x0a, 0x02, 0x08, 0x01}) || !strings.HasPrefix(h.Get("Content-Type"), "application/vnd.ipld.raw") {
			t.Fatalf("the empty directory %s: %d %q %x", probe, code, h.Get("Content-Type"), body)
		}
	}
}

// TestRestartKeepsContent: content added before a restart on the same
// directory is served after it.
func TestRestartKeepsContent(t *testing.T) {
	dir := t.TempDir()
	content := randomBytes(t, 2<<20)
	first, err := Start(Config{DataDir: dir, GatewayAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := first.Add(context.Background(), bytes.NewReader(content), AddOptions{CIDVersion: 1, RawLeaves: true})
	if err != nil {
		t.Fatal(err)
	}
	ev := apiAdd(t, first, "f", content, nil)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := first.Add(context.Background(), bytes.NewReader(content), AddOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add on a closed node: %v", err)
	}
	if _, err := http.Get(first.GatewayURL() + "/ipfs/" + c.String()); err == nil {
		t.Fatal("the closed node's gateway still answers")
	}

	second := start(t, dir)
	checkServed(t, second, c, content)
	v0, err := cid.Decode(ev.Hash)
	if err != nil {
		t.Fatal(err)
	}
	checkServed(t, second, v0, content)
}

// cidOf is the CIDv0 of content, imported into a node of its own.
func cidOf(t *testing.T, content []byte) cid.Cid {
	t.Helper()
	other := start(t, t.TempDir())
	c, err := other.Add(context.Background(), bytes.NewReader(content), AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kuboErrorOf decodes kubo's error body.
func kuboErrorOf(t *testing.T, body []byte) kuboError {
	t.Helper()
	var e kuboError
	if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.Message == "" {
		t.Fatalf("not kubo's error body: %s (%v)", body, err)
	}
	return e
}

// TestRPCRefusals: requests the API does not serve get kubo's error body
// with a status that says why, and add nothing.
func TestRPCRefusals(t *testing.T) {
	dir := t.TempDir()
	n, err := Start(Config{DataDir: dir, GatewayAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", MaxAddBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	small := []byte("refused content")
	ct, body := multipartFiles(t, map[string][]byte{"a": small})
	form := body.Bytes()
	dirCT, dirBody := func() (string, []byte) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="file"; filename="d"`}
		h["Content-Type"] = []string{"application/x-directory"}
		_, _ = mw.CreatePart(h)
		_ = mw.Close()
		return mw.FormDataContentType(), buf.Bytes()
	}()
	bigCT, big := multipartFiles(t, map[string][]byte{"big": randomBytes(t, 100<<10)})

	cases := []struct {
		name   string
		method string
		route  string
		q      url.Values
		ct     string
		body   []byte
		status int
		code   int
		// chunked sends the body without its length, so that only reading
		// it finds it too large.
		chunked bool
	}{
		{"unknown route", http.MethodPost, "/api/v0/pin/add", nil, "", nil, http.StatusNotFound, codeNormal, false},
		{"not the API", http.MethodPost, "/", nil, "", nil, http.StatusNotFound, codeNormal, false},
		{"GET", http.MethodGet, routeAdd, nil, ct, form, http.StatusMethodNotAllowed, codeNormal, false},
		{"cid-version 2", http.MethodPost, routeAdd, url.Values{"cid-version": {"2"}}, ct, form, http.StatusBadRequest, codeClient, false},
		{"raw-leaves maybe", http.MethodPost, routeAdd, url.Values{"raw-leaves": {"maybe"}}, ct, form, http.StatusBadRequest, codeClient, false},
		{"other chunker", http.MethodPost, routeAdd, url.Values{"chunker": {"size-1024"}}, ct, form, http.StatusBadRequest, codeClient, false},
		{"trickle", http.MethodPost, routeAdd, url.Values{"trickle": {"true"}}, ct, form, http.StatusBadRequest, codeClient, false},
		{"option twice", http.MethodPost, routeAdd, url.Values{"cid-version": {"1", "1"}}, ct, form, http.StatusBadRequest, codeClient, false},
		{"not multipart", http.MethodPost, routeAdd, nil, "application/octet-stream", small, http.StatusBadRequest, codeClient, false},
		{"no file", http.MethodPost, routeAdd, nil, "multipart/form-data; boundary=x", []byte("--x--\r\n"), http.StatusBadRequest, codeClient, false},
		{"broken multipart", http.MethodPost, routeAdd, nil, "multipart/form-data; boundary=x", []byte("--x\r\nnonsense"), http.StatusBadRequest, codeClient, false},
		{"directory", http.MethodPost, routeAdd, nil, dirCT, dirBody, http.StatusBadRequest, codeClient, false},
		{"over MaxAddBytes", http.MethodPost, routeAdd, nil, bigCT, big.Bytes(), http.StatusRequestEntityTooLarge, codeNormal, false},
		{"over MaxAddBytes, chunked", http.MethodPost, routeAdd, nil, bigCT, big.Bytes(), http.StatusRequestEntityTooLarge, codeNormal, true},
		{"cat without arg", http.MethodPost, routeCat, nil, "", nil, http.StatusBadRequest, codeClient, false},
		{"cat not a CID", http.MethodPost, routeCat, url.Values{"arg": {"hello"}}, "", nil, http.StatusBadRequest, codeClient, false},
		{"cat a path", http.MethodPost, routeCat, url.Values{"arg": {"/ipfs/QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o/x"}}, "", nil, http.StatusBadRequest, codeClient, false},
		{"cat negative offset", http.MethodPost, routeCat, url.Values{"arg": {"QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"}, "offset": {"-1"}}, "", nil, http.StatusBadRequest, codeClient, false},
		{"cat a directory", http.MethodPost, routeCat, url.Values{"arg": {"QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"}}, "", nil, http.StatusBadRequest, codeClient, false},
		{"cat unknown", http.MethodPost, routeCat, url.Values{"arg": {"QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"}}, "", nil, http.StatusNotFound, codeNormal, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body)
			}
			req, err := http.NewRequest(tc.method, n.APIURL()+tc.route+"?"+tc.q.Encode(), body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, out, tc.status)
			}
			if e := kuboErrorOf(t, out); e.Code != tc.code {
				t.Fatalf("code %d, want %d: %s", e.Code, tc.code, e.Message)
			}
		})
	}
	// None of them added the content.
	if has, err := n.blocks.Blockstore().Has(context.Background(), cidOf(t, small)); err != nil || has {
		t.Fatalf("a refused add stored its content: %v %v", has, err)
	}
}

// TestGatewayServesOnlyWhatItHolds: an unknown CID is 404 at once (the node
// is offline: nothing to search), names are not resolved, other paths are
// not served.
func TestGatewayServesOnlyWhatItHolds(t *testing.T) {
	n := start(t, t.TempDir())
	for path, want := range map[string]int{
		"/ipfs/QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o":            http.StatusNotFound,
		"/ipfs/QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o?format=raw": http.StatusNotFound,
		"/ipfs/not-a-cid":   http.StatusBadRequest,
		"/ipns/example.com": http.StatusNotFound,
		"/api/v0/add":       http.StatusNotFound,
		"/":                 http.StatusNotFound,
	} {
		if code, _, body := get(t, n.GatewayURL()+path, nil); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no data dir":          {},
		"API off loopback":     {DataDir: "x", APIAddr: "0.0.0.0:5001"},
		"API on a name":        {DataDir: "x", APIAddr: "ipfs.example:5001"},
		"gateway without port": {DataDir: "x", GatewayAddr: "127.0.0.1"},
		"negative add size":    {DataDir: "x", MaxAddBytes: -1},
	} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v", name, err)
		}
		if _, err := Start(cfg); err == nil {
			t.Errorf("%s: started", name)
		}
	}
	for name, cfg := range map[string]Config{
		"defaults":         {DataDir: "x"},
		"gateway anywhere": {DataDir: "x", GatewayAddr: "0.0.0.0:8080"},
		"API on ::1":       {DataDir: "x", APIAddr: "[::1]:5001"},
		"API on localhost": {DataDir: "x", APIAddr: "localhost:5001"},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestVerifyingReaderThroughTheGateway: boxo's remote CAR backend, the
// verifying reader validators put in front of their gateway (it asks for
// CARs with dag-scope and entity-bytes, and checks every block), reads
// whole files and ranges through this node's gateway.
func TestVerifyingReaderThroughTheGateway(t *testing.T) {
	n := start(t, t.TempDir())
	content := randomBytes(t, 5<<20+777)
	c, err := n.Add(context.Background(), bytes.NewReader(content), AddOptions{CIDVersion: 1, RawLeaves: true})
	if err != nil {
		t.Fatal(err)
	}
	backend, err := gateway.NewRemoteCarBackend([]string{n.GatewayURL()}, nil, gateway.WithPrometheusRegistry(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	reader := httptest.NewServer(gateway.NewHandler(gateway.Config{DeserializedResponses: true, NoDNSLink: true,
		DisableHTMLErrors: true, MetricsRegistry: prometheus.NewRegistry()}, backend))
	t.Cleanup(reader.Close)

	object := reader.URL + "/ipfs/" + c.String()
	if code, _, body := get(t, object, nil); code != http.StatusOK || !bytes.Equal(body, content) {
		t.Fatalf("the whole file through the verifying reader: %d, %d bytes of %d", code, len(body), len(content))
	}
	from, to := 3*ChunkSize-10, 9*ChunkSize+10
	code, _, body := get(t, object, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", from, to)})
	if code != http.StatusPartialContent || !bytes.Equal(body, content[from:to+1]) {
		t.Fatalf("a range through the verifying reader: %d, %d bytes", code, len(body))
	}
}
