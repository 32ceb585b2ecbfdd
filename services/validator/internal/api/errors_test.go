package api

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
)

// TestFailureAfterTheAnswerBegan: a handler that fails once its answer has
// begun leaves its reader with a broken body, never one that ends as if it
// were complete.
func TestFailureAfterTheAnswerBegan(t *testing.T) {
	e := New(Config{}, Deps{}, zap.NewNop())
	e.GET("/streamed", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextPlainCharsetUTF8)
		c.Response().WriteHeader(http.StatusOK)
		if _, err := io.WriteString(c.Response(), "index=1 hash=0x00\n"); err != nil {
			return err
		}
		c.Response().Flush()
		return errors.New("the snapshot could not be read further")
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/streamed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "index=1 hash=0x00\n" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("status %d, body %q, read error %v; want 200, the first line, then an unexpected EOF", resp.StatusCode, body, err)
	}
}
