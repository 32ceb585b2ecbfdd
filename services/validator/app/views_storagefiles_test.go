package app

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// journalLine is one parsed line of /journal.log.
type journalLine struct {
	index uint64
	hash  string
}

// getJournal fetches /journal.log with query q and parses its lines.
func getJournal(t *testing.T, base, q string) (*http.Response, []journalLine) {
	t.Helper()
	resp, body := getArchive(t, base+"/journal.log"+q)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /journal.log%s: %d %s", q, resp.StatusCode, body)
	}
	var lines []journalLine
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		fields := map[string]string{}
		for _, f := range strings.Fields(sc.Text()) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Fatalf("journal line %q: field %q is not key=value", sc.Text(), f)
			}
			fields[k] = v
		}
		index, err := strconv.ParseUint(fields["index"], 10, 64)
		if err != nil || len(fields) != 6 || len(fields["hash"]) != 66 {
			t.Fatalf("journal line %q", sc.Text())
		}
		lines = append(lines, journalLine{index: index, hash: fields["hash"]})
	}
	return resp, lines
}

// getManifest fetches /manifest and parses its key=value lines.
func getManifest(t *testing.T, base string) map[string]string {
	t.Helper()
	resp, body := getArchive(t, base+"/manifest")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /manifest: %d %v", resp.StatusCode, resp.Header)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if _, dup := m[k]; !ok || dup {
			t.Fatalf("manifest line %q", line)
		}
		m[k] = v
	}
	return m
}

// TestStorageFiles: the manifest names the head of the segment chain the
// TAR files list; the journal has a line per segment in index order, each
// with the hash the segment views give, and ?from= starts it at an index.
func TestStorageFiles(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	commit(t, base, a.form(t, pageID(0xd1), `{"title":"one"}`, a.key))
	last := commit(t, base, a.form(t, pageID(0xd2), `{"title":"two"}`, a.key))

	var m map[string]string
	waitFor(t, func() bool {
		m = getManifest(t, base)
		n, _ := strconv.ParseUint(m["segments.last"], 10, 64)
		return n >= last
	})
	if m["manifest.version"] != "1" || m["node.id"] != "1" || m["mode"] != "MOCK" || m["content.root"] != "ledger" ||
		len(m["chain.contract"]) != 42 || m["segments.chainBreaks"] != "0" || m["tar.count"] != "1" || m["generation.current"] != "0" {
		t.Fatalf("manifest %v", m)
	}
	headIndex, _ := strconv.ParseUint(m["segments.last"], 10, 64)
	count, _ := strconv.Atoi(m["segments.count"])

	resp, lines := getJournal(t, base, "")
	if resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("X-Applied-Index") == "" {
		t.Fatalf("journal headers %v", resp.Header)
	}
	byIndex := map[uint64]string{}
	var upToHead int
	for i, l := range lines {
		if i > 0 && l.index <= lines[i-1].index {
			t.Fatalf("journal out of order at line %d: %d after %d", i, l.index, lines[i-1].index)
		}
		byIndex[l.index] = l.hash
		if l.index <= headIndex {
			upToHead++
		}
	}
	if upToHead != count || byIndex[headIndex] != m["segments.head"] {
		t.Fatalf("journal: %d lines up to %d, head %s; manifest %v", upToHead, headIndex, byIndex[headIndex], m)
	}
	var recent api.RecentSegments
	getJSON(t, base+"/api/segments/recent?limit=200", &recent)
	for _, s := range recent.Segments {
		if h, ok := byIndex[s.Index]; ok && h != s.Hash {
			t.Fatalf("segment %d: journal hash %s, segment view %s", s.Index, h, s.Hash)
		}
	}

	_, tail := getJournal(t, base, "?from="+strconv.FormatUint(headIndex, 10))
	if len(tail) == 0 || tail[0].index != headIndex || tail[0].hash != m["segments.head"] {
		t.Fatalf("journal from %d: %+v", headIndex, tail)
	}
	if _, none := getJournal(t, base, "?from=18446744073709551615"); len(none) != 0 {
		t.Fatalf("journal past the end: %+v", none)
	}
	for _, q := range []string{"from=0", "from=x", "from=-1", "from=1&from=2"} {
		var e apierror.Body
		if code := getJSON(t, base+"/journal.log?"+q, &e); code != http.StatusBadRequest || e.Error == nil || e.Error.Details["field"] != "from" {
			t.Fatalf("?%s: %d %+v", q, code, e.Error)
		}
	}
}
