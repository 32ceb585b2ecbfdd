package auth

import (
	"net/http"
	"testing"
)

func TestLanes(t *testing.T) {
	l := Lanes{APIToken: "general", RuntimeToken: "runtime"}
	cases := []struct {
		path, header string
		want         Decision
	}{
		{"/ops/v1/health", "", http.StatusUnauthorized},
		{"/ops/v1/health", "Bearer wrong", http.StatusForbidden},
		{"/ops/v1/health", "Bearer general", 0},
		{"/ops/v1/health", "Basic general", http.StatusUnauthorized},
		{"/ops/v1/runtime/msgbus", "Bearer general", http.StatusForbidden},
		{"/ops/v1/runtime/msgbus", "Bearer runtime", 0},
		{"/ops/v1/runtime/msgbus", "", http.StatusUnauthorized},
	}
	for _, c := range cases {
		if got := l.Check(c.path, c.header); got != c.want {
			t.Errorf("%s with %q: %d, want %d", c.path, c.header, got, c.want)
		}
	}
	if (Lanes{}).Check("/ops/v1/health", "") != 0 {
		t.Error("disabled auth refused a request without a token")
	}
	if (Lanes{APIToken: "general"}).Check("/ops/v1/runtime/x", "Bearer general") != 0 {
		t.Error("without a runtime token the general lane governs runtime routes")
	}
}
