package devipfs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ipfs/go-cid"
)

// FuzzParseAddOptions: any query gives options kubo would accept, or a
// client error; never a panic.
func FuzzParseAddOptions(f *testing.F) {
	for _, seed := range []string{"", "cid-version=1", "cid-version=0&raw-leaves=true", "raw-leaves", "raw-leaves=maybe",
		"chunker=size-262144", "chunker=rabin", "trickle=false", "trickle", "cid-version=1&cid-version=0", "pin=false&progress=true"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		o, e := parseAddOptions(q)
		if e != nil {
			if e.status != http.StatusBadRequest || e.body.Code != codeClient || e.body.Message == "" {
				t.Fatalf("%q: %+v", raw, e)
			}
			return
		}
		if o.CIDVersion != 0 && o.CIDVersion != 1 {
			t.Fatalf("%q: CID version %d", raw, o.CIDVersion)
		}
	})
}

// FuzzParseCatRequest: any query names one CID and a range within bounds,
// or is a client error.
func FuzzParseCatRequest(f *testing.F) {
	for _, seed := range []string{"", "arg=QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn", "arg=/ipfs/bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e&offset=3&length=4",
		"arg=x&arg=y", "arg=Qm/x", "arg=QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn&offset=-1", "offset=99999999999999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		req, e := parseCatRequest(q)
		if e != nil {
			if e.status != http.StatusBadRequest || e.body.Code != codeClient {
				t.Fatalf("%q: %+v", raw, e)
			}
			return
		}
		if !req.cid.Defined() || req.offset < 0 || req.length < -1 {
			t.Fatalf("%q: %+v", raw, req)
		}
	})
}

// FuzzAdd: any add request is answered with kubo's events, each naming a
// CID the node then holds, or with kubo's error body and a client status;
// never a panic or a failure of the node.
func FuzzAdd(f *testing.F) {
	n, err := Start(Config{DataDir: f.TempDir(), GatewayAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", MaxAddBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = n.Close() })
	h := n.rpcHandler()
	f.Add("", "multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nhello\r\n--x--\r\n"))
	f.Add("cid-version=1", "multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a%2Fb\"\r\n\r\nhello\r\n--x--\r\n"))
	f.Add("raw-leaves=true", "multipart/form-data; boundary=x", []byte("--x\r\nContent-Type: application/x-directory\r\n\r\n\r\n--x--\r\n"))
	f.Add("", "multipart/form-data; boundary=x", []byte("--x\r\n\r\n\r\n--x\r\n\r\nsecond\r\n--x--\r\n"))
	f.Add("", "text/plain", []byte("hello"))
	f.Fuzz(func(t *testing.T, query, contentType string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, routeAdd, bytes.NewReader(body))
		req.URL.RawQuery = query
		req.Header.Set("Content-Type", contentType)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			var e kuboError
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Type != "error" || w.Code >= 500 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			return
		}
		lines := bufio.NewScanner(w.Body)
		for lines.Scan() {
			var ev addEvent
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				t.Fatalf("event %s: %v", lines.Bytes(), err)
			}
			c, err := cid.Decode(ev.Hash)
			if err != nil {
				t.Fatalf("event %+v: %v", ev, err)
			}
			if has, err := n.blocks.Blockstore().Has(t.Context(), c); err != nil || !has {
				t.Fatalf("event %+v: the root is not stored (%v)", ev, err)
			}
		}
	})
}
