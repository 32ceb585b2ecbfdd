package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/apierror"
)

// The assistant against an endpoint of the test's over real TCP, with
// routes of the test's: what it does when the endpoint misbehaves, and the
// bounds it keeps. The whole path through a validator is
// app/chat_test.go's.

const testKey = "sk-test-4c1d2b7f"

// recordedRoutes answers every read with its path, and counts them.
type recordedRoutes struct {
	mu    sync.Mutex
	reads []string
}

func (r *recordedRoutes) Readable() []string { return []string{"/v1/consensus/status"} }

func (r *recordedRoutes) Get(_ context.Context, target string, limit int) (Reading, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, target)
	if target == "/refused" {
		return Reading{}, fmt.Errorf("%w: not for the model", ErrRefused)
	}
	return Reading{Route: target, Status: http.StatusOK, Body: []byte(`{"path":"` + target + `"}`)}, nil
}

// endpoint serves POST /chat/completions with handle, over real TCP.
func endpoint(t *testing.T, handle http.HandlerFunc) string {
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	return srv.URL
}

func assistant(t *testing.T, cfg Config) *Assistant {
	t.Helper()
	if cfg.Model == "" {
		cfg.Model = "m"
	}
	a, err := New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func keyFile(t *testing.T, content string) string {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const question = `{"messages":[{"role":"user","content":"Who leads?"}]}`

func completion(msg map[string]any) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": msg}}})
	return string(b)
}

func toolCalls(paths ...string) string {
	var calls []any
	for i, p := range paths {
		args, _ := json.Marshal(map[string]string{"path": p})
		calls = append(calls, map[string]any{"id": fmt.Sprint("c", i), "type": "function",
			"function": map[string]any{"name": "get_route", "arguments": string(args)}})
	}
	return completion(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
}

// TestEndpointFailures: an endpoint that refuses, answers garbage or too
// much, or redirects is a 502 chat_endpoint_failed whose message quotes
// nothing it said (an endpoint may echo the key); a redirect is not
// followed, so the key goes nowhere else; a slow one is a 504.
func TestEndpointFailures(t *testing.T) {
	var elsewhere sync.Mutex
	var leaked []string
	other := endpoint(t, func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		elsewhere.Unlock()
	})
	for name, handle := range map[string]http.HandlerFunc{
		"unauthorized": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"Incorrect API key provided: `+testKey+`"}}`, http.StatusUnauthorized)
		},
		"not a completion": func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>"+testKey) },
		"no choices":       func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"choices":[]}`) },
		"too large": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, completion(map[string]any{"role": "assistant", "content": strings.Repeat("a", 2<<10)}))
		},
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other+"/v1/chat/completions", http.StatusTemporaryRedirect)
		},
		"empty answer": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, completion(map[string]any{"role": "assistant", "content": " "}))
		},
	} {
		a := assistant(t, Config{URL: endpoint(t, handle) + "/v1", KeyFile: keyFile(t, testKey), MaxResponseBytes: 1 << 10, MaxToolResultBytes: 512})
		_, err := a.Answer(context.Background(), []byte(question), &recordedRoutes{})
		if e := apierror.As(err); e == nil || e.Code != apierror.ChatEndpointFailed || strings.Contains(e.Message, testKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(leaked) > 0 {
		t.Errorf("a redirect took the request elsewhere, with %q", leaked)
	}

	slow := assistant(t, Config{URL: endpoint(t, func(w http.ResponseWriter, r *http.Request) {
		// Read to the end: only then does the server see the client go.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}), Timeout: 100 * time.Millisecond})
	if _, err := slow.Answer(context.Background(), []byte(question), &recordedRoutes{}); apierror.CodeOf(err) != apierror.Timeout {
		t.Errorf("a slow endpoint: %v", err)
	}
}

// TestRounds: a model that keeps asking for reads gets MaxRounds rounds of
// them, each read at most MaxToolCalls times, then a request without tools
// (tool_choice none) for its answer; refused reads and tools it does not
// have are answered as errors.
func TestRounds(t *testing.T) {
	var mu sync.Mutex
	var choices []string
	url := endpoint(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ToolChoice string `json:"tool_choice"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		mu.Lock()
		choices = append(choices, req.ToolChoice)
		mu.Unlock()
		if req.ToolChoice == "none" {
			_, _ = io.WriteString(w, completion(map[string]any{"role": "assistant", "content": "done"}))
			return
		}
		_, _ = io.WriteString(w, toolCalls("/a", "/refused", "/b", "/c"))
	})
	a := assistant(t, Config{URL: url, MaxRounds: 2, MaxToolCalls: 3})
	routes := &recordedRoutes{}
	reply, err := a.Answer(context.Background(), []byte(question), routes)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Reply != "done" || reply.Rounds != 3 || fmt.Sprint(choices) != "[auto auto none]" {
		t.Fatalf("reply %+v, tool choices %v", reply, choices)
	}
	if got := fmt.Sprint(routes.reads); got != "[/a /refused /b /a /refused /b]" {
		t.Errorf("reads %s", got)
	}
	if len(reply.ToolCalls) != 8 || reply.ToolCalls[1].Status != 0 || !strings.Contains(reply.ToolCalls[1].Error, "refused") ||
		reply.ToolCalls[3].Error == "" || reply.ToolCalls[3].Status != 0 || reply.ToolCalls[0].Status != http.StatusOK {
		t.Errorf("tool calls %+v", reply.ToolCalls)
	}
}

// TestAnswersAtOnce: past MaxAnswers answers in progress, a question is
// refused at once (429 overloaded) instead of queueing on the endpoint.
func TestAnswersAtOnce(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	url := endpoint(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, completion(map[string]any{"role": "assistant", "content": "ok"}))
	})
	a := assistant(t, Config{URL: url, MaxAnswers: 1})
	done := make(chan error, 1)
	go func() {
		_, err := a.Answer(context.Background(), []byte(question), &recordedRoutes{})
		done <- err
	}()
	<-entered
	if _, err := a.Answer(context.Background(), []byte(question), &recordedRoutes{}); apierror.CodeOf(err) != apierror.Overloaded {
		t.Errorf("a second answer at once: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestKeyFile: the key is read at start, one line; errors name the file,
// never what it holds; the settings refuse what would expose it.
func TestKeyFile(t *testing.T) {
	for name, content := range map[string]string{"empty": "\n", "two lines": testKey + "\n" + testKey, "spaces": "sk " + testKey} {
		_, err := New(Config{URL: "http://127.0.0.1:1/v1", Model: "m", KeyFile: keyFile(t, content)}, zap.NewNop())
		if err == nil || strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(Config{URL: "http://127.0.0.1:1/v1", Model: "m", KeyFile: filepath.Join(t.TempDir(), "none")}, zap.NewNop()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing key file: %v", err)
	}
	if a, err := New(Config{}, zap.NewNop()); a != nil || err != nil {
		t.Errorf("no URL: %v %v", a, err)
	}
	for _, tc := range []struct {
		cfg       Config
		cleartext bool
	}{
		{Config{URL: "http://10.1.2.3/v1", Model: "m", KeyFile: "k"}, true},
		{Config{URL: "http://[::1]:8000/v1", Model: "m", KeyFile: "k"}, false},
		{Config{URL: "https://10.1.2.3/v1", Model: "m", KeyFile: "k"}, false},
		{Config{URL: "http://10.1.2.3/v1", Model: "m"}, false},
	} {
		if err := tc.cfg.Validate(); err != nil || tc.cfg.CleartextKey() != tc.cleartext {
			t.Errorf("%+v: %v, clear text %v", tc.cfg, err, tc.cfg.CleartextKey())
		}
	}
}
