// Package ui serves the validator's local UI, the contract's local-ui
// layer: a dashboard (this validator, the cluster, the proposal queue, the
// operational events), a content explorer, an API browser and the operator
// assistant's chat box. The pages are static, rendered once from embedded
// templates; the browser reads the validator's own JSON routes (/health,
// /health/cluster, /v1/proposals/queue/stats, /v1/events/recent,
// /api/explore, /v1/index) and posts the chat's questions to /v1/chat, so
// the UI holds no state and shows nothing those routes do not. Like
// every route but /health* and the open snapshots, the pages take
// SVC_VALIDATOR_AUTH_TOKEN when it is set (put a proxy that adds it in front
// of a browser).
package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed pages/*.html
var pageFiles embed.FS

// Pages are the UI's routes and their templates.
var pages = map[string]string{
	"/dashboard":   "dashboard.html",
	"/explorer":    "explorer.html",
	"/api-browser": "api-browser.html",
	"/chat":        "chat.html",
}

// securityPolicy keeps the pages to their own origin and inline code.
const securityPolicy = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'"

// Pages are the UI's pages, rendered.
type Pages struct {
	bodies map[string][]byte // by route
}

// Options are what the pages show of the validator's configuration.
type Options struct {
	// ChatModel is the operator assistant's model; "" when no chat
	// endpoint is configured, and /chat says how to set one up.
	ChatModel string
	// ChatSettings name the settings that configure the assistant, for
	// /chat's instructions.
	ChatSettings ChatSettings
}

// ChatSettings are the names of the assistant's settings.
type ChatSettings struct {
	URL, Model, KeyFile string
}

// Render renders every page once.
func Render(opts Options) (*Pages, error) {
	p := &Pages{bodies: make(map[string][]byte, len(pages))}
	for route, file := range pages {
		t, err := template.ParseFS(pageFiles, "pages/layout.html", "pages/"+file)
		if err != nil {
			return nil, fmt.Errorf("ui: %s: %w", file, err)
		}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, file, opts); err != nil {
			return nil, fmt.Errorf("ui: %s: %w", file, err)
		}
		p.bodies[route] = buf.Bytes()
	}
	return p, nil
}

// Handler serves the page of route (/dashboard, /explorer, /api-browser,
// /chat, and / which leads to the dashboard); nil when there is none.
func (p *Pages) Handler(route string) echo.HandlerFunc {
	if route == "/" {
		return root
	}
	body, ok := p.bodies[route]
	if !ok {
		return nil
	}
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", securityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		return c.HTMLBlob(http.StatusOK, body)
	}
}

// root leads to the dashboard.
func root(c echo.Context) error { return c.Redirect(http.StatusFound, "/dashboard") }
