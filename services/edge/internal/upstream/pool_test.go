package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func validator(t *testing.T, status int, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func dead(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// accept takes "ok" with 200, calls a 5xx unavailable, refuses the rest.
func accept(r Response) error {
	switch {
	case r.Status >= 500:
		return Unavailable("status %d", r.Status)
	case r.Status != http.StatusOK || string(r.Body) != "ok":
		return errors.New("not ok")
	}
	return nil
}

var x = Route{Template: "/v1/x", Path: "/v1/x"}

func TestGet(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		urls    []string
		want    error // nil: answered by the last
		sources int
	}{
		{"failover past a dead one", []string{dead(t), validator(t, 200, "ok")}, nil, 2},
		{"failover past a 5xx", []string{validator(t, 503, "electing"), validator(t, 200, "ok")}, nil, 2},
		{"failover past a refused answer", []string{validator(t, 200, "garbage"), validator(t, 200, "ok")}, nil, 2},
		{"first good answer wins", []string{validator(t, 200, "ok"), dead(t)}, nil, 1},
		{"all down", []string{dead(t), validator(t, 500, "")}, ErrUnavailable, 2},
		{"one refused, one down", []string{validator(t, 200, "garbage"), dead(t)}, ErrRejected, 2},
	} {
		p, err := NewPool(Config{URLs: tc.urls, Timeout: time.Second, Token: "secret"})
		if err != nil {
			t.Fatal(err)
		}
		resp, sources, err := p.Get(ctx, x, accept)
		if len(sources) != tc.sources {
			t.Errorf("%s: %d sources: %+v", tc.name, len(sources), sources)
		}
		if tc.want == nil {
			if err != nil || string(resp.Body) != "ok" || !sources[len(sources)-1].OK {
				t.Errorf("%s: %v %q %+v", tc.name, err, resp.Body, sources)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		for _, s := range sources {
			if s.OK || s.Error == "" || s.Route != "/v1/x" {
				t.Errorf("%s: source %+v", tc.name, s)
			}
		}
	}
}

func TestGetFromSaysWhy(t *testing.T) {
	p, err := NewPool(Config{URLs: []string{"http://unused"}, Timeout: time.Second, Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	_, src, err := p.GetFrom(context.Background(), validator(t, 200, "garbage"), x, accept)
	if !errors.Is(err, ErrRejected) || err.Error() != "not ok" || src.Error != "not ok" {
		t.Fatalf("%v %+v", err, src)
	}
	_, src, err = p.GetFrom(context.Background(), validator(t, 502, ""), x, accept)
	if !errors.Is(err, ErrUnavailable) || src.Error != "status 502" {
		t.Fatalf("%v %+v", err, src)
	}
}

func TestNewPool(t *testing.T) {
	if _, err := NewPool(Config{Timeout: time.Second}); err == nil {
		t.Error("no URL accepted")
	}
	if _, err := NewPool(Config{URLs: []string{"ftp://x"}, Timeout: time.Second}); err == nil {
		t.Error("a non-http URL accepted")
	}
	p, err := NewPool(Config{URLs: []string{" http://a/ ", "https://b"}, Timeout: time.Second})
	if err != nil || p.URLs()[0] != "http://a" || p.URLs()[1] != "https://b" {
		t.Errorf("%v %v", p.URLs(), err)
	}
}
