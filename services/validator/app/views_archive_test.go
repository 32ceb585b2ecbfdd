package app

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/segarchive"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
)

// hexHash writes a hash as the segment views do: 0x and 64 hex digits.
func hexHash(h [32]byte) string { return "0x" + hex.EncodeToString(h[:]) }

// getArchive fetches a segment archive.
func getArchive(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestSegmentArchive(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	commit(t, base, a.formAt(t, pageID(0xc1), "one", `{"title":"one","jcr:content":{"text":"x"}}`))
	commit(t, base, a.form(t, pageID(0xc2), `{"title":"two"}`, a.key))
	last := commit(t, base, a.deleteForm(t, pageID(0xc3), pageID(0xc2)))

	var tars api.SegmentTars
	waitFor(t, func() bool {
		if code := getJSON(t, base+"/api/segments/tars", &tars); code != http.StatusOK {
			t.Fatalf("GET /api/segments/tars: %d", code)
		}
		return len(tars.Tars) == 1 && tars.Tars[0].LastIndex >= last
	})
	f := tars.Tars[0]
	if tars.NodeID != 1 || tars.TargetBytes != segments.DefaultTarTargetBytes || f.Name != "data00000a.tar" || f.Closed || !f.ChainOK || f.Segments < 3 {
		t.Fatalf("TAR files %+v", tars)
	}

	resp, body := getArchive(t, base+"/segments/"+f.Name)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-tar" ||
		resp.Header.Get("X-Segments-Head") != f.HeadHash || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("archive answer %d %v", resp.StatusCode, resp.Header)
	}
	var chain segarchive.Chain
	s, err := chain.Verify(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	// The archive is the listed TAR file: same segments, same hashes, all
	// the way from the chain's start.
	if s.Segments != f.Segments || s.FirstIndex != f.FirstIndex || s.LastIndex != f.LastIndex || s.Bytes != f.Bytes ||
		hexHash(s.HeadHash) != f.HeadHash || s.PrevHash != [32]byte{} || s.NodeWrites < 3 || s.NodeDeletes != 1 ||
		s.Manifest.Name != f.Name {
		t.Fatalf("archive %+v, TAR file %+v", s, f)
	}
	if _, again := getArchive(t, base+"/segments/"+f.Name); !bytes.Equal(again, body) {
		t.Fatal("the same TAR file archived twice differs")
	}
	// Standard tools read it.
	if tarBin, err := exec.LookPath("tar"); err == nil {
		cmd := exec.Command(tarBin, "-tf", "-")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tar -t: %v", err)
		}
		names := strings.Fields(string(out))
		if len(names) != f.Segments+1 || names[0] != segarchive.ManifestName || names[1] != segarchive.EntryName(f.FirstIndex, 0) {
			t.Fatalf("tar -t lists %v", names)
		}
	}

	for _, name := range []string{"data00001a.tar", "data00000b.tar", "data0000a.tar", "data00000A.tar", "foo", "data-0001a.tar"} {
		var e apierror.Body
		if code := getJSON(t, base+"/segments/"+name, &e); code != http.StatusNotFound || e.Error == nil || e.Error.Code != apierror.NotFound {
			t.Fatalf("GET /segments/%s: %d %+v", name, code, e.Error)
		}
	}
}

func TestRecentSegments(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	commit(t, base, a.formAt(t, pageID(0xd1), "one", `{"title":"one"}`))
	last := commit(t, base, a.formAt(t, pageID(0xd2), "two", `{"title":"two"}`))

	var r api.RecentSegments
	waitFor(t, func() bool {
		if code := getJSON(t, base+"/api/segments/recent", &r); code != http.StatusOK {
			t.Fatalf("GET /api/segments/recent: %d", code)
		}
		return len(r.Segments) > 0 && r.Segments[0].Index >= last
	})
	var tars api.SegmentTars
	getJSON(t, base+"/api/segments/tars", &tars)
	if r.Limit != api.DefaultRecentSegments || len(r.Segments) < 2 || len(r.Segments) > r.Limit {
		t.Fatalf("recent %+v", r)
	}
	// Newest first, each naming the hash of the one after it in the list.
	for i, s := range r.Segments {
		if s.Tar != "data00000a.tar" || s.Bytes == 0 || s.Term == 0 {
			t.Fatalf("segment %+v", s)
		}
		if i > 0 && (r.Segments[i-1].Index <= s.Index || r.Segments[i-1].PrevHash != s.Hash) {
			t.Fatalf("segments %d and %d do not chain: %+v", i-1, i, r.Segments[i-1:i+1])
		}
	}
	if tars.Tars[0].LastIndex == r.Segments[0].Index && tars.Tars[0].HeadHash != r.Segments[0].Hash {
		t.Fatalf("newest segment %+v, TAR file %+v", r.Segments[0], tars.Tars[0])
	}

	var one api.RecentSegments
	if code := getJSON(t, base+"/api/segments/recent?limit=1", &one); code != http.StatusOK || one.Limit != 1 || len(one.Segments) != 1 {
		t.Fatalf("?limit=1: %d %+v", code, one)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "limit=1&limit=2"} {
		var e apierror.Body
		if code := getJSON(t, base+"/api/segments/recent?"+q, &e); code != http.StatusBadRequest || e.Error == nil || e.Error.Details["field"] != "limit" {
			t.Fatalf("?%s: %d %+v", q, code, e.Error)
		}
	}
}
