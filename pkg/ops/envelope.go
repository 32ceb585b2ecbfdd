// Package ops holds the envelopes of the edge contract (/ops/v1/*). Their JSON
// has exactly the contract's top-level members and no others.
package ops

import "time"

// Version is the envelope version of the /ops/v1 contract.
const Version = "v1"

// Envelope is the success body of every /ops/v1/* route.
type Envelope struct {
	Version     string         `json:"version"`
	GeneratedAt time.Time      `json:"generatedAt"`
	ClusterID   string         `json:"clusterId,omitempty"`
	Data        map[string]any `json:"data"`
}

// ErrorEnvelope is the error body of every /ops/v1/* route.
type ErrorEnvelope struct {
	Version     string    `json:"version"`
	GeneratedAt time.Time `json:"generatedAt"`
	Error       ErrorBody `json:"error"`
}

// ErrorBody is the error member of ErrorEnvelope. Details holds the
// additional members the contract allows; they are flattened into the
// object by MarshalJSON.
type ErrorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"-"`
}

// NewEnvelope wraps data; a nil data becomes an empty object, as the
// contract requires an object.
func NewEnvelope(now time.Time, clusterID string, data map[string]any) Envelope {
	if data == nil {
		data = map[string]any{}
	}
	return Envelope{Version: Version, GeneratedAt: now.UTC(), ClusterID: clusterID, Data: data}
}

// NewError returns an error envelope.
func NewError(now time.Time, code, message string, retryable bool) ErrorEnvelope {
	return ErrorEnvelope{Version: Version, GeneratedAt: now.UTC(), Error: ErrorBody{Code: code, Message: message, Retryable: retryable}}
}
