package system

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/tests/harness"
)

// eventsPage follows the event stream with the browser's own EventSource
// from the start of history, and posts what it received to /report once it
// has want events (or after 45 s, with what it has).
const eventsPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>events</title></head><body>
<script>
const want = %WANT%;
const received = [];
let opens = 0, errors = 0, reported = false;
function report() {
  if (reported) return;
  reported = true;
  es.close();
  fetch('/report', {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({received, opens, errors})});
}
const es = new EventSource('/v1/events/stream?lastEventId=0');
es.onopen = () => { opens++; };
es.onerror = () => { errors++; };  // the browser reconnects by itself
for (const name of ['content', 'gap', 'dropped']) {
  es.addEventListener(name, (e) => {
    received.push({name, lastEventId: e.lastEventId, data: JSON.parse(e.data)});
    if (received.length >= want) report();
  });
}
setTimeout(report, 45000);
</script></body></html>`

// browserReport is what the page posts.
type browserReport struct {
	Received []struct {
		Name        string          `json:"name"`
		LastEventID string          `json:"lastEventId"`
		Data        json.RawMessage `json:"data"`
	} `json:"received"`
	Opens  int `json:"opens"`
	Errors int `json:"errors"`
}

// sseProxy forwards the event stream to a validator and ends the first
// connection after cutAfter content events: a server-side disconnect. It
// records the Last-Event-ID each connection carried, and the id of the last
// event the first connection forwarded.
type sseProxy struct {
	upstream string
	cutAfter int
	mu       sync.Mutex
	resumes  []string
	cutAt    string
}

func (p *sseProxy) connections() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.resumes)
}

func (p *sseProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	conn := len(p.resumes)
	p.resumes = append(p.resumes, r.Header.Get("Last-Event-ID"))
	p.mu.Unlock()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, p.upstream+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		req.Header.Set("Last-Event-ID", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control"} {
		w.Header().Set(h, resp.Header.Get(h))
	}
	w.WriteHeader(resp.StatusCode)
	flusher := w.(http.Flusher)
	sc := bufio.NewScanner(resp.Body)
	// The log also holds events the page does not listen to (consensus):
	// only content events count towards the cut.
	contents, id, content := 0, "", false
	for sc.Scan() {
		line := sc.Text()
		if _, err := w.Write([]byte(line + "\n")); err != nil {
			return
		}
		switch {
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case line == "event: "+api.EventContent:
			content = true
		case line == "":
			flusher.Flush()
			if content {
				contents++
				if conn == 0 && contents == p.cutAfter {
					p.mu.Lock()
					p.cutAt = id
					p.mu.Unlock()
					return // the server ends the stream
				}
			}
			content = false
		}
	}
}

// chromium returns the path of Debian's chromium, or skips the test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("headless Chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)")
	return ""
}

// openInChromium opens url in a headless Chromium for the rest of the test;
// its log is shown if the test fails.
func openInChromium(t *testing.T, browser, url string) {
	t.Helper()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+filepath.Join(dir, "profile"), url)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that its helper processes go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("chromium's log (last 4 KiB):\n%s", tail(b, 4096))
			}
		}
	})
}

// reportTo decodes a page's report into reports, keeping the first.
func reportTo[T any](reports chan<- T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var rep T
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case reports <- rep:
		default:
		}
	}
}

// TestBrowserEventSourceResumes: Chromium's EventSource reads the event
// stream, the server ends the connection, the browser reconnects by itself
// with Last-Event-ID and receives every event once, in order.
func TestBrowserEventSourceResumes(t *testing.T) {
	browser := chromium(t)
	c := newCluster(t, 1, "MOCK")
	n := c.waitLeader()

	const before, after = 3, 3
	var written []string
	for i := range before {
		id, _ := c.write(n, fmt.Sprintf(`{"title":"before %d"}`, i))
		written = append(written, id.Hex())
	}

	proxy := &sseProxy{upstream: n.url(), cutAfter: before}
	reports := make(chan browserReport, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(eventsPage, "%WANT%", strconv.Itoa(before+after), 1)))
	})
	mux.Handle("GET /v1/events/stream", proxy)
	mux.HandleFunc("POST /report", reportTo(reports))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	openInChromium(t, browser, srv.URL+"/")

	// The first connection is cut after the history; the browser comes
	// back by itself, resuming after the last event it received.
	harness.Eventually(t, 60*time.Second, func() bool { return len(proxy.connections()) >= 2 })
	proxy.mu.Lock()
	cutAt := proxy.cutAt
	proxy.mu.Unlock()
	if conns := proxy.connections(); conns[0] != "" || cutAt == "" || conns[1] != cutAt {
		t.Fatalf("Last-Event-ID of the connections: %q, want none then %q, the last event before the cut", conns, cutAt)
	}
	for i := range after {
		id, _ := c.write(n, fmt.Sprintf(`{"title":"after %d"}`, i))
		written = append(written, id.Hex())
	}

	var rep browserReport
	select {
	case rep = <-reports:
	case <-time.After(90 * time.Second):
		t.Fatal("the page reported nothing within 90s")
	}
	if rep.Opens < 2 {
		t.Errorf("the EventSource opened %d times, want 2 (a reconnection)", rep.Opens)
	}
	var got []string
	var last uint64
	for i, m := range rep.Received {
		var ev api.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil || m.Name != api.EventContent {
			t.Fatalf("message %d: %s %s", i, m.Name, m.Data)
		}
		id, err := strconv.ParseUint(ev.ID, 10, 64)
		if err != nil || m.LastEventID != ev.ID || id <= last {
			t.Fatalf("message %d: lastEventId %q, id %q after %d", i, m.LastEventID, ev.ID, last)
		}
		last = id
		got = append(got, ev.ProposalID)
	}
	if !slices.Equal(got, written) {
		t.Fatalf("the browser received the proposals\n%v\nwant\n%v", got, written)
	}
}
