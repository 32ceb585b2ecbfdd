package api

import "time"

// Binary uploads and blob mappings (docs/adr/0037). Validators keep a
// binary's CID and what its intent declared, never its bytes.

// DeclareIntent is the body of POST /v1/binary/declare-intent: the
// signing.BlobIntent struct's fields and the wallet's EIP-712 signature
// over them. IntentID and ContentHash are 0x-prefixed 32-byte hex; the
// content hash is the SHA-256 of the binary's bytes (its blob id).
type DeclareIntent struct {
	IntentID    string `json:"intentId"`
	Wallet      string `json:"wallet"`
	Size        uint64 `json:"size"`
	MimeType    string `json:"mimeType"`
	ContentHash string `json:"contentHash"`
	Signature   string `json:"signature"`
}

// CompleteUpload is the body of POST /v1/binary/complete-upload.
type CompleteUpload struct {
	// Token is the intent's token (its intentId).
	Token string `json:"token"`
	// CID names the binary in IPFS: a CIDv0 (Qm…) or a CIDv1 in base32
	// (b…), dag-pb or raw, sha2-256.
	CID string `json:"cid"`
}

// Upload intent statuses.
const (
	IntentPending        = "PENDING"
	IntentReadyForUpload = "READY_FOR_UPLOAD"
	IntentCompleted      = "COMPLETED"
	IntentExpired        = "EXPIRED"
)

// BlobIntent is the answer of the intent routes. Only Token and Status
// are set while the intent is PENDING (declared on this validator, not
// applied yet).
type BlobIntent struct {
	Token       string     `json:"token"`
	Status      string     `json:"status"`
	Wallet      string     `json:"wallet,omitempty"`
	Size        uint64     `json:"size"`
	MimeType    string     `json:"mimeType,omitempty"`
	BlobID      string     `json:"blobId,omitempty"`
	DeclaredAt  *time.Time `json:"declaredAt,omitempty"`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty"`
	CID         string     `json:"cid,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// DeleteAt is when a COMPLETED or EXPIRED intent is deleted (404
	// after); the blob mapping stays.
	DeleteAt *time.Time `json:"deleteAt,omitempty"`
}

// BlobCID is the answer of GET /api/cid/{blobId}: where a blob's bytes
// are. GatewayURL is empty when this validator names no public gateway.
type BlobCID struct {
	BlobID      string    `json:"blobId"`
	CID         string    `json:"cid"`
	GatewayURL  string    `json:"gatewayUrl,omitempty"`
	Size        uint64    `json:"size"`
	MimeType    string    `json:"mimeType"`
	Wallet      string    `json:"wallet"`
	CommitIndex uint64    `json:"commitIndex"`
	CreatedAt   time.Time `json:"createdAt"`
}
