package chat

import (
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/apierror"
)

// FuzzParseCompletion: any answer of the endpoint is either an assistant
// message with content or bounded tool calls, or a chat_endpoint_failed
// error that quotes nothing of the answer beyond a short role; never a
// panic.
func FuzzParseCompletion(f *testing.F) {
	f.Add([]byte(`{"choices":[{"message":{"role":"assistant","content":"validator-1 leads"},"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c0","type":"function",` +
		`"function":{"name":"get_route","arguments":"{\"path\":\"/v1/consensus/status\"}"}}]}}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`{"error":{"message":"bad key sk-123"}}`))
	f.Add([]byte(`{"choices":[{"message":{"role":"tool","content":"x"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseCompletion(body)
		if err != nil {
			e := apierror.As(err)
			if e == nil || e.Code != apierror.ChatEndpointFailed || len(e.Message) > 200 {
				t.Fatalf("error %v", err)
			}
			return
		}
		if m.Role != "assistant" || len(m.ToolCalls) > maxToolCalls {
			t.Fatalf("accepted %+v", m)
		}
		if len(m.ToolCalls) == 0 && (m.Content == nil || strings.TrimSpace(*m.Content) == "") {
			t.Fatalf("accepted an empty message from %q", body)
		}
		for _, c := range m.ToolCalls {
			if c.ID == "" || len(c.ID) > maxToolCallID || len(c.Function.Name) > maxToolName {
				t.Fatalf("accepted the tool call %+v", c)
			}
		}
	})
}
