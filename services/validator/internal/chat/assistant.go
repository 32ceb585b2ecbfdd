// Package chat is the operator assistant of POST /v1/chat (ADR 0040): an
// operator's question goes to a configured OpenAI-compatible
// chat-completions endpoint with one read-only tool, get_route, which the
// validator answers in-process from its own ops-read routes. The model
// never gets a token and never reaches a route that changes anything: the
// routes it may read are decided by the route table's owner (internal/api,
// through Routes), and every read is bounded. See DESIGN.md.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// Routes are this validator's own routes as the model may read them; the
// route table's owner (internal/api) implements them.
type Routes interface {
	// Readable lists the route paths the model may read, for its
	// instructions.
	Readable() []string
	// Get answers a GET of target (a path with an optional query)
	// in-process, with at most limit bytes of its body, when its route is
	// one the model may read. Otherwise it returns an error wrapping
	// ErrRefused, saying why, and calls nothing.
	Get(ctx context.Context, target string, limit int) (Reading, error)
}

// Reading is a route's answer to a read.
type Reading struct {
	// Route is the route table's path that answered.
	Route       string
	Status      int
	ContentType string
	Body        []byte
	// Truncated: the body went on past the limit.
	Truncated bool
}

// ErrRefused is the error of a read the model may not make.
var ErrRefused = errors.New("refused")

// toolName is the assistant's one tool.
const toolName = "get_route"

// toolParameters is get_route's JSON schema.
var toolParameters = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string",` +
	`"description":"the route's path with its parameters filled in, and an optional query, e.g. /v1/consensus/status"}},` +
	`"required":["path"],"additionalProperties":false}`)

// instructions are the model's system message.
const instructions = "You are the operator assistant of a Content Ledger validator: a node of a raft cluster that " +
	"replicates signed content proposals paid on chain. Answer the operator's questions about this cluster from " +
	"what the validator's own routes say now: call " + toolName + " with a route's path (GET only) to read one, " +
	"and say which routes your answer rests on. You can only read; you cannot change anything. " +
	"If the routes do not tell, say so. Routes you may read (:name is a parameter): "

// Assistant answers operators' questions through the endpoint.
type Assistant struct {
	cfg         Config
	key         string // never logged, never in an error, never in the model's messages
	completions string // the endpoint's chat-completions URL
	client      *http.Client
	log         *zap.Logger
	answers     chan struct{} // a slot per answer in progress (MaxAnswers)
}

// New returns the assistant of cfg, reading its key file; nil, nil when
// cfg configures none.
func New(cfg Config, log *zap.Logger) (*Assistant, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	key, err := readKey(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	base, _ := parseBase(cfg.URL) // Validate parsed it
	completions := strings.TrimRight(base.String(), "/") + "/chat/completions"
	return &Assistant{cfg: cfg, key: key, completions: completions, log: log,
		// Redirects are not followed: the key would go along to wherever
		// the endpoint points.
		client:  &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		answers: make(chan struct{}, cfg.MaxAnswers)}, nil
}

// Model is the model the endpoint is asked for.
func (a *Assistant) Model() string { return a.cfg.Model }

// Answer answers the conversation in body (POST /v1/chat's), reading
// through routes what the model asks for, within the configured rounds,
// time and sizes.
func (a *Assistant) Answer(ctx context.Context, body []byte, routes Routes) (api.ChatReply, error) {
	req, err := ParseRequest(body, a.cfg.MaxConversationBytes, a.cfg.MaxMessages)
	if err != nil {
		return api.ChatReply{}, err
	}
	select {
	case a.answers <- struct{}{}:
		defer func() { <-a.answers }()
	default:
		return api.ChatReply{}, apierror.New(apierror.Overloaded, "%d chat answers are in progress on this validator; retry shortly", a.cfg.MaxAnswers)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	reply, err := a.converse(ctx, req, routes)
	switch {
	case err == nil:
		return reply, nil
	case errors.Is(err, context.DeadlineExceeded):
		err = apierror.New(apierror.Timeout, "no answer within %s", a.cfg.Timeout)
	case errors.Is(err, context.Canceled): // the client went away
		return api.ChatReply{}, apierror.New(apierror.Timeout, "the question was withdrawn")
	}
	a.log.Info("chat answer failed", zap.Int("rounds", reply.Rounds), zap.Error(err))
	return api.ChatReply{}, err
}

// converse runs the rounds: each completion either answers or asks for
// reads, which are made and handed back; the last round offers no tools.
func (a *Assistant) converse(ctx context.Context, req api.ChatRequest, routes Routes) (api.ChatReply, error) {
	reply := api.ChatReply{Model: a.cfg.Model, ToolCalls: []api.ChatToolCall{}}
	system := instructions + strings.Join(routes.Readable(), " ")
	messages := []message{{Role: "system", Content: &system}}
	for _, m := range req.Messages {
		messages = append(messages, message{Role: m.Role, Content: &m.Content})
	}
	tools := []tool{{Type: "function", Function: toolFunction{Name: toolName, Parameters: toolParameters,
		Description: "GET one of this validator's read-only routes and return its status and body (JSON, truncated at " +
			strconv.Itoa(a.cfg.MaxToolResultBytes) + " bytes)"}}}
	for round := 0; ; round++ {
		creq := completionRequest{Model: a.cfg.Model, Messages: messages, Tools: tools, ToolChoice: "auto"}
		if round == a.cfg.MaxRounds {
			creq.ToolChoice = "none" // the reads are spent: answer with what was read
		}
		reply.Rounds++
		m, err := a.complete(ctx, creq)
		if err != nil {
			return reply, err
		}
		if len(m.ToolCalls) == 0 || round == a.cfg.MaxRounds {
			if m.Content == nil || strings.TrimSpace(*m.Content) == "" {
				return reply, errEndpoint("gave no answer within %d rounds", a.cfg.MaxRounds+1)
			}
			reply.Reply = *m.Content
			return reply, nil
		}
		messages = append(messages, m)
		for i, call := range m.ToolCalls {
			record, result := a.read(ctx, call, i, routes)
			reply.ToolCalls = append(reply.ToolCalls, record)
			messages = append(messages, message{Role: "tool", ToolCallID: call.ID, Content: &result})
		}
	}
}

// toolResult is what the model gets for one read.
type toolResult struct {
	Route       string `json:"route,omitempty"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	Body        string `json:"body,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	Error       string `json:"error,omitempty"`
}

// read makes the i-th read of a round, returning its record for the reply
// and the tool message's content for the model. A refused read calls
// nothing.
func (a *Assistant) read(ctx context.Context, call toolCall, i int, routes Routes) (api.ChatToolCall, string) {
	var args struct {
		Path string `json:"path"`
	}
	var (
		record api.ChatToolCall
		result toolResult
	)
	switch {
	case call.Function.Name != toolName:
		result.Error = "no such tool: the only tool is " + toolName
	case json.Unmarshal([]byte(call.Function.Arguments), &args) != nil || args.Path == "":
		result.Error = `the arguments must be {"path": "/v1/..."}`
	case i >= a.cfg.MaxToolCalls:
		result.Error = "at most " + strconv.Itoa(a.cfg.MaxToolCalls) + " reads per round"
	}
	record.Path = truncate(args.Path, 512)
	if result.Error == "" {
		r, err := routes.Get(ctx, args.Path, a.cfg.MaxToolResultBytes)
		if err != nil {
			result.Error = err.Error()
		} else {
			result = toolResult{Route: r.Route, Status: r.Status, ContentType: r.ContentType, Body: string(r.Body), Truncated: r.Truncated}
		}
	}
	record.Route, record.Status, record.Truncated, record.Error = result.Route, result.Status, result.Truncated, result.Error
	b, _ := json.Marshal(result) // strings and ints only
	return record, string(b)
}
