package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// The operator assistant (ADR 0040) against a scripted OpenAI-compatible
// endpoint over real TCP, through a validator started in-process.

// completionRequest is the part of an OpenAI chat-completions request the
// scripted endpoint reads.
type completionRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice string `json:"tool_choice"`
}

// toolResult is the content of a tool message as the assistant sends it.
type toolResult struct {
	Route  string `json:"route"`
	Status int    `json:"status"`
	Body   string `json:"body"`
	Error  string `json:"error"`
}

// toolResults are the tool messages of req by tool call id.
func (req completionRequest) toolResults(t *testing.T) map[string]toolResult {
	out := map[string]toolResult{}
	for _, m := range req.Messages {
		if m.Role != "tool" {
			continue
		}
		var r toolResult
		if m.Content == nil || json.Unmarshal([]byte(*m.Content), &r) != nil {
			t.Errorf("tool message %s is not a tool result", m.ToolCallID)
		}
		out[m.ToolCallID] = r
	}
	return out
}

// scriptedModel is an OpenAI-compatible endpoint answering each request
// with its script's next step, and keeping everything it received.
type scriptedModel struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []func(completionRequest) any // answers, in order
	bodies []string                      // every request body received
	auth   []string                      // every Authorization header received
}

func newScriptedModel(t *testing.T, script ...func(completionRequest) any) *scriptedModel {
	m := &scriptedModel{t: t, script: script}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.bodies = append(m.bodies, string(body))
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	var step func(completionRequest) any
	if len(m.script) > 0 {
		step, m.script = m.script[0], m.script[1:]
	}
	m.mu.Unlock()
	var req completionRequest
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		m.t.Errorf("the endpoint got %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	case json.Unmarshal(body, &req) != nil:
		m.t.Errorf("the endpoint got a body that is not JSON: %s", body)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	case step == nil:
		m.t.Errorf("the endpoint was asked more often than scripted")
		http.Error(w, "unscripted", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(step(req))
}

// received is everything the endpoint was sent, bodies and headers.
func (m *scriptedModel) received() (bodies, auth []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...), append([]string(nil), m.auth...)
}

// askTools is a completion asking for get_route of each path.
func askTools(paths ...string) any {
	calls := make([]any, len(paths))
	for i, p := range paths {
		args, _ := json.Marshal(map[string]string{"path": p})
		calls[i] = map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
			"function": map[string]any{"name": "get_route", "arguments": string(args)}}
	}
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "choices": []any{map[string]any{"index": 0,
		"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}, "finish_reason": "tool_calls"}}}
}

// answer is a completion answering text.
func answer(text string) any {
	return map[string]any{"id": "chatcmpl-2", "object": "chat.completion", "choices": []any{map[string]any{"index": 0,
		"message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}}}
}

// askChat posts a question to /v1/chat with token and decodes the answer
// into out (a ChatReply or an error body).
func askChat(t *testing.T, base, token, question string, out any) int {
	t.Helper()
	body, _ := json.Marshal(api.ChatRequest{Messages: []api.ChatMessage{{Role: api.ChatRoleUser, Content: question}}})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return roundTrip(t, req, out)
}

// chatKeyFile writes key to a file of the test's.
func chatKeyFile(t *testing.T, key string) string {
	path := filepath.Join(t.TempDir(), "chat.key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The secrets of the chat tests: the validator's lane token and the
// endpoint's key.
const (
	chatLaneToken = "lane-token-5f1c0e9a77"
	chatKey       = "sk-chat-key-0d9b3e4411"
)

// TestChatAnswersWithToolCalls: the model asks for /v1/consensus/status
// and /v1/config/osgi, gets the validator's real answers (the status the
// test reads itself), and answers; the reply names the reads. The model
// never receives the lane token or the key, which goes to the endpoint as
// its bearer token only. A second question at once is past the rate.
func TestChatAnswersWithToolCalls(t *testing.T) {
	var base string
	var status api.ConsensusStatus
	model := newScriptedModel(t,
		func(req completionRequest) any {
			if req.Model != "test-model" || len(req.Tools) != 1 || req.Tools[0].Function.Name != "get_route" ||
				req.Messages[0].Role != "system" || req.ToolChoice != "auto" {
				t.Errorf("first request: %+v", req)
			}
			return askTools("/v1/consensus/status", "/v1/config/osgi")
		},
		func(req completionRequest) any {
			results := req.toolResults(t)
			got := results["call_0"]
			var seen api.ConsensusStatus
			if got.Route != "/v1/consensus/status" || got.Status != http.StatusOK || json.Unmarshal([]byte(got.Body), &seen) != nil {
				t.Errorf("the status read: %+v", got)
			}
			if seen.ContractVersion != api.ConsensusStatusVersion || seen.ClusterID != status.ClusterID || seen.NodeID != status.NodeID ||
				seen.Leader != status.Leader || seen.Role != status.Role || seen.Name != status.Name {
				t.Errorf("the model saw %+v, the validator answers %+v", seen, status)
			}
			if cfg := results["call_1"]; cfg.Status != http.StatusOK || !strings.Contains(cfg.Body, "CHAT_KEY_FILE") {
				t.Errorf("the configuration read: %+v", cfg)
			}
			return answer("validator-1 leads the cluster.")
		})
	base = startMockWith(t, func(c *Config) {
		c.AuthToken = chatLaneToken
		c.ChatURL, c.ChatModel, c.ChatKeyFile = model.srv.URL+"/v1", "test-model", chatKeyFile(t, chatKey)
		c.ChatRate = 0.01                    // one question, then none for a while
		c.ChatMaxToolResultBytes = 512 << 10 // the whole configuration view
	})
	if code := getJSONWith(t, base+"/v1/consensus/status", chatLaneToken, &status); code != http.StatusOK {
		t.Fatalf("consensus status: %d", code)
	}

	var reply api.ChatReply
	if code := askChat(t, base, chatLaneToken, "Who leads?", &reply); code != http.StatusOK {
		t.Fatalf("POST /v1/chat: %d %+v", code, reply)
	}
	want := []api.ChatToolCall{{Path: "/v1/consensus/status", Route: "/v1/consensus/status", Status: http.StatusOK},
		{Path: "/v1/config/osgi", Route: "/v1/config/osgi", Status: http.StatusOK}}
	if reply.Reply != "validator-1 leads the cluster." || reply.Model != "test-model" || reply.Rounds != 2 ||
		fmt.Sprint(reply.ToolCalls) != fmt.Sprint(want) {
		t.Fatalf("reply %+v, want the tool calls %+v", reply, want)
	}

	bodies, auth := model.received()
	if len(bodies) != 2 {
		t.Fatalf("the endpoint got %d requests, want 2", len(bodies))
	}
	for i, body := range bodies {
		if strings.Contains(body, chatLaneToken) || strings.Contains(body, chatKey) {
			t.Errorf("request %d to the model carries a secret:\n%s", i, body)
		}
		if auth[i] != "Bearer "+chatKey {
			t.Errorf("request %d to the endpoint: Authorization %q", i, auth[i])
		}
	}
	var values map[string]any
	if getJSONWith(t, base+"/v1/config/osgi", chatLaneToken, &values) != http.StatusOK || strings.Contains(fmt.Sprint(values), chatKey) {
		t.Errorf("the configuration view: %v", values)
	}

	var limited apierror.Body
	if code := askChat(t, base, chatLaneToken, "And now?", &limited); code != http.StatusTooManyRequests ||
		limited.Error == nil || limited.Error.Code != apierror.RateLimited {
		t.Fatalf("a second question at once: %d %+v", code, limited.Error)
	}
}

// TestChatRefusesRoutes: reads of what the model may not read (a route
// that changes state, an operator's, the submit and mock lanes', an event
// stream, an archive download, a page, an unknown route, another host,
// a path that climbs) are answered to the model as tool errors and never
// served: the request metrics count none of them.
func TestChatRefusesRoutes(t *testing.T) {
	refused := []string{"/v1/gc/trigger", "/v1/cluster/members/2/promote", "/v1/chat", "/v1/wallets/stats?wallet=0x0",
		"/api/mock/epoch-status", "/v1/events/stream", "/v1/ops/events/stream?types=write", "/segments/x.tar", "/journal.log",
		"/dashboard", "/no/such/route", "http://127.0.0.1:1/v1/consensus/status", "//evil.example/v1/peers",
		"/v1/consensus/../chat", ""}
	model := newScriptedModel(t,
		func(completionRequest) any { return askTools(refused...) },
		func(req completionRequest) any {
			results := req.toolResults(t)
			for i, path := range refused {
				if r := results[fmt.Sprintf("call_%d", i)]; r.Error == "" || r.Status != 0 || r.Body != "" {
					t.Errorf("%q: the model got %+v", path, r)
				}
			}
			return answer("I may not read those.")
		})
	base := startMockWith(t, func(c *Config) {
		c.AuthToken = chatLaneToken
		c.ChatURL, c.ChatModel = model.srv.URL+"/v1", "test-model"
	})
	var reply api.ChatReply
	if code := askChat(t, base, chatLaneToken, "Trigger a GC and stream the events.", &reply); code != http.StatusOK {
		t.Fatalf("POST /v1/chat: %d %+v", code, reply)
	}
	if reply.Reply != "I may not read those." || len(reply.ToolCalls) != len(refused) {
		t.Fatalf("reply %+v", reply)
	}
	for i, call := range reply.ToolCalls {
		if call.Status != 0 || call.Error == "" || call.Path != refused[i] {
			t.Errorf("tool call %d: %+v", i, call)
		}
	}
	resp, err := http.DefaultClient.Do(authorized(t, base+"/metrics", chatLaneToken))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The HTTP series only: the event stream gauges name their routes
	// whether or not a stream was opened.
	var served strings.Builder
	for line := range strings.Lines(string(metrics)) {
		if strings.HasPrefix(line, "validator_http_") {
			served.WriteString(line)
		}
	}
	for _, route := range []string{"/v1/gc/trigger", "/v1/cluster/members/:id/promote", "/v1/wallets/stats", "/api/mock/epoch-status",
		"/v1/events/stream", "/v1/ops/events/stream", "/segments/:name", "/journal.log", "/dashboard", "unmatched"} {
		if strings.Contains(served.String(), `route="`+route+`"`) {
			t.Errorf("%s was served", route)
		}
	}
	if !strings.Contains(string(metrics), `route="/v1/chat"`) {
		t.Errorf("the metrics do not count /v1/chat:\n%s", metrics)
	}
	bodies, _ := model.received()
	for i, body := range bodies {
		if strings.Contains(body, chatLaneToken) {
			t.Errorf("request %d to the model carries a lane token", i)
		}
	}
}

// authorized is a GET of u with token.
func authorized(t *testing.T, u, token string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// TestChatNotConfigured: without an endpoint POST /v1/chat answers 503
// chat_not_configured and /chat says how to set one up; with one, /chat
// is the chat box naming the model.
func TestChatNotConfigured(t *testing.T) {
	base := startMock(t)
	var e apierror.Body
	if code := askChat(t, base, "", "Who leads?", &e); code != http.StatusServiceUnavailable || e.Error == nil ||
		e.Error.Code != apierror.ChatNotConfigured {
		t.Fatalf("POST /v1/chat without an endpoint: %d %+v", code, e.Error)
	}
	page := getPage(t, base+"/chat")
	if !strings.Contains(page, `id="setup"`) || !strings.Contains(page, "SVC_VALIDATOR_CHAT_URL") ||
		!strings.Contains(page, "SVC_VALIDATOR_CHAT_MODEL") || strings.Contains(page, `id="ask"`) {
		t.Fatalf("/chat without an endpoint:\n%s", page)
	}

	model := newScriptedModel(t)
	configured := startMockWith(t, func(c *Config) { c.ChatURL, c.ChatModel = model.srv.URL+"/v1", "test-model" })
	page = getPage(t, configured+"/chat")
	if !strings.Contains(page, `id="ask"`) || !strings.Contains(page, ">test-model<") || strings.Contains(page, `id="setup"`) {
		t.Fatalf("/chat with an endpoint:\n%s", page)
	}
}

// getPage is the HTML of a page of the local UI.
func getPage(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	return string(body)
}

// TestChatConfig: the assistant's settings are checked at start. Outside
// MOCK a key is never sent in clear text to another host; credentials
// never go in the URL; no error quotes the key.
func TestChatConfig(t *testing.T) {
	key := chatKeyFile(t, chatKey)
	for _, tc := range []struct {
		mode          Mode
		url, keyFile  string
		model         string
		wantErr       string
		timeoutTooBig bool
	}{
		{Testnet, "http://10.0.0.7:8000/v1", key, "m", "clear text", false},
		{Mainnet, "http://llm.example/v1", key, "m", "clear text", false},
		{Testnet, "https://llm.example/v1", key, "m", "", false},
		{Testnet, "http://127.0.0.1:11434/v1", key, "m", "", false},
		{Testnet, "http://localhost:11434/v1", key, "m", "", false},
		{Testnet, "http://10.0.0.7:8000/v1", "", "m", "", false}, // no key to leak
		{Mock, "http://10.0.0.7:8000/v1", key, "m", "", false},
		{Mock, "http://user:" + chatKey + "@llm.example/v1", "", "m", "credentials", false},
		{Mock, "ftp://llm.example/v1", "", "m", "http or https", false},
		{Mock, "http://127.0.0.1:11434/v1", "", "", "model is required", false},
		{Mock, "", key, "", "without a chat URL", false},
		{Mock, "http://127.0.0.1:11434/v1", "", "m", "CHAT_TIMEOUT", true},
	} {
		cfg := mockConfig(t.TempDir())
		cfg.Mode, cfg.ChatURL, cfg.ChatKeyFile, cfg.ChatModel = tc.mode, tc.url, tc.keyFile, tc.model
		if tc.timeoutTooBig {
			cfg.ChatTimeout = cfg.HTTPServer().WithDefaults().WriteTimeout
		}
		err := cfg.validateChat()
		switch {
		case tc.wantErr == "" && err != nil, tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s %q key %v: %v, want %q", tc.mode, tc.url, tc.keyFile != "", err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), chatKey):
			t.Errorf("%s %q: the error quotes the key: %v", tc.mode, tc.url, err)
		}
	}
}
