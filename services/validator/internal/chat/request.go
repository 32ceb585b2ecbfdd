package chat

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// ParseRequest parses the body of POST /v1/chat: one JSON object
// {"messages": [{"role", "content"}, ...]}, no unknown field, at most
// maxBytes, at most maxMessages messages of role user or assistant with
// non-empty UTF-8 content, the last the user's question. Errors are
// invalid_field naming the field, or content_too_large.
func ParseRequest(body []byte, maxBytes, maxMessages int) (api.ChatRequest, error) {
	if len(body) > maxBytes {
		return api.ChatRequest{}, apierror.New(apierror.ContentTooLarge, "the conversation exceeds %d bytes", maxBytes).
			WithDetail("limit", maxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req api.ChatRequest
	if err := dec.Decode(&req); err != nil {
		return api.ChatRequest{}, apierror.New(apierror.InvalidField, "body must be JSON {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}")
	}
	if _, err := dec.Token(); err != io.EOF {
		return api.ChatRequest{}, apierror.New(apierror.InvalidField, "body must be one JSON object")
	}
	switch n := len(req.Messages); {
	case n == 0:
		return api.ChatRequest{}, apierror.Field("messages", "at least one message is required: the question")
	case n > maxMessages:
		return api.ChatRequest{}, apierror.Field("messages", "at most %d messages; start a new conversation", maxMessages)
	}
	for i, m := range req.Messages {
		switch {
		case m.Role != api.ChatRoleUser && m.Role != api.ChatRoleAssistant:
			return api.ChatRequest{}, apierror.Field("messages.role", "message %d: role must be %q or %q", i, api.ChatRoleUser, api.ChatRoleAssistant)
		case strings.TrimSpace(m.Content) == "":
			return api.ChatRequest{}, apierror.Field("messages.content", "message %d is empty", i)
		case !utf8.ValidString(m.Content):
			return api.ChatRequest{}, apierror.Field("messages.content", "message %d is not UTF-8", i)
		}
	}
	if req.Messages[len(req.Messages)-1].Role != api.ChatRoleUser {
		return api.ChatRequest{}, apierror.Field("messages", "the last message must be the user's question")
	}
	return req, nil
}
