package system

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// uiHarnessPage opens the validator's UI pages in frames of the same origin
// (the test server proxies the validator), waits until each has shown its
// data (body data-ready), and posts the text each shows to /report.
const uiHarnessPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>ui</title></head><body>
<iframe id="dashboard" src="/dashboard" width="1200" height="800"></iframe>
<iframe id="explorer" src="%EXPLORER%" width="1200" height="800"></iframe>
<iframe id="api" src="/api-browser" width="1200" height="800"></iframe>
<script>
async function shown(id) {
  const frame = document.getElementById(id);
  for (let i = 0; i < 600; i++) {
    const d = frame.contentDocument;
    if (d && d.body && d.body.dataset.ready === 'true') return d.body.innerText;
    await new Promise(r => setTimeout(r, 100));
  }
  const d = frame.contentDocument;
  return 'NOT READY: ' + (d && d.body ? d.body.innerText : '');
}
Promise.all(['dashboard', 'explorer', 'api'].map(shown)).then(([dashboard, explorer, api]) =>
  fetch('/report', {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({dashboard, explorer, api})}));
</script></body></html>`

type uiReport struct {
	Dashboard string `json:"dashboard"`
	Explorer  string `json:"explorer"`
	API       string `json:"api"`
}

// TestBrowserLocalUI: in headless Chromium, the dashboard shows the
// validator as leader of a cluster whose state hashes agree, the explorer
// shows a written node's properties, and the API browser lists the routes.
func TestBrowserLocalUI(t *testing.T) {
	browser := chromium(t)
	c := newCluster(t, 1, "MOCK")
	n := c.waitLeader()
	_, path := c.write(n, `{"title":"shown in the explorer"}`)

	upstream, err := url.Parse(n.url())
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan uiReport, 1)
	mux := http.NewServeMux()
	mux.Handle("/", httputil.NewSingleHostReverseProxy(upstream))
	mux.HandleFunc("GET /ui-harness", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(uiHarnessPage, "%EXPLORER%", "/explorer?path="+url.QueryEscape(path), 1)))
	})
	mux.HandleFunc("POST /report", reportTo(reports))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	openInChromium(t, browser, srv.URL+"/ui-harness")

	var rep uiReport
	select {
	case rep = <-reports:
	case <-time.After(90 * time.Second):
		t.Fatal("the page reported nothing within 90s")
	}
	for _, want := range []string{"LEADER", "state hashes agree", "status ok"} {
		if !strings.Contains(rep.Dashboard, want) {
			t.Errorf("the dashboard does not show %q:\n%s", want, rep.Dashboard)
		}
	}
	for _, want := range []string{path, `"shown in the explorer"`} {
		if !strings.Contains(rep.Explorer, want) {
			t.Errorf("the explorer does not show %q:\n%s", want, rep.Explorer)
		}
	}
	for _, want := range []string{"/v1/propose-write", "local-ui", "contract source routes not served: none"} {
		if !strings.Contains(rep.API, want) {
			t.Errorf("the API browser does not show %q:\n%s", want, rep.API)
		}
	}
}
