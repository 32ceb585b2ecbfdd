package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestLocalUIPages: the local UI's pages are served as HTML with a
// same-origin policy, / leads to the dashboard, and with a token set the
// pages take it like every other route.
func TestLocalUIPages(t *testing.T) {
	base := startMock(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("GET /: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	for page, marker := range map[string]string{"/dashboard": `id="cluster"`, "/explorer": `id="props"`, "/api-browser": `id="routes"`} {
		resp, err := http.Get(base + page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") ||
			!strings.Contains(string(body), marker) || !strings.Contains(string(body), `href="/explorer"`) {
			t.Fatalf("GET %s: %s %v\n%s", page, resp.Status, resp.Header, body)
		}
	}

	guarded := startMockWith(t, func(c *Config) { c.AuthToken = "s3cret" })
	if resp, err := http.Get(guarded + "/dashboard"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the dashboard without the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
