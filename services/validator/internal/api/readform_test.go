package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// parseFormReference is readForm as it was written with Request.ParseForm,
// the behaviour readForm keeps while doing less work.
func parseFormReference(s *Server, c echo.Context) (url.Values, error) {
	req := c.Request()
	mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEApplicationForm {
		return nil, apierror.New(apierror.InvalidField, "content type must be application/x-www-form-urlencoded").
			WithDetail("field", "Content-Type")
	}
	limit := int64(s.cfg.Form.MaxMessageBytes)*3 + proposal.FormFieldsBytes
	req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
	if err := req.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, httpserver.TooLarge(limit)
		}
		return nil, apierror.New(apierror.InvalidField, "form does not parse: %v", err)
	}
	return req.PostForm, nil
}

// TestReadFormMatchesParseForm: every combination of media type, body
// (well formed, malformed, too large, of undeclared length) and query
// string gives the form or the error ParseForm gave.
func TestReadFormMatchesParseForm(t *testing.T) {
	s := &Server{cfg: Config{Form: proposal.Options{MaxMessageBytes: 100}}}
	limit := int(s.cfg.Form.MaxMessageBytes)*3 + proposal.FormFieldsBytes
	bodies := map[string]string{
		"form":        "proposalId=0x01&message=hello+world%21&path=a%2Fb&empty=&flag",
		"empty":       "",
		"repeated":    "a=1&a=2&b=3",
		"bad escape":  "a=%zz&b=1",
		"semicolon":   "a=1;b=2",
		"at limit":    "m=" + strings.Repeat("x", limit-2),
		"over limit":  "m=" + strings.Repeat("x", limit-1),
		"far over":    strings.Repeat("y", 3*limit),
		"bad and big": "a=%zz&m=" + strings.Repeat("x", limit),
	}
	types := []string{
		"application/x-www-form-urlencoded",
		"application/x-www-form-urlencoded; charset=utf-8",
		"Application/X-WWW-Form-URLEncoded",
		"application/x-www-form-urlencoded; =broken",
		"multipart/form-data; boundary=x",
		"text/plain",
		"",
	}
	queries := []string{"", "wait=1s", "wait=%zz", "a=1;b=2", "message=from-the-query"}
	for bodyName, body := range bodies {
		for _, ct := range types {
			for _, q := range queries {
				for _, declared := range []bool{true, false} {
					request := func() (echo.Context, *http.Request) {
						var r io.Reader = strings.NewReader(body)
						if !declared {
							r = io.MultiReader(r) // hides the length: ContentLength -1
						}
						req := httptest.NewRequest(http.MethodPost, "/v1/propose-write?"+q, r)
						if ct != "" {
							req.Header.Set(echo.HeaderContentType, ct)
						}
						return echo.New().NewContext(req, httptest.NewRecorder()), req
					}
					c, _ := request()
					got, gotErr := s.readForm(c, nil)
					c, _ = request()
					want, wantErr := parseFormReference(s, c)
					name := bodyName + " | " + ct + " | ?" + q
					if !declared {
						name += " | undeclared length"
					}
					if !reflect.DeepEqual(apierror.As(gotErr), apierror.As(wantErr)) || (gotErr == nil) != (wantErr == nil) {
						t.Errorf("%s: error %v, ParseForm gave %v", name, gotErr, wantErr)
						continue
					}
					if gotErr == nil && !reflect.DeepEqual(got, want) {
						t.Errorf("%s: form %v, ParseForm gave %v", name, got, want)
					}
				}
			}
		}
	}
}

// TestReadFormAllocatesWhatArrives: a request that declares a large body
// and sends a small one makes readForm allocate about what was sent, not
// the declared length (which a few thousand trickling requests would turn
// into gigabytes); one declaring more than the limit is refused before
// anything is read.
func TestReadFormAllocatesWhatArrives(t *testing.T) {
	s := &Server{cfg: Config{Form: proposal.Options{MaxMessageBytes: 1 << 20}}}
	const body = "proposalId=0x01&message=hi"
	for _, declared := range []int64{s.formLimit(), 1 << 30} {
		read := func() error {
			req := httptest.NewRequest(http.MethodPost, "/v1/propose-write", strings.NewReader(body))
			req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationForm)
			req.ContentLength = declared
			_, err := s.readForm(echo.New().NewContext(req, httptest.NewRecorder()), nil)
			return err
		}
		err := read()
		if declared > s.formLimit() {
			if apierror.CodeOf(err) != apierror.ContentTooLarge {
				t.Fatalf("declared %d: %v, want content_too_large", declared, err)
			}
		} else if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && apierror.CodeOf(err) != apierror.InvalidField {
			t.Fatalf("declared %d: %v", declared, err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 20
		for range runs {
			_ = read()
		}
		runtime.ReadMemStats(&after)
		if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 64<<10 {
			t.Fatalf("declared %d bytes, sent %d: %d bytes allocated per request", declared, len(body), perRun)
		}
	}
}
