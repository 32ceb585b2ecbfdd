package routes

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkKeptView is the edge's own cost of answering a view from its
// kept form, the path nearly every request takes under load: routing,
// middleware (metrics, tokens), the currency check of the view's answers,
// and writing the envelope. No network: the HTTP server and the kernel
// are what make up the rest of a request's cost (make bench-edge).
func BenchmarkKeptView(b *testing.B) {
	fc := newCluster(b, 3)
	clk := newClock() // stands still: every answer stays kept
	srv := keptEdge(b, time.Second, clk, fc.urls()...)
	handler := srv.Config.Handler
	for _, route := range []string{"overview", "queue", "network"} {
		b.Run("route="+route, func(b *testing.B) {
			path := "/ops/v1/" + route
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
			}
			req := httptest.NewRequest(http.MethodGet, path, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", path, rec.Code)
				}
			}
		})
	}
}
