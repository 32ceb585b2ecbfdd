// Package apierror owns the error codes of the validator's routes and their
// JSON body (ADR 0006):
//
//	{"error": {"code": "...", "message": "...", "retryable": false, "details": {...}}}
//
// Codes are lowercase and stable; clients branch on them. Every code has one
// HTTP status. The same codes name the reason of a REJECTED proposal.
//
// payment_orphaned (402) is such a reason only: the proposal's payment was
// observed, then a chain reorganization took it back (the chain-watcher
// retracted it) and it was not mined again before the proposal was decided,
// so the proposal never commits on it. A new proposal id with a new payment
// is the way on.
package apierror

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is a stable, lowercase error code.
type Code string

const (
	InvalidField     Code = "invalid_field"
	InvalidSignature Code = "invalid_signature"
	// PaymentNotFound: no payment for the proposal id has been observed.
	// At intake it is retryable (the chain-watcher may publish it yet) and
	// nothing is kept; as a REJECTED reason it is final.
	PaymentNotFound     Code = "payment_not_found"
	PaymentInsufficient Code = "payment_insufficient"
	PaymentTierMismatch Code = "payment_tier_mismatch"
	PaymentTxMismatch   Code = "payment_tx_mismatch"
	// PaymentPayerMismatch: the payment was made by another wallet than
	// the one that signed the proposal; a payment pays only for its
	// payer's own proposals (ADR 0028).
	PaymentPayerMismatch Code = "payment_payer_mismatch"
	PaymentOrphaned      Code = "payment_orphaned" // a reorg took the payment back (see the package doc)
	PaymentSpent         Code = "payment_spent"
	ProposalIDConflict   Code = "proposal_id_conflict"
	// MembershipRefused: a cluster membership change that the rules of
	// ADR 0027 refuse; details.reason says which. Retryable only for the
	// reasons that pass by themselves (a pending change, a learner still
	// catching up, voters not reachable now).
	MembershipRefused Code = "membership_refused"
	// GcRefused: the leader does not propose the compaction an operator
	// asked for (docs/adr/0033); details.reason says why: run_exists (a
	// run of the finalized epoch is applied: details.run and details.epoch
	// name it), no_finalized_epoch (retryable) or gc_off.
	GcRefused Code = "gc_refused"
	// ClientBoundElsewhere: the client id is bound to another wallet
	// (POST /v1/register-client, docs/adr/0038); details.wallet names it.
	// ClientLimitReached: the wallet has bound as many client ids as one
	// wallet may (details.limit).
	ClientBoundElsewhere Code = "client_bound_elsewhere"
	ClientLimitReached   Code = "client_limit_reached"
	WriteBlockedGCDebt   Code = "write_blocked_gc_debt"
	PathForbidden        Code = "path_forbidden"
	ContentTooLarge      Code = "content_too_large"
	LeaderUnknown        Code = "leader_unknown"
	// PaymentFeedStale: this validator cannot tell whether a payment
	// exists, because the chain feed is behind (no recent status from the
	// chain-watcher, or the payment index behind the stream); details.cause
	// names which. Retryable: nothing is decided on a stale feed.
	PaymentFeedStale Code = "payment_feed_stale"
	// Binary uploads (docs/adr/0037). IntentLimit: the wallet has as many
	// open upload intents as a wallet may; IntentConflict: the intent id is
	// taken by another declaration, or the intent was completed with
	// another CID; IntentExpired: the intent expired before its upload
	// was completed. BlobMismatch: the CID's bytes are not what the intent
	// declared (size or SHA-256). BlobUnavailable: the IPFS gateway did not
	// answer with the CID's bytes (it may not have them yet; retryable).
	// GatewayNotConfigured: this validator names no IPFS gateway.
	IntentLimit          Code = "intent_limit"
	IntentConflict       Code = "intent_conflict"
	IntentExpired        Code = "intent_expired"
	BlobMismatch         Code = "blob_mismatch"
	BlobUnavailable      Code = "blob_unavailable"
	GatewayNotConfigured Code = "gateway_not_configured"
	Overloaded           Code = "overloaded"
	RateLimited          Code = "rate_limited"
	Unauthorized         Code = "unauthorized"
	Forbidden            Code = "forbidden"
	NotFound             Code = "not_found"
	MethodNotAllowed     Code = "method_not_allowed"
	Timeout              Code = "timeout"
	Internal             Code = "internal"
	// ChatNotConfigured: POST /v1/chat on a validator with no chat
	// endpoint configured (ADR 0040); GET /chat says how to set one up.
	ChatNotConfigured Code = "chat_not_configured"
	// ChatEndpointFailed: the configured chat endpoint could not be
	// reached, answered an error status or an answer that is not a chat
	// completion; retryable. Its own error text is not relayed: an
	// endpoint may quote the key it was given.
	ChatEndpointFailed Code = "chat_endpoint_failed"
)

// status maps each code to its HTTP status. Payment codes answer 402 when a
// request fails on them synchronously; as REJECTED reasons they are data.
var status = map[Code]int{
	InvalidField:         http.StatusBadRequest,
	InvalidSignature:     http.StatusUnauthorized,
	PaymentNotFound:      http.StatusPaymentRequired,
	PaymentInsufficient:  http.StatusPaymentRequired,
	PaymentTierMismatch:  http.StatusPaymentRequired,
	PaymentTxMismatch:    http.StatusPaymentRequired,
	PaymentPayerMismatch: http.StatusPaymentRequired,
	PaymentOrphaned:      http.StatusPaymentRequired,
	PaymentSpent:         http.StatusConflict,
	ProposalIDConflict:   http.StatusConflict,
	MembershipRefused:    http.StatusConflict,
	GcRefused:            http.StatusConflict,
	ClientBoundElsewhere: http.StatusConflict,
	ClientLimitReached:   http.StatusConflict,
	WriteBlockedGCDebt:   http.StatusPaymentRequired,
	PathForbidden:        http.StatusForbidden,
	ContentTooLarge:      http.StatusRequestEntityTooLarge,
	LeaderUnknown:        http.StatusServiceUnavailable,
	PaymentFeedStale:     http.StatusServiceUnavailable,
	IntentLimit:          http.StatusTooManyRequests,
	IntentConflict:       http.StatusConflict,
	IntentExpired:        http.StatusGone,
	BlobMismatch:         http.StatusUnprocessableEntity,
	BlobUnavailable:      http.StatusBadGateway,
	GatewayNotConfigured: http.StatusServiceUnavailable,
	Overloaded:           http.StatusTooManyRequests,
	RateLimited:          http.StatusTooManyRequests,
	Unauthorized:         http.StatusUnauthorized,
	Forbidden:            http.StatusForbidden,
	NotFound:             http.StatusNotFound,
	MethodNotAllowed:     http.StatusMethodNotAllowed,
	Timeout:              http.StatusGatewayTimeout,
	Internal:             http.StatusInternalServerError,
	ChatNotConfigured:    http.StatusServiceUnavailable,
	ChatEndpointFailed:   http.StatusBadGateway,
}

// retryable lists the codes whose request can succeed when sent again as is.
var retryable = map[Code]bool{
	PaymentNotFound:  true,
	PaymentFeedStale: true,
	LeaderUnknown:    true,
	BlobUnavailable:  true,
	Overloaded:       true,
	RateLimited:      true,
	Timeout:          true,
	Internal:         true,
	// The endpoint may answer the next time: it is somebody's service.
	ChatEndpointFailed: true,
}

// Status is the HTTP status of the code; unknown codes are 500.
func (c Code) Status() int {
	if s, ok := status[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Retryable reports whether a request failing with c may succeed if retried.
func (c Code) Retryable() bool { return retryable[c] }

// Error is an API error. It marshals to the inner object of the error body
// (ADR 0006); use Body for the whole body.
type Error struct {
	Code      Code           `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header: when
	// a retry may succeed.
	RetryAfter time.Duration `json:"-"`
}

// Body is the JSON body of an error answer.
type Body struct {
	Error *Error `json:"error"`
}

// New returns an error with the code's retryability.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: code.Retryable()}
}

// Field returns an invalid_field error naming the field.
func Field(field, format string, args ...any) *Error {
	e := New(InvalidField, "%s: %s", field, fmt.Sprintf(format, args...))
	e.Details = map[string]any{"field": field}
	return e
}

// WithDetail returns e with one more detail.
func (e *Error) WithDetail(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Status is the HTTP status of the error's code.
func (e *Error) Status() int { return e.Code.Status() }

// Is makes errors.Is match on the code: errors.Is(err, &Error{Code: NotFound}).
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// As returns the *Error inside err, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// CodeOf returns the code of err, Internal for errors of no code.
func CodeOf(err error) Code {
	if e := As(err); e != nil {
		return e.Code
	}
	return Internal
}
