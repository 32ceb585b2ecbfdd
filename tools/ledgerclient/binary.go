package ledgerclient

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/signing"
)

// Binaries (docs/adr/0037): the bytes go to IPFS, the validators record
// the CID once they have checked it against a signed declaration.

// Upload is a binary to declare: its size, MIME type and blob id (the
// SHA-256 of its bytes).
type Upload struct {
	Size     uint64
	MimeType string
	ID       blob.ID
}

// DeclareIntent signs and declares an upload intent under a new random
// intent id, and returns it as applied (READY_FOR_UPLOAD).
func (c *Client) DeclareIntent(ctx context.Context, cfg api.BlockchainConfig, key *ecdsa.PrivateKey, u Upload) (api.BlobIntent, error) {
	var id common.Hash
	if _, err := rand.Read(id[:]); err != nil {
		return api.BlobIntent{}, err
	}
	in := signing.BlobIntent{IntentID: id, Wallet: crypto.PubkeyToAddress(key.PublicKey), Size: u.Size,
		MimeType: u.MimeType, ContentHash: common.Hash(u.ID)}
	signer, err := signing.NewSigner(signing.Domain{ChainID: cfg.EIP712.ChainID, VerifyingContract: common.HexToAddress(cfg.EIP712.VerifyingContract)})
	if err != nil {
		return api.BlobIntent{}, err
	}
	sig, err := signer.SignIntent(in, key)
	if err != nil {
		return api.BlobIntent{}, err
	}
	var out api.BlobIntent
	return out, c.postJSON(ctx, "/v1/binary/declare-intent", api.DeclareIntent{IntentID: id.Hex(), Wallet: in.Wallet.Hex(),
		Size: u.Size, MimeType: u.MimeType, ContentHash: common.Hash(u.ID).Hex(), Signature: hexutil.Encode(sig)}, &out)
}

// CheckIntent reads an upload intent.
func (c *Client) CheckIntent(ctx context.Context, token string) (api.BlobIntent, error) {
	var out api.BlobIntent
	return out, c.get(ctx, "/v1/binary/check-intent/"+url.PathEscape(token), &out)
}

// CompleteUpload completes an intent with the CID its bytes were added
// under; the validator checks them through its gateway first.
func (c *Client) CompleteUpload(ctx context.Context, token, cid string) (api.BlobIntent, error) {
	var out api.BlobIntent
	return out, c.postJSON(ctx, "/v1/binary/complete-upload", api.CompleteUpload{Token: token, CID: cid}, &out)
}

// BlobCID reads where a blob's bytes are (/api/cid/{blobId}).
func (c *Client) BlobCID(ctx context.Context, id blob.ID) (api.BlobCID, error) {
	var out api.BlobCID
	return out, c.get(ctx, "/api/cid/"+id.String(), &out)
}

// Blob copies a blob's bytes, as the validator reads them through its
// gateway (/api/blob/{blobId}), to w, and checks them against the blob id.
func (c *Client) Blob(ctx context.Context, id blob.ID, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+"/api/blob/"+id.String(), nil)
	if err != nil {
		return 0, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	// A binary may take longer than the client's default timeout.
	hc := *c.http()
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, errorOf(req, resp)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), resp.Body)
	if err != nil {
		return n, err
	}
	if got := blob.ID(h.Sum(nil)); got != id {
		return n, fmt.Errorf("the bytes read have blob id %s, not %s", got, id)
	}
	return n, nil
}

func (c *Client) postJSON(ctx context.Context, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	_, err = c.do(req, out)
	return err
}

// AddToIPFS adds r's bytes to an IPFS node through its RPC API (kubo's
// POST /api/v0/add; apiURL is its base, e.g. http://127.0.0.1:5001) and
// returns the CID. cidVersion 1 adds with raw leaves, kubo's CIDv1 form.
func AddToIPFS(ctx context.Context, hc *http.Client, apiURL string, name string, r io.Reader, cidVersion int) (string, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", name)
		if err == nil {
			_, err = io.Copy(part, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	q := url.Values{"cid-version": {fmt.Sprint(cidVersion)}, "pin": {"true"}}
	if cidVersion == 1 {
		q.Set("raw-leaves", "true")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(apiURL, "/")+"/api/v0/add?"+q.Encode(), pr)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", errorOf(req, resp)
	}
	var added struct{ Hash string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&added); err != nil || added.Hash == "" {
		return "", fmt.Errorf("IPFS add: the answer names no CID: %v", err)
	}
	return added.Hash, nil
}

// errorOf is a failed answer's error: the validator's error body, or
// what the answer says.
func errorOf(req *http.Request, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb apierror.Body
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		return eb.Error
	}
	return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(body)))
}

// Node reads the node at a full content path (/api/explore).
func (c *Client) Node(ctx context.Context, path string) (api.Node, error) {
	var out api.Node
	return out, c.get(ctx, "/api/explore?"+url.Values{"path": {path}}.Encode(), &out)
}
