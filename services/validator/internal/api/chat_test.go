package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestChatRefusal holds the assistant's reads to the route table: it may
// read exactly the GET routes of the public and ops-read lanes that are
// neither pages, nor streams, nor downloads, and every route chatRefusal
// names by path is in the table (a renamed one would slip through).
func TestChatRefusal(t *testing.T) {
	s := &Server{deps: Deps{UI: stubUI{}, EventStreams: stubStreams{}}}
	routes := s.routes()
	named := []string{"/v1/events/stream", "/v1/ops/events/stream", "/segments/:name", "/journal.log"}
	for _, path := range named {
		if !slices.ContainsFunc(routes, func(r Route) bool { return r.Method == http.MethodGet && r.Path == path }) {
			t.Errorf("chatRefusal names %s, which is not a GET route of the table", path)
		}
	}
	readable := 0
	for _, r := range routes {
		want := r.Method == http.MethodGet && (r.Permission == Public || r.Permission == OpsRead) &&
			r.Layer != api.LayerLocalUI && !slices.Contains(named, r.Path)
		if got := chatRefusal(r) == ""; got != want {
			t.Errorf("%s %s (%s, %s): readable %v, want %v", r.Method, r.Path, r.Layer, r.Permission, got, want)
		}
		if want {
			readable++
		}
	}
	if readable < 40 {
		t.Errorf("only %d routes readable", readable)
	}
}

// TestCappedRecorder: a read keeps the status and the first limit bytes,
// and says when it cut the rest.
func TestCappedRecorder(t *testing.T) {
	w := &cappedRecorder{header: http.Header{}, limit: 10}
	for _, chunk := range []string{"0123", "4567", "89ab", "cdef"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("write %q: %d %v", chunk, n, err)
		}
	}
	w.WriteHeader(http.StatusTeapot) // too late: the status was sent with the first write
	if w.status != http.StatusOK || string(w.body) != "0123456789" || !w.truncated {
		t.Fatalf("status %d, body %q, truncated %v", w.status, w.body, w.truncated)
	}
	whole := &cappedRecorder{header: http.Header{}, limit: 10}
	whole.WriteHeader(http.StatusNotFound)
	_, _ = whole.Write([]byte(strings.Repeat("a", 10)))
	if whole.status != http.StatusNotFound || whole.truncated || len(whole.body) != 10 {
		t.Fatalf("status %d, body %q, truncated %v", whole.status, whole.body, whole.truncated)
	}
}
