package blobgateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	chunker "github.com/ipfs/boxo/chunker"
	boxogateway "github.com/ipfs/boxo/gateway"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contentledger/contentledger/pkg/blob"
)

// gatewayOf serves data from a real IPFS gateway (boxo's handler over a
// blockstore holding the file, imported as IPFS adds it) on loopback;
// corrupt, when set, rewrites every answer's body on its way out.
func gatewayOf(t *testing.T, data []byte, corrupt func([]byte) []byte) (*url.URL, cid.Cid) {
	t.Helper()
	bs := blockstore.NewBlockstore(dssync.MutexWrap(ds.NewMapDatastore()))
	blocks := blockservice.New(bs, nil)
	params := helpers.DagBuilderParams{Dagserv: merkledag.NewDAGService(blocks), Maxlinks: helpers.DefaultLinksPerBlock,
		RawLeaves: true, CidBuilder: merkledag.V1CidPrefix()}
	db, err := params.New(chunker.NewSizeSplitter(bytes.NewReader(data), 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	root, err := balanced.Layout(db)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := boxogateway.NewBlocksBackend(blocks, boxogateway.WithPrometheusRegistry(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	h := boxogateway.NewHandler(boxogateway.Config{DeserializedResponses: true, NoDNSLink: true,
		MetricsRegistry: prometheus.NewRegistry()}, backend)
	if corrupt != nil {
		honest := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			honest.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(corrupt(rec.Body.Bytes()))
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base, err := ParseBase(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return base, root.Cid()
}

func readVia(t *testing.T, rd *Reader, c cid.Cid, rangeHeader string) (int, []byte, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rd.Serve(w, r, c, "application/x-test") }))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if rangeHeader != "" {
		req.Header.Set("Range", rangeHeader)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// TestReaderVerifies: through an honest gateway the reader measures and
// serves the file (whole and a range); through a gateway that flips one
// byte of what it sends, it measures nothing and serves none of the
// forged block: the answer breaks off after the file's true bytes.
func TestReaderVerifies(t *testing.T) {
	data := make([]byte, 1<<20+777) // five blocks
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	base, root := gatewayOf(t, data, nil)
	rd, err := NewReader(base, nil, 30*time.Second, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	d, err := rd.Measure(ctx, root, int64(len(data))+1)
	if err != nil || d.ID != blob.IDOf(data) || d.Size != int64(len(data)) {
		t.Fatalf("measure: %+v, %v", d, err)
	}
	if _, err := rd.Measure(ctx, root, int64(len(data))-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("measure past the limit: %v", err)
	}
	if code, body, err := readVia(t, rd, root, ""); err != nil || code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("serve: %d, %d bytes, %v", code, len(body), err)
	}
	if code, body, err := readVia(t, rd, root, "bytes=600000-600099"); err != nil || code != http.StatusPartialContent || !bytes.Equal(body, data[600000:600100]) {
		t.Fatalf("serve a range: %d, %d bytes, %v", code, len(body), err)
	}

	// The same file behind a gateway that flips a byte deep in its
	// answers (a CAR stream's last block).
	lying, root2 := gatewayOf(t, data, func(b []byte) []byte {
		out := bytes.Clone(b)
		if len(out) > 1000 {
			out[len(out)-500] ^= 0xff
		}
		return out
	})
	if !root2.Equals(root) {
		t.Fatalf("the same bytes imported twice: %s and %s", root, root2)
	}
	rd, err = NewReader(lying, nil, 30*time.Second, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := rd.Measure(ctx, root, int64(len(data))+1); err == nil {
		t.Fatalf("measured a forged answer: %+v", d)
	}
	code, body, err := readVia(t, rd, root, "")
	if err == nil && code == http.StatusOK && bytes.Equal(body, data) {
		t.Fatal("served a forged answer as the file")
	}
	// What reached the client is the file's own bytes, and not all of
	// them: the answer broke off before the forged block.
	if len(body) >= len(data) || !bytes.Equal(body, data[:len(body)]) {
		t.Fatalf("served %d bytes of a forged answer (code %d, %v), not a prefix of the file", len(body), code, err)
	}
}
