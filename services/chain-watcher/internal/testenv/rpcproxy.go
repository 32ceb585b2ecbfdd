package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// RPCProxy is an HTTP JSON-RPC proxy in front of a chain's endpoint that
// lets a test change what the chain answers: refuse a call with an HTTP
// status or a JSON-RPC error, hold it until the client gives up, or
// rewrite its result. It handles single requests (what go-ethereum's
// client sends for one call); batches pass through untouched.
type RPCProxy struct {
	// URL is the proxy's endpoint.
	URL string

	target string
	srv    *httptest.Server
	quit   chan struct{}

	mu     sync.Mutex
	fault  func(Call) Fault
	counts map[string]int
}

// Call is one JSON-RPC request seen by the proxy.
type Call struct {
	Method string
	Params json.RawMessage
	// N numbers this method's calls on this proxy, from 1.
	N int
}

// LogRange returns the block range of an eth_getLogs call with numeric
// bounds.
func (c Call) LogRange() (from, to uint64, ok bool) {
	var params []struct {
		From string `json:"fromBlock"`
		To   string `json:"toBlock"`
	}
	if c.Method != "eth_getLogs" || json.Unmarshal(c.Params, &params) != nil || len(params) != 1 {
		return 0, 0, false
	}
	from, errFrom := hexutil.DecodeUint64(params[0].From)
	to, errTo := hexutil.DecodeUint64(params[0].To)
	return from, to, errFrom == nil && errTo == nil && from <= to
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Fault is what the proxy does with a call instead of forwarding it
// plainly. The zero Fault forwards.
type Fault struct {
	// Status answers this HTTP status with a short body.
	Status int
	// Error answers this JSON-RPC error.
	Error *RPCError
	// Hang holds the call until the client gives up (its timeout) or the
	// proxy closes.
	Hang bool
	// Rewrite forwards the call and replaces its result (not an error)
	// by what Rewrite returns. It runs outside the proxy's lock, on the
	// goroutine of the request.
	Rewrite func(result json.RawMessage) json.RawMessage
}

// NewRPCProxy starts a proxy to target, closed when the test ends.
func NewRPCProxy(t testing.TB, target string) *RPCProxy {
	t.Helper()
	p := &RPCProxy{target: target, quit: make(chan struct{}), counts: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(func() {
		close(p.quit) // releases held calls first: Close waits for them
		p.srv.Close()
	})
	return p
}

// SetFault sets the function that decides each call's fault; nil forwards
// everything. It is called from the proxy's handlers, one call at a time.
func (p *RPCProxy) SetFault(f func(Call) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// Count returns how many calls of method the proxy has seen.
func (p *RPCProxy) Count(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[method]
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

func (p *RPCProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req request
	var f Fault
	if json.Unmarshal(body, &req) == nil && req.Method != "" {
		p.mu.Lock()
		p.counts[req.Method]++
		call := Call{Method: req.Method, Params: req.Params, N: p.counts[req.Method]}
		if p.fault != nil {
			f = p.fault(call)
		}
		p.mu.Unlock()
	}
	switch {
	case f.Status != 0:
		http.Error(w, "injected "+strconv.Itoa(f.Status), f.Status)
		return
	case f.Hang:
		select {
		case <-r.Context().Done():
		case <-p.quit:
		}
		return
	case f.Error != nil:
		e, _ := json.Marshal(f.Error)
		writeJSON(w, http.StatusOK, response{JSONRPC: "2.0", ID: req.ID, Error: e})
		return
	}

	up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if f.Rewrite != nil {
		var out response
		if json.Unmarshal(answer, &out) == nil && out.Error == nil && out.Result != nil {
			out.Result = f.Rewrite(out.Result)
			writeJSON(w, resp.StatusCode, out)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
