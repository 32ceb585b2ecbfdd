package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/segarchive"
)

func hexOf(h [32]byte) string { return "0x" + hex.EncodeToString(h[:]) }

// archivesServer serves two TAR files of one chain as a validator does;
// corrupt, when set, changes the bytes of the second archive.
func archivesServer(t *testing.T, corrupt bool) *httptest.Server {
	t.Helper()
	var prev [32]byte
	files := map[string][]byte{}
	var tars api.SegmentTars
	for number, name := range []string{"data00000a.tar", "data00001a.tar"} {
		var buf bytes.Buffer
		var raws [][]byte
		first := uint64(10*number + 1)
		m := segarchive.Manifest{Name: name, FirstIndex: first, LastIndex: first + 2, Segments: 3, PrevHash: hexOf(prev)}
		filePrev := prev
		for i := range uint64(3) {
			raw, err := proto.Marshal(&ledgerpb.Segment{Index: first + i, PrevHash: prev[:],
				Ops: []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_Put{Put: &ledgerpb.Node{Path: "/p"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			raws = append(raws, raw)
			m.Bytes += uint64(len(raw))
			prev = segarchive.Hash(raw)
		}
		m.HeadHash = hexOf(prev)
		w, err := segarchive.NewWriter(&buf, m)
		if err != nil {
			t.Fatal(err)
		}
		for i, raw := range raws {
			if corrupt && number == 1 && i == 1 {
				raw = append(append([]byte(nil), raw...), 0x18, 0x05) // a changed segment: the next one no longer links
			}
			if err := w.Add(first+uint64(i), 0, raw); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files[name] = buf.Bytes()
		tars.Tars = append(tars.Tars, api.TarFile{Name: name, Number: number, FirstIndex: m.FirstIndex, LastIndex: m.LastIndex,
			Segments: 3, Bytes: m.Bytes, PrevHash: hexOf(filePrev), HeadHash: m.HeadHash, Closed: number == 0})
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/segments/tars" {
			_ = json.NewEncoder(w).Encode(tars)
			return
		}
		body, ok := files[strings.TrimPrefix(r.URL.Path, "/segments/")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no TAR file","retryable":false}}`))
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestSegmentsFetchAndVerify(t *testing.T) {
	srv := archivesServer(t, false)
	dir := t.TempDir()
	var out bytes.Buffer
	if err := segments(context.Background(), []string{"fetch", "--validator", srv.URL, "--dir", dir}, &out); err != nil {
		t.Fatalf("fetch: %v\n%s", err, out.String())
	}
	a, b := filepath.Join(dir, "data00000a.tar"), filepath.Join(dir, "data00001a.tar")
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("fetched file: %v", err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.partial")); len(left) != 0 {
		t.Fatalf("partial files left: %v", left)
	}

	out.Reset()
	if err := segments(context.Background(), []string{"verify", a, b}, &out); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !strings.Contains(out.String(), "ok: 2 archives chain to segment 13") {
		t.Fatalf("verify printed:\n%s", out.String())
	}
	out.Reset()
	if err := segments(context.Background(), []string{"verify", "--json", a, b}, &out); err != nil {
		t.Fatal(err)
	}
	var reports []archiveReport
	if err := json.Unmarshal(out.Bytes(), &reports); err != nil || len(reports) != 2 || reports[1].PrevHash != reports[0].HeadHash ||
		reports[1].Name != "data00001a.tar" || reports[0].NodeWrites != 3 {
		t.Fatalf("verify --json: %v %+v", err, reports)
	}
	// Out of order they do not chain.
	if err := segments(context.Background(), []string{"verify", b, a}, &out); err == nil {
		t.Fatal("archives verified out of order")
	}
}

func TestSegmentsFetchRefusesABrokenArchive(t *testing.T) {
	srv := archivesServer(t, true)
	dir := t.TempDir()
	var out bytes.Buffer
	err := segments(context.Background(), []string{"fetch", "--validator", srv.URL, "--dir", dir}, &out)
	if err == nil || !strings.Contains(err.Error(), "data00001a.tar") || !strings.Contains(err.Error(), "chain broken") {
		t.Fatalf("fetch of a broken archive: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "data00000a.tar" {
		t.Fatalf("files left: %v", entries)
	}

	if err := segments(context.Background(), []string{"fetch", "--validator", srv.URL, "--dir", dir, "data00009a.tar"}, &out); err == nil ||
		!strings.Contains(err.Error(), "no TAR file data00009a.tar") {
		t.Fatalf("fetch of a missing TAR file: %v", err)
	}
}
