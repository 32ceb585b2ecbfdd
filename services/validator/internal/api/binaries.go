package api

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ipfs/go-cid"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
)

// Binaries: the upload intent flow (internal) and the blob routes (local
// diagnostic) of docs/adr/0037. Validators keep CIDs, never bytes:
// /api/blob streams a binary from the configured gateway, verified.

// Binaries is the intent flow (pipeline.Binaries).
type Binaries interface {
	Declare(ctx context.Context, d pipeline.Declaration) (pipeline.IntentView, error)
	Check(token [32]byte) (pipeline.IntentView, error)
	Complete(ctx context.Context, token [32]byte, c cid.Cid) (pipeline.IntentView, error)
}

// Blobs reads the blob mappings (state.Machine).
type Blobs interface {
	Blob(id blob.ID) (*ledgerpb.BlobMapping, error)
	BlobOfCID(cid []byte) (id blob.ID, ok bool, err error)
	BlobTotals() (count, size uint64, err error)
}

// BlobReader answers a request with a binary's bytes, verified
// (blobgateway.Reader).
type BlobReader interface {
	Serve(w http.ResponseWriter, r *http.Request, c cid.Cid, contentType string)
}

// declareIntent serves POST /v1/binary/declare-intent.
func (s *Server) declareIntent(c echo.Context) error {
	var body api.DeclareIntent
	if err := s.jsonObject(c, &body); err != nil {
		return err
	}
	d, err := parseDeclaration(body)
	if err != nil {
		return err
	}
	v, err := s.deps.Binaries.Declare(c.Request().Context(), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, intentBody(v))
}

// parseDeclaration checks a declare-intent body's fields.
func parseDeclaration(body api.DeclareIntent) (pipeline.Declaration, error) {
	id, err := hash32("intentId", body.IntentID, "a random 32-byte intent id the wallet picks")
	if err != nil {
		return pipeline.Declaration{}, err
	}
	content, err := hash32("contentHash", body.ContentHash, "the SHA-256 of the binary's bytes")
	if err != nil {
		return pipeline.Declaration{}, err
	}
	if !common.IsHexAddress(body.Wallet) || !strings.HasPrefix(body.Wallet, "0x") {
		return pipeline.Declaration{}, apierror.Field("wallet", "must be a 0x-prefixed 20-byte address")
	}
	if body.Size == 0 {
		return pipeline.Declaration{}, apierror.Field("size", "must be the binary's size in bytes, at least 1")
	}
	if err := pipeline.CheckMimeType(body.MimeType); err != nil {
		return pipeline.Declaration{}, err
	}
	sig, err := signing.ParseSignature(body.Signature)
	if err != nil {
		return pipeline.Declaration{}, apierror.Field("signature", "%v", err)
	}
	return pipeline.Declaration{Signature: sig, Intent: signing.BlobIntent{IntentID: id, Wallet: common.HexToAddress(body.Wallet),
		Size: body.Size, MimeType: body.MimeType, ContentHash: content}}, nil
}

// hash32 reads a 0x-prefixed 32-byte hex field.
func hash32(field, value, what string) (common.Hash, error) {
	b, err := hexutil.Decode(value)
	if err != nil || len(b) != common.HashLength {
		return common.Hash{}, apierror.Field(field, "must be %s: 0x followed by 64 hex digits", what)
	}
	return common.Hash(b), nil
}

// checkIntent serves GET /v1/binary/check-intent/{token}.
func (s *Server) checkIntent(c echo.Context) error {
	token, err := hash32("token", c.Param("token"), "the intent's token (its intentId)")
	if err != nil {
		return err
	}
	v, err := s.deps.Binaries.Check(token)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, intentBody(v))
}

// completeUpload serves POST /v1/binary/complete-upload.
func (s *Server) completeUpload(c echo.Context) error {
	var body api.CompleteUpload
	if err := s.jsonObject(c, &body); err != nil {
		return err
	}
	token, err := hash32("token", body.Token, "the intent's token (its intentId)")
	if err != nil {
		return err
	}
	id, err := blob.ParseCID(body.CID)
	if err != nil {
		return apierror.Field("cid", "%v", err)
	}
	// Reading a large binary through the gateway may take longer than a
	// request may; the reader bounds it (SVC_VALIDATOR_BLOB_TIMEOUT).
	httpserver.LiftDeadlines(c.Response())
	v, err := s.deps.Binaries.Complete(c.Request().Context(), token, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, intentBody(v))
}

func intentBody(v pipeline.IntentView) api.BlobIntent {
	out := api.BlobIntent{Token: hexutil.Encode(v.Token[:]), Status: v.Status}
	rec := v.Intent
	if rec == nil {
		return out
	}
	at := func(ms int64) *time.Time { t := time.UnixMilli(ms).UTC(); return &t }
	out.Wallet = strings.ToLower(common.BytesToAddress(rec.GetWallet()).Hex())
	out.Size, out.MimeType, out.BlobID = rec.GetSize(), rec.GetMimeType(), hex.EncodeToString(rec.GetSha256())
	out.DeclaredAt, out.ExpiresAt = at(rec.GetDeclaredAtMs()), at(rec.GetExpiresAtMs())
	if c, err := blob.CIDFromBytes(rec.GetCid()); err == nil {
		out.CID = c.String()
	}
	if rec.GetStatus() != ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD {
		out.DeleteAt = at(rec.GetDoneAtMs() + rec.GetRetainMs())
		if rec.GetStatus() == ledgerpb.IntentStatus_INTENT_COMPLETED {
			out.CompletedAt = at(rec.GetDoneAtMs())
		}
	}
	return out
}

// mapping reads the blob id of the route's blobId parameter and its
// mapping: 404 when there is none (or the id's #length disagrees).
func (s *Server) mapping(c echo.Context) (blob.ID, *ledgerpb.BlobMapping, cid.Cid, error) {
	id, size, err := blob.ParseID(c.Param("blobId"))
	if err != nil {
		return id, nil, cid.Undef, apierror.Field("blobId", "%v", err)
	}
	m, err := s.deps.Blobs.Blob(id)
	if err != nil {
		return id, nil, cid.Undef, err
	}
	if m == nil || size >= 0 && uint64(size) != m.GetSize() {
		return id, nil, cid.Undef, apierror.New(apierror.NotFound, "no binary %s was uploaded here (its upload intent is completed by POST /v1/binary/complete-upload)", id)
	}
	ref, err := blob.CIDFromBytes(m.GetCid())
	if err != nil {
		return id, nil, cid.Undef, err
	}
	return id, m, ref, nil
}

// blobCID serves GET /api/cid/{blobId}.
func (s *Server) blobCID(c echo.Context) error {
	id, m, ref, err := s.mapping(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.blobBody(id, m, ref))
}

func (s *Server) blobBody(id blob.ID, m *ledgerpb.BlobMapping, ref cid.Cid) *api.BlobCID {
	out := &api.BlobCID{BlobID: id.String(), CID: ref.String(), Size: m.GetSize(), MimeType: m.GetMimeType(),
		Wallet: strings.ToLower(common.BytesToAddress(m.GetWallet()).Hex()), CommitIndex: m.GetIndex(),
		CreatedAt: time.UnixMilli(m.GetAtMs()).UTC()}
	if s.cfg.PublicGateway != nil {
		out.GatewayURL = s.cfg.PublicGateway.JoinPath("ipfs", ref.String()).String()
	}
	return out
}

// blobGateway serves GET /api/cid/gateway/{blobId}: a redirect to the
// public gateway's address of the blob.
func (s *Server) blobGateway(c echo.Context) error {
	_, _, ref, err := s.mapping(c)
	if err != nil {
		return err
	}
	if s.cfg.PublicGateway == nil {
		return apierror.New(apierror.GatewayNotConfigured, "this validator names no public IPFS gateway (SVC_VALIDATOR_IPFS_PUBLIC_GATEWAY, or SVC_VALIDATOR_IPFS_GATEWAY without credentials)")
	}
	return c.Redirect(http.StatusFound, s.cfg.PublicGateway.JoinPath("ipfs", ref.String()).String())
}

// blobBytes serves GET /api/blob/{blobId}: the binary's bytes from the
// gateway, each block verified against the CID (blobgateway.Reader), with
// Range, the declared MIME type, and the reader's size cap and timeout.
func (s *Server) blobBytes(c echo.Context) error {
	_, m, ref, err := s.mapping(c)
	if err != nil {
		return err
	}
	// A binary recorded under a larger cap than today's.
	if s.cfg.MaxBlobBytes > 0 && m.GetSize() > uint64(s.cfg.MaxBlobBytes) {
		return apierror.New(apierror.ContentTooLarge, "the binary is %d bytes; this validator serves binaries of at most %d (SVC_VALIDATOR_BLOB_MAX_BYTES): read it from the gateway by its CID, %s",
			m.GetSize(), s.cfg.MaxBlobBytes, ref)
	}
	if s.deps.BlobReader == nil {
		return apierror.New(apierror.GatewayNotConfigured, "this validator names no IPFS gateway (SVC_VALIDATOR_IPFS_GATEWAY) to read binaries from")
	}
	// A binary may take longer than a request may; the reader bounds it
	// (SVC_VALIDATOR_BLOB_TIMEOUT, and a stall in the gateway's answer).
	httpserver.LiftDeadlines(c.Response())
	c.Response().Header().Set("X-Content-Type-Options", "nosniff")
	c.Response().Header().Set("Content-Security-Policy", "sandbox")
	s.deps.BlobReader.Serve(c.Response(), c.Request(), ref, m.GetMimeType())
	return nil
}

// cidBlob is the blob a completed upload mapped the CID text to, nil
// when none.
func (s *Server) cidBlob(text string) (*api.BlobCID, error) {
	ref, err := blob.ParseCID(text)
	if err != nil || s.deps.Blobs == nil {
		return nil, err
	}
	id, ok, err := s.deps.Blobs.BlobOfCID(ref.Bytes())
	if err != nil || !ok {
		return nil, err
	}
	m, err := s.deps.Blobs.Blob(id)
	if err != nil || m == nil {
		return nil, err
	}
	mapped, err := blob.CIDFromBytes(m.GetCid())
	if err != nil {
		return nil, err
	}
	return s.blobBody(id, m, mapped), nil
}
