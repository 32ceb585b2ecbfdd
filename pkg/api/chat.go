package api

// The operator assistant's route, POST /v1/chat (ADR 0040).

// Roles of a ChatMessage a client may send: its own questions and the
// assistant's earlier replies. The instructions and the tool results are
// the validator's, never a client's.
const (
	ChatRoleUser      = "user"
	ChatRoleAssistant = "assistant"
)

// ChatRequest is the body of POST /v1/chat: the conversation so far, the
// last message the operator's question.
type ChatRequest struct {
	Messages []ChatMessage `json:"messages"`
}

// ChatMessage is one message of a conversation.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatReply is the answer of POST /v1/chat: the model's reply and the
// reads it made of this validator's routes to give it.
type ChatReply struct {
	Model     string         `json:"model"`
	Reply     string         `json:"reply"`
	ToolCalls []ChatToolCall `json:"toolCalls"`
	// Rounds is how many completions the model was asked for.
	Rounds int `json:"rounds"`
}

// ChatToolCall is one read the model asked for. Status is 0 when the read
// was refused (Error says why) and nothing was called.
type ChatToolCall struct {
	// Path is what the model asked for: a path with an optional query.
	Path string `json:"path"`
	// Route is the route table's path that answered it; "" when none may.
	Route     string `json:"route,omitempty"`
	Status    int    `json:"status"`
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
}
