package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ipfs/go-cid"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Binary uploads (docs/adr/0037): the routes' side of the intent flow.
// Declaring and completing are route changes (changes.go): the request
// waits until the entry is applied. Completing first reads the CID's bytes
// through the gateway, verified block by block, and compares their size
// and SHA-256 with the declaration; apply only records what this validator
// checked. Expiry is the leader's: RunExpiry proposes BlobIntentExpire for
// the intents due, and apply checks each due time against the entry's.

// BinariesConfig tunes the intent flow. Zero values take the defaults.
type BinariesConfig struct {
	// IntentTTL is how long a declared intent waits for its upload.
	IntentTTL time.Duration
	// IntentRetention is how long a completed or expired intent stays
	// readable (check-intent) before it is deleted.
	IntentRetention time.Duration
	// MaxOpenPerWallet bounds a wallet's open intents.
	MaxOpenPerWallet int
	// MaxBlobBytes bounds a declared binary's size.
	MaxBlobBytes int64
	// ExpiryInterval is how often the leader looks for intents due.
	ExpiryInterval time.Duration
}

// Defaults of BinariesConfig.
const (
	DefaultIntentTTL        = time.Hour
	DefaultIntentRetention  = 24 * time.Hour
	DefaultMaxOpenPerWallet = 16
	DefaultMaxBlobBytes     = 1 << 30
	DefaultExpiryInterval   = time.Second
	// maxMimeType bounds a declared MIME type (RFC 6838: 127 characters a
	// part).
	maxMimeType = 255
)

func (c BinariesConfig) WithDefaults() BinariesConfig {
	if c.IntentTTL == 0 {
		c.IntentTTL = DefaultIntentTTL
	}
	if c.IntentRetention == 0 {
		c.IntentRetention = DefaultIntentRetention
	}
	if c.MaxOpenPerWallet == 0 {
		c.MaxOpenPerWallet = DefaultMaxOpenPerWallet
	}
	if c.MaxBlobBytes == 0 {
		c.MaxBlobBytes = DefaultMaxBlobBytes
	}
	if c.ExpiryInterval == 0 {
		c.ExpiryInterval = DefaultExpiryInterval
	}
	return c
}

// Validate reports what is wrong with c.
func (c BinariesConfig) Validate() error {
	var errs []error
	if c.IntentTTL < 0 || c.IntentTTL > 0 && c.IntentTTL < time.Second {
		errs = append(errs, fmt.Errorf("intent TTL %s: give 1s or more", c.IntentTTL))
	}
	if c.IntentRetention < 0 {
		errs = append(errs, fmt.Errorf("intent retention %s is negative", c.IntentRetention))
	}
	if c.MaxOpenPerWallet < 0 || c.MaxOpenPerWallet > 1<<16 {
		errs = append(errs, fmt.Errorf("open intents per wallet %d: give 1 to 65536", c.MaxOpenPerWallet))
	}
	if c.MaxBlobBytes < 0 {
		errs = append(errs, fmt.Errorf("binary size limit %d is negative", c.MaxBlobBytes))
	}
	if c.ExpiryInterval < 0 {
		errs = append(errs, fmt.Errorf("expiry interval %s is negative", c.ExpiryInterval))
	}
	return errors.Join(errs...)
}

// IntentState reads the replicated intents and mappings (state.Machine).
type IntentState interface {
	Intent(token [32]byte) (*ledgerpb.BlobIntent, error)
	OpenIntents(wallet [20]byte, limit int) (int, error)
	DueIntents(nowMs int64, limit int) ([][32]byte, error)
}

// BlobMeasurer reads a binary through the gateway, verified, and says
// what it is (blobgateway.Reader).
type BlobMeasurer interface {
	Measure(ctx context.Context, c cid.Cid, limit int64) (blobgateway.Digest, error)
}

// Binaries is the intent flow as the API sees it.
type Binaries struct {
	p      *Pipeline
	state  IntentState
	reader BlobMeasurer // nil: no gateway is configured
	cfg    BinariesConfig
	signer *signing.Signer
	log    *zap.Logger

	// pending are the tokens this validator is declaring: check-intent
	// answers PENDING for them until the declaration is applied.
	mu      sync.Mutex
	pending map[[32]byte]struct{}
}

// NewBinaries returns the intent flow of p over st; reader is nil when no
// gateway is configured (completing then answers 503).
func NewBinaries(p *Pipeline, st IntentState, reader BlobMeasurer, cfg BinariesConfig, log *zap.Logger) (*Binaries, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	signer, err := signing.NewSigner(p.cfg.Domain)
	if err != nil {
		return nil, err
	}
	return &Binaries{p: p, state: st, reader: reader, cfg: cfg.WithDefaults(), signer: signer, log: log,
		pending: map[[32]byte]struct{}{}}, nil
}

// Declaration is a declare-intent request, its fields checked by the API.
type Declaration struct {
	Intent    signing.BlobIntent
	Signature []byte
}

// IntentView is an intent as the routes answer it.
type IntentView struct {
	Intent *ledgerpb.BlobIntent // nil while PENDING
	Status string
	// Token is the intent's token (its id), as hex.
	Token [32]byte
}

func statusName(s ledgerpb.IntentStatus) string {
	switch s {
	case ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD:
		return api.IntentReadyForUpload
	case ledgerpb.IntentStatus_INTENT_COMPLETED:
		return api.IntentCompleted
	case ledgerpb.IntentStatus_INTENT_EXPIRED:
		return api.IntentExpired
	}
	return api.IntentPending
}

// CheckMimeType checks a declared MIME type: type/subtype of RFC 6838's
// restricted names, bounded.
func CheckMimeType(m string) error {
	typ, sub, ok := strings.Cut(m, "/")
	if !ok || len(m) > maxMimeType || !restrictedName(typ) || !restrictedName(sub) {
		return apierror.Field("mimeType", "must be a MIME type such as image/png (type/subtype, letters, digits and !#$&-^_.+, at most %d characters)", maxMimeType)
	}
	return nil
}

// restrictedName is RFC 6838's restricted-name.
func restrictedName(s string) bool {
	if s == "" || len(s) > 127 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("!#$&-^_.+", rune(c))) {
			return false
		}
	}
	return true
}

// Declare records d's intent once applied. Declaring the same intent
// again answers it as it is now.
func (b *Binaries) Declare(ctx context.Context, d Declaration) (IntentView, error) {
	in := d.Intent
	if in.Size > uint64(b.cfg.MaxBlobBytes) {
		return IntentView{}, apierror.New(apierror.ContentTooLarge, "the binary is %d bytes; this cluster takes binaries of at most %d", in.Size, b.cfg.MaxBlobBytes)
	}
	if err := CheckMimeType(in.MimeType); err != nil {
		return IntentView{}, err
	}
	if err := b.signer.VerifyIntent(in, d.Signature, in.Wallet); err != nil {
		return IntentView{}, apierror.New(apierror.InvalidSignature, "the signature is not the wallet's over this BlobIntent: %v", err)
	}
	token := [32]byte(in.IntentID)
	if rec, err := b.state.Intent(token); err != nil || rec != nil {
		if err != nil {
			return IntentView{}, err
		}
		return b.sameDeclaration(rec, in)
	}
	open, err := b.state.OpenIntents(in.Wallet, b.cfg.MaxOpenPerWallet)
	if err != nil {
		return IntentView{}, err
	}
	if open >= b.cfg.MaxOpenPerWallet {
		return IntentView{}, apierror.New(apierror.IntentLimit, "wallet %s has %d upload intents open, the most a wallet may; complete them or let them expire", in.Wallet.Hex(), open)
	}
	now := b.p.cfg.Now()
	op := &ledgerpb.BlobIntentDeclare{
		Token: token[:], Wallet: in.Wallet[:], Size: in.Size, MimeType: in.MimeType, Sha256: in.ContentHash[:],
		Signature: d.Signature, AtMs: now.UnixMilli(), ExpiresAtMs: now.Add(b.cfg.IntentTTL).UnixMilli(),
		MaxOpen: uint32(b.cfg.MaxOpenPerWallet), RetainMs: b.cfg.IntentRetention.Milliseconds(),
	}
	b.mu.Lock()
	b.pending[token] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.pending, token)
		b.mu.Unlock()
	}()
	var recorded *ledgerpb.BlobIntent
	err = b.change(ctx, routeChange{
		entry: &ledgerpb.Entry{Op: &ledgerpb.Entry_BlobIntentDeclare{BlobIntentDeclare: op}},
		applied: func() (bool, error) {
			// Applied, or refused by apply: the wallet's open intents
			// filled up meanwhile.
			rec, err := b.state.Intent(token)
			if rec != nil || err != nil {
				recorded = rec
				return true, err
			}
			open, err := b.state.OpenIntents(in.Wallet, b.cfg.MaxOpenPerWallet)
			return open >= b.cfg.MaxOpenPerWallet, err
		},
	})
	if err != nil {
		return IntentView{}, err
	}
	if recorded == nil {
		return IntentView{}, apierror.New(apierror.IntentLimit, "wallet %s has as many upload intents open as a wallet may", in.Wallet.Hex())
	}
	return b.sameDeclaration(recorded, in)
}

// sameDeclaration answers an intent declared under the token in's names:
// in's own, or a conflict.
func (b *Binaries) sameDeclaration(rec *ledgerpb.BlobIntent, in signing.BlobIntent) (IntentView, error) {
	if common.BytesToAddress(rec.GetWallet()) != in.Wallet || rec.GetSize() != in.Size ||
		rec.GetMimeType() != in.MimeType || common.BytesToHash(rec.GetSha256()) != in.ContentHash {
		return IntentView{}, apierror.New(apierror.IntentConflict, "intent %x is declared with other fields; pick a new random intentId", in.IntentID)
	}
	return view(rec), nil
}

func view(rec *ledgerpb.BlobIntent) IntentView {
	return IntentView{Intent: rec, Status: statusName(rec.GetStatus()), Token: [32]byte(rec.GetToken())}
}

// Check answers the intent with token: PENDING while this validator is
// declaring it, 404 when there is none.
func (b *Binaries) Check(token [32]byte) (IntentView, error) {
	rec, err := b.state.Intent(token)
	if err != nil {
		return IntentView{}, err
	}
	if rec != nil {
		return view(rec), nil
	}
	b.mu.Lock()
	_, pending := b.pending[token]
	b.mu.Unlock()
	if pending {
		return IntentView{Status: api.IntentPending, Token: token}, nil
	}
	return IntentView{}, apierror.New(apierror.NotFound, "no upload intent %x (never declared, or deleted after its retention)", token)
}

// Complete completes the intent with token with c once the gateway's
// bytes for c match the declaration.
func (b *Binaries) Complete(ctx context.Context, token [32]byte, c cid.Cid) (IntentView, error) {
	rec, err := b.state.Intent(token)
	if err != nil {
		return IntentView{}, err
	}
	if done, err := b.completed(rec, token, c); err != nil || done {
		return answer(rec, err)
	}
	if b.reader == nil {
		return IntentView{}, apierror.New(apierror.GatewayNotConfigured, "this validator names no IPFS gateway (SVC_VALIDATOR_IPFS_GATEWAY), so it cannot check an upload")
	}
	d, err := b.reader.Measure(ctx, c, int64(rec.GetSize())+1)
	switch {
	case errors.Is(err, blobgateway.ErrTooLarge):
		return IntentView{}, apierror.New(apierror.BlobMismatch, "%s holds more than the %d bytes declared", c, rec.GetSize())
	case err != nil:
		if ctx.Err() != nil {
			return IntentView{}, apierror.New(apierror.Timeout, "reading %s through the gateway took too long", c)
		}
		return IntentView{}, apierror.New(apierror.BlobUnavailable, "reading %s through the gateway: %v", c, err)
	case d.Size != int64(rec.GetSize()):
		return IntentView{}, apierror.New(apierror.BlobMismatch, "%s holds %d bytes; the intent declared %d", c, d.Size, rec.GetSize())
	case d.ID != blob.ID(rec.GetSha256()):
		return IntentView{}, apierror.New(apierror.BlobMismatch, "%s holds bytes whose SHA-256 is %s; the intent declared %x", c, d.ID, rec.GetSha256())
	}
	err = b.change(ctx, routeChange{
		entry: &ledgerpb.Entry{Op: &ledgerpb.Entry_BlobIntentComplete{BlobIntentComplete: &ledgerpb.BlobIntentComplete{
			Token: token[:], Cid: c.Bytes(), AtMs: b.p.cfg.Now().UnixMilli()}}},
		applied: func() (bool, error) {
			now, err := b.state.Intent(token)
			if err != nil || now == nil {
				return true, err
			}
			rec = now
			return now.GetStatus() != ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD || !b.p.cfg.Now().Before(time.UnixMilli(now.GetExpiresAtMs())), nil
		},
	})
	if err != nil {
		return IntentView{}, err
	}
	if done, err := b.completed(rec, token, c); err != nil || done {
		return answer(rec, err)
	}
	return IntentView{}, apierror.New(apierror.IntentExpired, "intent %x expired before its upload was recorded", token)
}

// answer is rec's view, or err.
func answer(rec *ledgerpb.BlobIntent, err error) (IntentView, error) {
	if err != nil {
		return IntentView{}, err
	}
	return view(rec), nil
}

// completed reports whether rec needs no completion with c (it is
// completed with c), or why it cannot have one.
func (b *Binaries) completed(rec *ledgerpb.BlobIntent, token [32]byte, c cid.Cid) (bool, error) {
	switch {
	case rec == nil:
		return false, apierror.New(apierror.NotFound, "no upload intent %x (never declared, or deleted after its retention)", token)
	case rec.GetStatus() == ledgerpb.IntentStatus_INTENT_COMPLETED:
		if string(rec.GetCid()) == string(c.Bytes()) {
			return true, nil
		}
		return false, apierror.New(apierror.IntentConflict, "intent %x was completed with another CID", token)
	case rec.GetStatus() == ledgerpb.IntentStatus_INTENT_EXPIRED || !b.p.cfg.Now().Before(time.UnixMilli(rec.GetExpiresAtMs())):
		return false, apierror.New(apierror.IntentExpired, "intent %x expired at %s; declare a new one", token,
			time.UnixMilli(rec.GetExpiresAtMs()).UTC().Format(time.RFC3339))
	}
	return false, nil
}

func (b *Binaries) change(ctx context.Context, c routeChange) error {
	return b.p.awaitRoute(ctx, "the upload change", "ask again: repeating it is safe", c)
}

// intentExpiry keys the leader's one expiry change in flight.
type intentExpiry struct{}

// RunExpiry runs on every validator; while it leads, every ExpiryInterval
// it hands the sender a BlobIntentExpire for the intents due (at most
// state.MaxIntentBatch a pass).
func (b *Binaries) RunExpiry(ctx context.Context) {
	tick := time.NewTicker(b.cfg.ExpiryInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if !b.p.raft.IsLeader() {
			continue
		}
		now := b.p.cfg.Now().UnixMilli()
		due, err := b.state.DueIntents(now, state.MaxIntentBatch)
		if err != nil {
			b.log.Warn("reading the intents due", zap.Error(err))
			continue
		}
		if len(due) == 0 {
			continue
		}
		op := &ledgerpb.BlobIntentExpire{AtMs: now}
		for _, t := range due {
			op.Tokens = append(op.Tokens, t[:])
		}
		last := due[len(due)-1]
		b.p.background(ctx, intentExpiry{}, &ledgerpb.Entry{Op: &ledgerpb.Entry_BlobIntentExpire{BlobIntentExpire: op}},
			func() (bool, error) {
				// Applied once the last intent named is no longer due
				// (expired, so due at the end of its retention, or
				// deleted): one pass at a time.
				still, err := b.state.DueIntents(now, state.MaxIntentBatch)
				return !slices.Contains(still, last), err
			})
	}
}
