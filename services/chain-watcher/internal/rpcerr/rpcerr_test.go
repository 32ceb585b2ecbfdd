package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/rpc"
)

// jsonErr is a JSON-RPC error object as go-ethereum's client returns it.
type jsonErr struct {
	code int
	msg  string
}

func (e jsonErr) Error() string  { return e.msg }
func (e jsonErr) ErrorCode() int { return e.code }

var _ rpc.Error = jsonErr{}

func TestIsRangeError(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("watch: logs of blocks 1-2000: %w", err) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"infura results", jsonErr{-32005, "query returned more than 10000 results"}, true},
		{"limit exceeded code alone", jsonErr{-32005, "limit exceeded"}, true},
		{"rate limit under -32005", jsonErr{-32005, "daily request count exceeded, request rate limited"}, false},
		{"range too large", jsonErr{-32602, "block range is too large"}, true},
		{"alchemy size", jsonErr{-32602, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size"}, true},
		{"maximum block range", jsonErr{-32000, "exceed maximum block range: 5000"}, true},
		{"quicknode", jsonErr{-32614, "eth_getLogs is limited to a 10,000 blocks range"}, true},
		{"plain wording", errors.New("range too large, max 2000"), true},
		{"response size", errors.New("response size exceeded"), true},
		{"http 413", rpc.HTTPError{StatusCode: 413, Status: "413 Request Entity Too Large"}, true},
		{"our timeout", fmt.Errorf("%w after 30s", ErrTimeout), true},
		{"gateway timeout", rpc.HTTPError{StatusCode: 504, Status: "504 Gateway Timeout"}, true},
		{"net timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{"provider query timeout", jsonErr{-32000, "query timeout exceeded"}, true},
		{"http 503", rpc.HTTPError{StatusCode: 503, Status: "503 Service Unavailable"}, false},
		{"http 429", rpc.HTTPError{StatusCode: 429, Status: "429 Too Many Requests"}, false},
		{"refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{"invalid params", jsonErr{-32602, "invalid argument 0: hex string without 0x prefix"}, false},
		{"cancelled", context.Canceled, false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		if got := IsRangeError(c.err); got != c.want {
			t.Errorf("%s: IsRangeError(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
		if c.err != nil {
			if got := IsRangeError(wrap(c.err)); got != c.want {
				t.Errorf("%s wrapped: %v, want %v", c.name, got, c.want)
			}
		}
	}
}

func TestIsRejected(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{jsonErr{-32601, "the method eth_foo does not exist"}, true},
		{jsonErr{-32602, "invalid block tag"}, true},
		{jsonErr{-32000, "header not found"}, false},
		{rpc.HTTPError{StatusCode: 400}, false},
		{errors.New("EOF"), false},
	} {
		if got := IsRejected(fmt.Errorf("call: %w", c.err)); got != c.want {
			t.Errorf("IsRejected(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// FuzzClassify: any answer text, with any code and HTTP status, is
// classified without panicking, and the wording that makes a range error
// does so whatever surrounds it (unless it speaks of rate limits).
func FuzzClassify(f *testing.F) {
	f.Add(-32005, 0, "query returned more than 10000 results")
	f.Add(-32602, 413, "block range is too large")
	f.Add(0, 504, "")
	f.Add(-32000, 0, "\xff\xfe rate limit")
	f.Fuzz(func(t *testing.T, code, status int, msg string) {
		errs := []error{jsonErr{code, msg}, rpc.HTTPError{StatusCode: status, Status: msg, Body: []byte(msg)}, errors.New(msg)}
		for _, err := range errs {
			_ = IsRangeError(err)
			_ = IsTimeout(err)
			_ = IsRejected(err)
		}
		lower := strings.ToLower(msg)
		if !containsAny(lower, rateWording) {
			if !IsRangeError(errors.New(msg + " query returned more than 10000 results")) {
				t.Errorf("range wording after %q not recognised", msg)
			}
		}
	})
}
