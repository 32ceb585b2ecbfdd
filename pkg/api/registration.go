package api

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The registration and compatibility routes (docs/adr/0038).
const (
	ClientRegistrationVersion = "register-client.v1"
	HeadVersion               = "head.v1"
	PublicURLVersion          = "ngrok-url.v1"
)

// RegisterClientRequest is the body of POST /v1/register-client: the
// wallet's EIP-712 signature (pkg/signing, ClientRegistration) over the
// client id and the wallet, 0x and 130 hex digits.
type RegisterClientRequest struct {
	ClientID  string `json:"clientId"`
	Wallet    string `json:"wallet"`
	Signature string `json:"signature"`
}

// ClientRegistration is the body of POST /v1/register-client and of
// GET /v1/register-client/{clientId}: the wallet a client id is bound to,
// by the raft entry at Index, dated by its proposer's clock.
type ClientRegistration struct {
	ContractVersion string    `json:"contractVersion"`
	ClientID        string    `json:"clientId"`
	Wallet          string    `json:"wallet"` // 0x, lowercase
	Index           uint64    `json:"index"`
	RegisteredAt    time.Time `json:"registeredAt"`
	Signature       string    `json:"signature"`
}

// Head is the body of GET /v1/head: the head of this validator's segment
// chain (the newest segment's raft index and hash; absent before the first
// segment), its applied index and state hash there, and its raft term.
type Head struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	Term            uint64 `json:"term"`
	AppliedIndex    uint64 `json:"appliedIndex"`
	StateHash       string `json:"stateHash"`
	SegmentIndex    uint64 `json:"segmentIndex"`
	SegmentHash     string `json:"segmentHash,omitempty"`
}

// HeadUpdate is the body of POST /v1/follower/head-update: a follower's
// report of its head to the leader. SegmentHash is the head of its segment
// chain after AppliedIndex (the segment at SegmentIndex), empty before its
// first segment.
type HeadUpdate struct {
	NodeID       uint64 `json:"nodeId"`
	AppliedIndex uint64 `json:"appliedIndex"`
	SegmentIndex uint64 `json:"segmentIndex"`
	SegmentHash  string `json:"segmentHash"`
}

// The agreement of a follower's reported head with the leader's segment
// chain.
const (
	// HeadAgrees: the leader's chain has the same segment at the same
	// index as the follower's head.
	HeadAgrees = "agrees"
	// HeadDiverged: it does not: the follower's segment chain differs.
	HeadDiverged = "diverged"
	// HeadUnknown: the leader cannot tell: it has not applied the
	// follower's index, or compaction dropped the segment.
	HeadUnknown = "unknown"
)

// FollowerHead is the newest head a member reported to the leader, in the
// replication views (ReplicationNode.Head), with its agreement.
type FollowerHead struct {
	AppliedIndex uint64    `json:"appliedIndex"`
	SegmentIndex uint64    `json:"segmentIndex"`
	SegmentHash  string    `json:"segmentHash,omitempty"`
	ReportedAt   time.Time `json:"reportedAt"`
	Agreement    string    `json:"agreement"`
}

// PublicURL is the body of GET and POST /v1/ngrok-url: the public URL this
// validator advertises; Source says where it comes from: "operator" (set
// through the route, kept across restarts), "setting"
// (SVC_VALIDATOR_PUBLIC_URL) or "none" (URL empty).
type PublicURL struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	URL             string `json:"url"`
	Source          string `json:"source"`
}

// The sources of a PublicURL.
const (
	PublicURLOperator = "operator"
	PublicURLSetting  = "setting"
	PublicURLNone     = "none"
)

// MaxPublicURLLen bounds a public URL.
const MaxPublicURLLen = 2048

// CheckPublicURL checks a public URL: absolute, http or https, a host, no
// user info, no fragment, at most MaxPublicURLLen bytes.
func CheckPublicURL(s string) error {
	if len(s) > MaxPublicURLLen {
		return fmt.Errorf("is %d bytes long, at most %d are allowed", len(s), MaxPublicURLLen)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an absolute http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("must name a host")
	case u.User != nil:
		return errors.New("must not carry user information")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return errors.New("must not carry a fragment")
	}
	return nil
}
