package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/services/validator/internal/access"
	"github.com/contentledger/contentledger/services/validator/internal/chat"
)

// The operator assistant (ADR 0040): POST /v1/chat hands the conversation
// to the assistant (internal/chat), which reads this validator's routes
// through chatRoutes: in-process, through this server's own handler, as
// the ops-read lane, and only the routes chatRefusal lets through.

// Chat is the operator assistant (chat.Assistant); nil when no endpoint
// is configured, and POST /v1/chat answers 503 chat_not_configured.
type Chat interface {
	// Answer answers the conversation in body, reading through routes.
	Answer(ctx context.Context, body []byte, routes chat.Routes) (api.ChatReply, error)
}

// maxChatTarget bounds the path and query the model may ask for.
const maxChatTarget = 2048

// chat serves POST /v1/chat (the operator lane: JSON only, the operator
// rate), within the chat rate of its client.
func (s *Server) chat(c echo.Context) error {
	if s.deps.Chat == nil {
		return apierror.New(apierror.ChatNotConfigured, "no chat endpoint is configured on this validator; GET /chat says how to set one up")
	}
	if s.cfg.ChatLimiter != nil {
		if ok, err := s.cfg.ChatLimiter.Allow(httpserver.KeyOfAddr(c.RealIP())); err != nil || !ok {
			return apierror.New(apierror.RateLimited, "too many chat requests from this address; retry shortly")
		}
	}
	body, err := io.ReadAll(c.Request().Body)
	switch {
	case httpserver.IsTooLarge(err):
		return httpserver.TooLarge(s.bodyLimit(c.Request().Method, c.Path()))
	case err != nil:
		return apierror.New(apierror.InvalidField, "the request body could not be read: %v", err)
	}
	reply, err := s.deps.Chat.Answer(c.Request().Context(), body, chatRoutes{s: s, from: c.Request()})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reply)
}

// chatRefusal is why the model may not read route r, "" when it may: it
// reads what the ops-read lane reads, GETs only, and neither the pages
// (markup, not data), the streams (they never end) nor the downloads
// (larger than any answer it could use).
func chatRefusal(r Route) string {
	switch {
	case r.Method != http.MethodGet:
		return "not a GET route"
	case r.Permission != Public && r.Permission != OpsRead:
		return fmt.Sprintf("a route of the %s lane; the assistant reads as the ops-read lane", r.Permission)
	case r.Layer == api.LayerLocalUI:
		return "a page of the local UI, not data"
	}
	switch r.Path {
	case "/v1/events/stream", "/v1/ops/events/stream":
		return "an event stream, which never ends"
	case "/segments/:name", "/journal.log":
		return "a download larger than any answer"
	}
	return ""
}

// chatRoutes are this server's routes as the model reads them, for the
// /v1/chat request from.
type chatRoutes struct {
	s    *Server
	from *http.Request
}

// Readable lists the routes chatRefusal lets through.
func (cr chatRoutes) Readable() []string {
	var out []string
	for _, r := range cr.s.served {
		if chatRefusal(r) == "" {
			out = append(out, r.Path)
		}
	}
	return out
}

// Get serves a GET of target through this server's handler when its
// route may be read: with the validator's own ops-read token (which the
// model never sees), from the client of the /v1/chat request (its limits
// count the reads), the body cut at limit bytes.
func (cr chatRoutes) Get(ctx context.Context, target string, limit int) (chat.Reading, error) {
	u, err := url.ParseRequestURI(target)
	if len(target) > maxChatTarget || err != nil || u.Scheme != "" || u.Host != "" || u.Fragment != "" ||
		!strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") || path.Clean(u.Path) != u.Path {
		return chat.Reading{}, fmt.Errorf("%w: the path must be a route's, like /v1/consensus/status, with an optional query", chat.ErrRefused)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return chat.Reading{}, fmt.Errorf("%w: %v", chat.ErrRefused, err)
	}
	e := cr.s.handler
	c := e.NewContext(req, nil)
	e.Router().Find(http.MethodGet, echo.GetPath(req), c)
	i := slices.IndexFunc(cr.s.served, func(r Route) bool { return r.Method == http.MethodGet && r.Path == c.Path() })
	if i < 0 {
		return chat.Reading{}, fmt.Errorf("%w: no GET route of this validator has that path", chat.ErrRefused)
	}
	route := cr.s.served[i]
	if why := chatRefusal(route); why != "" {
		return chat.Reading{}, fmt.Errorf("%w: %s is %s", chat.ErrRefused, route.Path, why)
	}
	req.RemoteAddr = cr.from.RemoteAddr
	for _, h := range []string{"X-Forwarded-For", "Forwarded"} { // trusted only from a trusted proxy, as for the request itself
		if v := cr.from.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set(echo.HeaderAccept, echo.MIMEApplicationJSON)
	if token := cr.s.cfg.Access.First(access.OpsRead); token != "" {
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+token)
	}
	w := &cappedRecorder{header: http.Header{}, limit: limit}
	if err := serveCaptured(e, w, req); err != nil {
		return chat.Reading{}, err
	}
	return chat.Reading{Route: route.Path, Status: w.status, ContentType: w.header.Get(echo.HeaderContentType),
		Body: w.body, Truncated: w.truncated}, nil
}

// serveCaptured serves req into w. A handler that fails after its answer
// began drops the connection (handleError panics http.ErrAbortHandler);
// here that is a failed read.
func serveCaptured(h http.Handler, w http.ResponseWriter, req *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			err = fmt.Errorf("the route's answer was cut short")
		}
	}()
	h.ServeHTTP(w, req)
	return nil
}

// cappedRecorder keeps the status, the headers and the first limit bytes
// of an answer, and drops the rest.
type cappedRecorder struct {
	header    http.Header
	status    int
	body      []byte
	limit     int
	truncated bool
}

func (w *cappedRecorder) Header() http.Header { return w.header }

// Flush does nothing: the answer is kept, not sent.
func (w *cappedRecorder) Flush() {}

func (w *cappedRecorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *cappedRecorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	room := w.limit - len(w.body)
	if len(p) > room {
		w.truncated = true
		w.body = append(w.body, p[:max(room, 0)]...)
		return len(p), nil
	}
	w.body = append(w.body, p...)
	return len(p), nil
}
