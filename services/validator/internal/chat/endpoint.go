package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/contentledger/contentledger/pkg/apierror"
)

// The OpenAI chat-completions wire format, as far as the assistant uses
// it (POST {base}/chat/completions, non-streaming, with function tools).

type completionRequest struct {
	Model      string    `json:"model"`
	Messages   []message `json:"messages"`
	Tools      []tool    `json:"tools,omitempty"`
	ToolChoice string    `json:"tool_choice,omitempty"`
	Stream     bool      `json:"stream"`
}

// message is a message of the model's conversation. Content is a pointer
// because an assistant message that asks for tools may carry none (null).
type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type toolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function toolCallFunction `json:"function"`
}

type toolCallFunction struct {
	Name string `json:"name"`
	// Arguments is a JSON object encoded as a string, as OpenAI sends it.
	Arguments string `json:"arguments"`
}

type completionResponse struct {
	Choices []struct {
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
}

// Bounds of what a completion may carry, besides its size.
const (
	maxToolCallID = 256
	maxToolName   = 64
	// maxToolCalls bounds the calls of one completion: each is answered,
	// if only with an error, in the next request.
	maxToolCalls = 64
)

// errEndpoint is the error of an endpoint that cannot be used; its message
// never carries what the endpoint said.
func errEndpoint(format string, args ...any) *apierror.Error {
	return apierror.New(apierror.ChatEndpointFailed, "the chat endpoint "+format, args...)
}

// parseCompletion parses one answer of the endpoint: its first choice's
// message, an assistant message with content or tool calls.
func parseCompletion(body []byte) (message, error) {
	var resp completionResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return message{}, errEndpoint("answered something that is not a chat completion")
	}
	if len(resp.Choices) == 0 {
		return message{}, errEndpoint("answered a completion without choices")
	}
	m := resp.Choices[0].Message
	if m.Role != "" && m.Role != "assistant" {
		return message{}, errEndpoint("answered a message of role %q", truncate(m.Role, 32))
	}
	m.Role = "assistant"
	if len(m.ToolCalls) > maxToolCalls {
		return message{}, errEndpoint("asked for more than %d tool calls at once", maxToolCalls)
	}
	for _, c := range m.ToolCalls {
		if c.ID == "" || len(c.ID) > maxToolCallID || len(c.Function.Name) > maxToolName {
			return message{}, errEndpoint("answered a tool call without an id, or with one too long")
		}
	}
	if len(m.ToolCalls) == 0 && (m.Content == nil || strings.TrimSpace(*m.Content) == "") {
		return message{}, errEndpoint("answered neither content nor tool calls")
	}
	return m, nil
}

// complete asks the endpoint for one completion.
func (a *Assistant) complete(ctx context.Context, req completionRequest) (message, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return message{}, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.completions, bytes.NewReader(body))
	if err != nil {
		return message{}, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "application/json")
	if a.key != "" {
		httpReq.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := a.client.Do(httpReq)
	if err != nil {
		if ctx.Err() != nil {
			return message{}, ctx.Err()
		}
		// The error names the URL, which holds no credentials (parseBase).
		var netErr interface{ Timeout() bool }
		if errors.As(err, &netErr) && netErr.Timeout() {
			return message{}, context.DeadlineExceeded
		}
		return message{}, errEndpoint("could not be reached")
	}
	defer resp.Body.Close()
	// One byte more than the limit tells a too-long answer from one of
	// exactly the limit.
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(a.cfg.MaxResponseBytes)+1))
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return message{}, ctx.Err()
		}
		return message{}, errEndpoint("answer was cut short")
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return message{}, errEndpoint("answered %d", resp.StatusCode).WithDetail("status", resp.StatusCode)
	case len(data) > a.cfg.MaxResponseBytes:
		return message{}, errEndpoint("answered more than %d bytes", a.cfg.MaxResponseBytes)
	}
	return parseCompletion(data)
}

// truncate returns s cut to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
