package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
)

// TestMockRoutesOnlyInMockMode: without a mock clock (TESTNET, MAINNET) the
// /api/mock/* routes do not exist.
func TestMockRoutesOnlyInMockMode(t *testing.T) {
	e := New(Config{}, Deps{}, zap.NewNop())
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/mock/epoch-status"},
		{http.MethodPost, "/api/mock/advance-epoch"},
		{http.MethodPost, "/api/mock/set-epoch-offset?offset=1"},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(r.method, r.path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", r.method, r.path, rec.Code)
		}
	}
}
