// Package ledgerclient is a Go client of the validator's proposal routes:
// it builds and signs proposal forms (EIP-712, ADR 0002), pays for them
// on the payment contract, submits them and follows their status. ledgerctl,
// the end-to-end tests and the benchmarks use it, so they all speak to the
// validator exactly as a client must.
package ledgerclient

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/signing"
)

// Client talks to one validator.
type Client struct {
	BaseURL string       // e.g. http://127.0.0.1:8090
	Token   string       // bearer token, when the validator requires one
	HTTP    *http.Client // nil: a client with a 90 s timeout
	// PaymentRetry is how long a submission refused for its payment and
	// retryable (payment_not_found: not observed yet; payment_feed_stale:
	// the validator cannot tell) is sent again, after each Retry-After.
	// Nothing is kept of a refused submission, so a retry is the only way
	// on. 0: no retry, the refusal is returned.
	PaymentRetry time.Duration
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 90 * time.Second}
}

// do sends a request and decodes a 2xx body into out; other answers become
// an *apierror.Error (from the error body, ADR 0006, when there is one).
//
// Every request that is not a GET is sent as JSON: the validator's operator
// routes take nothing else (a cross-site form cannot send it).
func (c *Client) do(req *http.Request, out any) (int, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if req.Method != http.MethodGet && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		var eb apierror.Body
		if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
			if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
				eb.Error.RetryAfter = time.Duration(secs) * time.Second
			}
			return resp.StatusCode, eb.Error
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(body)))
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decoding answer: %w", req.Method, req.URL.Path, err)
		}
	}
	return resp.StatusCode, nil
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+path, nil)
	if err != nil {
		return err
	}
	_, err = c.do(req, out)
	return err
}

// BlockchainConfig reads /v1/blockchain/config.
func (c *Client) BlockchainConfig(ctx context.Context) (api.BlockchainConfig, error) {
	var cfg api.BlockchainConfig
	return cfg, c.get(ctx, "/v1/blockchain/config", &cfg)
}

// Status reads a proposal's status; wait > 0 lets the validator hold the
// request until the status changes or wait passes.
func (c *Client) Status(ctx context.Context, id common.Hash, wait time.Duration) (api.ProposalStatus, error) {
	var s api.ProposalStatus
	path := api.StatusLink(id.Hex())
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	return s, c.get(ctx, path, &s)
}

// WaitFinal follows a proposal until it is COMMITTED, FINALIZED or
// REJECTED, calling progress on every status change.
func (c *Client) WaitFinal(ctx context.Context, id common.Hash, progress func(api.ProposalStatus)) (api.ProposalStatus, error) {
	last := ""
	for {
		s, err := c.Status(ctx, id, 30*time.Second)
		if err != nil {
			return s, err
		}
		if s.Status != last && progress != nil {
			progress(s)
		}
		last = s.Status
		if api.Terminal(s.Status) {
			return s, nil
		}
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
	}
}

// Submitted is the answer to a submission: 202 with a receipt for a new
// proposal, or 200 with the current status of an identical earlier one.
type Submitted struct {
	HTTPStatus int
	Receipt    api.Receipt        // on 202
	Existing   api.ProposalStatus // on 200
}

// Submit posts a proposal form to /v1/propose-write or /v1/propose-delete.
func (c *Client) Submit(ctx context.Context, action proposal.Action, form url.Values) (Submitted, error) {
	return c.SubmitAndWait(ctx, action, form, 0)
}

// SubmitAndWait submits and lets the validator hold the answer until the
// proposal is decided or wait passes: one request for a write and its
// outcome. The receipt's status is the status when the answer was given.
//
// With PaymentRetry set, a retryable payment refusal is sent again until
// PaymentRetry has passed since the first attempt.
func (c *Client) SubmitAndWait(ctx context.Context, action proposal.Action, form url.Values, wait time.Duration) (Submitted, error) {
	until := time.Now().Add(c.PaymentRetry)
	for {
		out, err := c.submit(ctx, action, form, wait)
		e := apierror.As(err)
		if e == nil || !e.Retryable || (e.Code != apierror.PaymentNotFound && e.Code != apierror.PaymentFeedStale) {
			return out, err
		}
		pause := max(e.RetryAfter, time.Second)
		if time.Now().Add(pause).After(until) {
			return out, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return out, err
		}
	}
}

func (c *Client) submit(ctx context.Context, action proposal.Action, form url.Values, wait time.Duration) (Submitted, error) {
	route := "/v1/propose-write"
	if action == proposal.Delete {
		route = "/v1/propose-delete"
	}
	if wait > 0 {
		route += "?wait=" + wait.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+route, strings.NewReader(form.Encode()))
	if err != nil {
		return Submitted{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var raw json.RawMessage
	code, err := c.do(req, &raw)
	out := Submitted{HTTPStatus: code}
	if err != nil {
		return out, err
	}
	if code == http.StatusAccepted {
		err = json.Unmarshal(raw, &out.Receipt)
	} else {
		err = json.Unmarshal(raw, &out.Existing)
	}
	return out, err
}

// Proposal is what an author wants to write or delete.
type Proposal struct {
	Action       proposal.Action // Write when empty
	ID           common.Hash     // random when zero
	Message      []byte
	Organization string // "default" when empty
	ContentType  string
	Path         string // below the organization; default <contentType>/<id prefix>
	Class        payment.Class
}

// NewProposalID returns a random proposal id.
func NewProposalID() common.Hash {
	var id common.Hash
	if _, err := rand.Read(id[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return id
}

// Form builds the signed form of p for the cluster described by cfg. txHash
// is the payment transaction, zero when the mode verifies no payments. It
// fills in p's defaults (ID, organization) and returns the full content path.
func Form(cfg api.BlockchainConfig, key *ecdsa.PrivateKey, p *Proposal, txHash common.Hash) (url.Values, string, error) {
	if p.Action == "" {
		p.Action = proposal.Write
	}
	if p.ID == (common.Hash{}) {
		p.ID = NewProposalID()
	}
	if p.Organization == "" {
		p.Organization = proposal.DefaultOrganization
	}
	sub := p.Path
	if sub == "" {
		if p.Action == proposal.Delete {
			return nil, "", errors.New("a delete needs a path")
		}
		sub = proposal.DefaultSubPath(p.ContentType, p.ID)
	}
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	path := proposal.ContentPath(cfg.ContentRoot, wallet, p.Organization, sub)
	var msgHash common.Hash
	if p.Action == proposal.Write {
		msgHash = signing.MessageHash(p.Message)
	}
	domain := signing.Domain{ChainID: cfg.EIP712.ChainID, VerifyingContract: common.HexToAddress(cfg.EIP712.VerifyingContract)}
	sig, err := signing.Sign(domain, signing.Proposal{
		Action: string(p.Action), ProposalID: p.ID, Wallet: wallet, Path: path,
		Organization: p.Organization, ContentType: p.ContentType, PaymentTier: p.Class.Name(), MessageHash: msgHash,
	}, key)
	if err != nil {
		return nil, "", err
	}
	form := url.Values{
		proposal.FieldProposalID:    {p.ID.Hex()},
		proposal.FieldWalletAddress: {wallet.Hex()},
		proposal.FieldSignature:     {hexutil.Encode(sig)},
		proposal.FieldOrganization:  {p.Organization},
		proposal.FieldPaymentTier:   {p.Class.Name()},
		proposal.FieldPath:          {sub},
	}
	if p.Action == proposal.Write {
		form.Set(proposal.FieldMessage, string(p.Message))
	}
	if p.ContentType != "" {
		form.Set(proposal.FieldContentType, p.ContentType)
	}
	if txHash != (common.Hash{}) {
		form.Set(proposal.FieldEthereumTxHash, txHash.Hex())
	}
	return form, path, nil
}

// GcAccount reads a wallet's GC debt account.
func (c *Client) GcAccount(ctx context.Context, wallet common.Address) (api.GcAccount, error) {
	var acc api.GcAccount
	return acc, c.get(ctx, "/v1/gc/account/"+strings.ToLower(wallet.Hex()), &acc)
}

// PayDebt asks the validator to pay wallet's GC debt (ADR 0011) and
// returns the account once the payment is applied. On a chain-backed
// network tx is the transaction that called the contract's payDebt (the
// error is payment_not_found until the chain-watcher has published it);
// in MOCK mode tx is zero and micros is paid without a transaction.
//
// The route is on the operator lane: Token must be an operator's.
func (c *Client) PayDebt(ctx context.Context, wallet common.Address, tx common.Hash, micros uint64) (api.GcAccount, error) {
	body := map[string]string{"amount": api.DebtString(micros)}
	if tx != (common.Hash{}) {
		body = map[string]string{"txHash": tx.Hex()}
	}
	return c.gcChange(ctx, wallet, "pay", body)
}

// SetGcLimit sets a wallet's executed-debt limit (0: the default); an
// operator's route.
func (c *Client) SetGcLimit(ctx context.Context, wallet common.Address, micros uint64) (api.GcAccount, error) {
	return c.gcChange(ctx, wallet, "set-limit", map[string]string{"limit": api.DebtString(micros)})
}

// ExecutePendingDebt executes a wallet's pending GC debt now; an operator's
// route.
func (c *Client) ExecutePendingDebt(ctx context.Context, wallet common.Address) (api.GcAccount, error) {
	return c.gcChange(ctx, wallet, "execute-pending", map[string]string{})
}

// gcChange posts body to one of a GC account's operator routes and
// returns the account as applied.
func (c *Client) gcChange(ctx context.Context, wallet common.Address, route string, body map[string]string) (api.GcAccount, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return api.GcAccount{}, err
	}
	u := strings.TrimRight(c.BaseURL, "/") + "/v1/gc/account/" + strings.ToLower(wallet.Hex()) + "/" + route
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(raw))
	if err != nil {
		return api.GcAccount{}, err
	}
	var acc api.GcAccount
	_, err = c.do(req, &acc)
	return acc, err
}

// Members is the answer of the membership routes.
type Members struct {
	Members  []api.Member `json:"members"`
	Voters   []uint64     `json:"voters"`
	Learners []uint64     `json:"learners"`
}

// ClusterMembers lists the cluster's members.
func (c *Client) ClusterMembers(ctx context.Context) (Members, error) {
	var m Members
	return m, c.get(ctx, "/v1/cluster/members", &m)
}

// AddMember adds a validator as a learner; it must then be started with
// SVC_VALIDATOR_JOIN=true on an empty data directory, and becomes a voter
// once it caught up.
func (c *Client) AddMember(ctx context.Context, m api.Member) (Members, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return Members{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+"/v1/cluster/members", bytes.NewReader(body))
	if err != nil {
		return Members{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	var out Members
	_, err = c.do(req, &out)
	return out, err
}

// PromoteMember makes a caught-up learner a voter (the leader also does it
// by itself once the learner caught up).
func (c *Client) PromoteMember(ctx context.Context, id uint64) (Members, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/cluster/members/%d/promote", strings.TrimRight(c.BaseURL, "/"), id), nil)
	if err != nil {
		return Members{}, err
	}
	var out Members
	_, err = c.do(req, &out)
	return out, err
}

// RemoveMember removes a validator from the cluster.
func (c *Client) RemoveMember(ctx context.Context, id uint64) (Members, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("%s/v1/cluster/members/%d", strings.TrimRight(c.BaseURL, "/"), id), nil)
	if err != nil {
		return Members{}, err
	}
	var out Members
	_, err = c.do(req, &out)
	return out, err
}

// SegmentTars lists the validator's TAR files (GET /api/segments/tars).
func (c *Client) SegmentTars(ctx context.Context) (api.SegmentTars, error) {
	var t api.SegmentTars
	return t, c.get(ctx, "/api/segments/tars", &t)
}

// SegmentArchive copies the segment archive of the TAR file name (GET
// /segments/{name}, pkg/segarchive) to w. The archive can be large: only
// ctx bounds the download, not the client's timeout; the validator cuts off
// a reader that stalls.
func (c *Client) SegmentArchive(ctx context.Context, name string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+"/segments/"+url.PathEscape(name), nil)
	if err != nil {
		return 0, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
		hc.Timeout = 0
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb apierror.Body
		if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
			return 0, eb.Error
		}
		return 0, fmt.Errorf("GET %s: %s: %s", req.URL.Path, resp.Status, strings.TrimSpace(string(body)))
	}
	return io.Copy(w, resp.Body)
}
