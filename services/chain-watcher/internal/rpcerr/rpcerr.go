// Package rpcerr tells apart the errors an Ethereum JSON-RPC provider
// answers, by what the caller should do about them: shrink an eth_getLogs
// range, try another endpoint, or take the answer.
//
// Providers word the same condition differently and change the wording
// without notice, so the recognition is deliberately broad; the cost of a
// false positive is one halved range.
package rpcerr

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/ethereum/go-ethereum/rpc"
)

// ErrTimeout marks a call that did not answer within its own deadline while
// the caller's context was still live.
var ErrTimeout = errors.New("rpc call timed out")

// JSON-RPC error codes that matter here.
const (
	// CodeLimitExceeded (EIP-1474) is answered for a query over the
	// provider's result or range limit, and by some providers for rate
	// limits.
	CodeLimitExceeded = -32005
	// CodeInvalidParams is answered by several providers, with range
	// wording, for a block range over their cap.
	CodeInvalidParams  = -32602
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
)

// rangeWording is lower-case text that providers put in an answer to an
// eth_getLogs query that is too large (too many blocks, results or bytes).
var rangeWording = []string{
	"query returned more than",     // geth-style nodes, Infura: "query returned more than 10000 results"
	"block range",                  // "block range is too large", "exceed maximum block range: 5000", "block range limit exceeded"
	"blocks range",                 // "limited to a 10,000 blocks range"
	"range too large",              // "range too large, max 2000"
	"range is too large",           //
	"range is too wide",            //
	"range exceeds",                //
	"response size exceeded",       // "Log response size exceeded."
	"response size is larger",      //
	"response is too big",          //
	"response too large",           //
	"too many results",             //
	"too many logs",                //
	"result set too large",         //
	"limit the query to at most",   // "try with this block range [0x1, 0x2]" variants
	"logs matched by query exceed", //
}

// rateWording marks a limit-exceeded answer that is about request rate,
// not the size of the query: shrinking the range would make it worse.
var rateWording = []string{"rate limit", "rate-limit", "too many requests", "request count", "requests per", "capacity"}

// IsRangeError reports whether err, answered to an eth_getLogs query, says
// the query was too large for the provider: a result, range or size limit,
// HTTP 413, or a timeout (a big query that does not finish in time is as
// good as refused). The caller retries with a smaller range.
func IsRangeError(err error) bool {
	if err == nil {
		return false
	}
	if IsTimeout(err) {
		return true
	}
	var he rpc.HTTPError
	if errors.As(err, &he) && he.StatusCode == http.StatusRequestEntityTooLarge {
		return true
	}
	msg := strings.ToLower(err.Error())
	if containsAny(msg, rateWording) {
		return false
	}
	var re rpc.Error
	if errors.As(err, &re) && re.ErrorCode() == CodeLimitExceeded {
		return true
	}
	return containsAny(msg, rangeWording)
}

// IsTimeout reports whether err is a call that ran out of time without the
// caller giving up: ErrTimeout, a network timeout, HTTP 408 or 504, or a
// provider's own query timeout.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrTimeout) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.Canceled) {
		return true
	}
	var he rpc.HTTPError
	if errors.As(err, &he) && (he.StatusCode == http.StatusRequestTimeout || he.StatusCode == http.StatusGatewayTimeout) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "timeout") || strings.Contains(msg, "timed out")
}

// IsRejected reports whether err is a JSON-RPC error object saying the
// request itself is wrong for this endpoint (invalid request, unknown
// method, invalid parameters): the endpoint is up and answered, and asking
// it again will not help, though another provider may answer.
func IsRejected(err error) bool {
	var re rpc.Error
	if !errors.As(err, &re) {
		return false
	}
	switch re.ErrorCode() {
	case codeInvalidRequest, codeMethodNotFound, CodeInvalidParams:
		return true
	}
	return false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
