// Package ui serves the validator's local UI, the contract's local-ui
// layer: a dashboard (this validator, the cluster, the proposal queue, the
// operational events), a content explorer and an API browser. The pages are
// static, rendered once from embedded templates; the browser reads the
// validator's own JSON routes (/health, /health/cluster,
// /v1/proposals/queue/stats, /v1/events/recent, /api/explore, /v1/index),
// so the UI holds no state and shows nothing those routes do not. Like
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
}

// securityPolicy keeps the pages to their own origin and inline code.
const securityPolicy = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'"

// Register renders the pages and adds their routes; / redirects to the
// dashboard.
func Register(e *echo.Echo) error {
	for route, file := range pages {
		t, err := template.ParseFS(pageFiles, "pages/layout.html", "pages/"+file)
		if err != nil {
			return fmt.Errorf("ui: %s: %w", file, err)
		}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, file, nil); err != nil {
			return fmt.Errorf("ui: %s: %w", file, err)
		}
		body := buf.Bytes()
		e.GET(route, func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("Content-Security-Policy", securityPolicy)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Cache-Control", "no-cache")
			return c.HTMLBlob(http.StatusOK, body)
		})
	}
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/dashboard") })
	return nil
}
