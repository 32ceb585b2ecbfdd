package state

// Binary upload intents and blob mappings (docs/adr/0037)
//
// An intent is declared READY_FOR_UPLOAD, then COMPLETED by a CID the
// proposer checked through its gateway, or EXPIRED by the leader once its
// expiry passed; a completed or expired intent stays readable for its
// retention and is then deleted. Every intent has exactly one due key
// (s/e/<due><token>) at any time: its expiry while open, its deletion
// after. The leader reads the front of that range and proposes
// BlobIntentExpire for what is due; apply checks each due time against
// the entry's at_ms, so a stale or repeated entry changes nothing. Nothing
// here reads a clock: every time comes from the entry.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// EventActionUpload is the binary event of a completed upload (its mapping
// recorded); a write that references a CID emits EventActionWrite.
const EventActionUpload = "upload"

// MaxIntentBatch bounds the tokens one BlobIntentExpire names.
const MaxIntentBatch = 256

func (a *applier) declareIntent(index uint64, op *ledgerpb.BlobIntentDeclare) error {
	if len(op.GetToken()) != 32 || len(op.GetWallet()) != 20 || len(op.GetSha256()) != 32 ||
		op.GetExpiresAtMs() <= op.GetAtMs() || op.GetAtMs() < 0 || op.GetRetainMs() < 0 || op.GetMaxOpen() == 0 {
		a.log.Warn("skipping a malformed intent declaration", zap.Uint64("index", index))
		return nil
	}
	token, wallet := [32]byte(op.GetToken()), [20]byte(op.GetWallet())
	prev, err := getIntent(a.b, token)
	if err != nil || prev != nil {
		return err // a repeat names the intent it made
	}
	open, err := countOpenIntents(a.b, wallet, int(op.GetMaxOpen()))
	if err != nil || open >= int(op.GetMaxOpen()) {
		return err // the proposer checked; a race between two declarations ends here
	}
	rec := &ledgerpb.BlobIntent{
		Token: op.GetToken(), Wallet: op.GetWallet(), Size: op.GetSize(), MimeType: op.GetMimeType(),
		Sha256: op.GetSha256(), Status: ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD,
		DeclaredAtMs: op.GetAtMs(), ExpiresAtMs: op.GetExpiresAtMs(), RetainMs: op.GetRetainMs(), DeclareIndex: index,
	}
	if err := a.put(storage.IntentKey(token), rec); err != nil {
		return err
	}
	if err := a.mut.set(storage.OpenIntentKey(wallet, token), nil); err != nil {
		return err
	}
	return a.mut.set(storage.IntentDueKey(uint64(rec.GetExpiresAtMs()), token), nil)
}

func (a *applier) completeIntent(index uint64, op *ledgerpb.BlobIntentComplete) error {
	if len(op.GetToken()) != 32 {
		return nil
	}
	token := [32]byte(op.GetToken())
	rec, err := getIntent(a.b, token)
	if err != nil || rec == nil || rec.GetStatus() != ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD ||
		op.GetAtMs() >= rec.GetExpiresAtMs() {
		return err // unknown, done, or expired: the proposer answers so
	}
	c, err := blob.CIDFromBytes(op.GetCid())
	if err != nil {
		a.log.Warn("skipping an intent completion with a malformed CID", zap.Uint64("index", index))
		return nil
	}
	if err := a.closeIntent(rec, ledgerpb.IntentStatus_INTENT_COMPLETED, op.GetAtMs()); err != nil {
		return err
	}
	rec.Cid = op.GetCid()
	if err := a.put(storage.IntentKey(token), rec); err != nil {
		return err
	}
	id := [32]byte(rec.GetSha256())
	mapping, err := getBlob(a.b, id)
	if err != nil {
		return err
	}
	if mapping == nil {
		mapping = &ledgerpb.BlobMapping{Sha256: rec.GetSha256(), Cid: op.GetCid(), Size: rec.GetSize(),
			MimeType: rec.GetMimeType(), Wallet: rec.GetWallet(), Index: index, AtMs: op.GetAtMs()}
		if err := a.put(storage.BlobKey(id), mapping); err != nil {
			return err
		}
		if err := a.addBlobTotals(mapping.GetSize()); err != nil {
			return err
		}
	}
	if _, err := storage.Get(a.b, storage.BlobCIDKey(op.GetCid())); errors.Is(err, storage.ErrNotFound) {
		if err := a.mut.set(storage.BlobCIDKey(op.GetCid()), rec.GetSha256()); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	ev := opEvent(EventTypeBinary, EventActionUpload, rec.GetWallet(), index, op.GetAtMs())
	ev.CasCid = c.String()
	ev.BlobId = hex.EncodeToString(rec.GetSha256())
	return a.emit(ev)
}

func (a *applier) expireIntents(index uint64, op *ledgerpb.BlobIntentExpire) error {
	if len(op.GetTokens()) > MaxIntentBatch {
		a.log.Warn("skipping an intent expiry naming too many intents", zap.Uint64("index", index))
		return nil
	}
	at := op.GetAtMs()
	for _, t := range op.GetTokens() {
		if len(t) != 32 {
			continue
		}
		token := [32]byte(t)
		rec, err := getIntent(a.b, token)
		if err != nil {
			return err
		}
		switch {
		case rec == nil:
		case rec.GetStatus() == ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD && rec.GetExpiresAtMs() <= at:
			if err := a.closeIntent(rec, ledgerpb.IntentStatus_INTENT_EXPIRED, at); err != nil {
				return err
			}
			if err := a.put(storage.IntentKey(token), rec); err != nil {
				return err
			}
		case rec.GetStatus() != ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD && intentDue(rec) <= uint64(max(at, 0)):
			if err := a.mut.delete(storage.IntentDueKey(intentDue(rec), token)); err != nil {
				return err
			}
			if err := a.mut.delete(storage.IntentKey(token)); err != nil {
				return err
			}
		}
	}
	return nil
}

// closeIntent ends an open intent with status at atMs: it is no longer
// counted as open, and its due key moves from its expiry to its deletion.
// The caller stores rec.
func (a *applier) closeIntent(rec *ledgerpb.BlobIntent, status ledgerpb.IntentStatus, atMs int64) error {
	token, wallet := [32]byte(rec.GetToken()), [20]byte(rec.GetWallet())
	if err := a.mut.delete(storage.OpenIntentKey(wallet, token)); err != nil {
		return err
	}
	if err := a.mut.delete(storage.IntentDueKey(intentDue(rec), token)); err != nil {
		return err
	}
	rec.Status, rec.DoneAtMs = status, atMs
	return a.mut.set(storage.IntentDueKey(intentDue(rec), token), nil)
}

// intentDue is the time the intent's due key names: its expiry while
// open, its deletion after.
func intentDue(rec *ledgerpb.BlobIntent) uint64 {
	if rec.GetStatus() == ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD {
		return uint64(max(rec.GetExpiresAtMs(), 0))
	}
	return uint64(max(rec.GetDoneAtMs(), 0)) + uint64(max(rec.GetRetainMs(), 0))
}

func (a *applier) addBlobTotals(size uint64) error {
	count, total, err := blobTotals(a.b)
	if err != nil {
		return err
	}
	var v [16]byte
	binary.BigEndian.PutUint64(v[:8], count+1)
	binary.BigEndian.PutUint64(v[8:], total+size)
	return a.mut.set([]byte(storage.BlobTotalsKey), v[:])
}

// resolveIntents replaces each ledger:intent property of the nodes a write
// makes with the ledger:cid its upload recorded. It reports false, and the
// write is rejected, when an intent named is not a completed upload of the
// writing wallet, or the node also names another CID. Properties stay
// sorted: no name a client may write sorts between ledger:cid and
// ledger:intent.
func (a *applier) resolveIntents(specs []proposal.NodeSpec, wallet []byte) (bool, error) {
	for i := range specs {
		props := specs[i].Properties
		at := slices.IndexFunc(props, func(p proposal.Property) bool { return p.Name == proposal.IntentProperty })
		if at < 0 {
			continue
		}
		token, ok := proposal.IntentToken(props[at].ValueJSON)
		if !ok {
			return false, nil
		}
		rec, err := getIntent(a.b, token)
		if err != nil || rec == nil || rec.GetStatus() != ledgerpb.IntentStatus_INTENT_COMPLETED || !bytes.Equal(rec.GetWallet(), wallet) {
			return false, err
		}
		c, err := blob.CIDFromBytes(rec.GetCid())
		if err != nil {
			return false, nil
		}
		value := `"` + c.String() + `"`
		if at > 0 && props[at-1].Name == proposal.CIDProperty {
			if props[at-1].ValueJSON != value {
				return false, nil
			}
			specs[i].Properties = slices.Delete(props, at, at+1)
			continue
		}
		props[at] = proposal.Property{Name: proposal.CIDProperty, ValueJSON: value}
	}
	return true, nil
}

// blobIDOfCID returns the blob id a CID's text names, if a completed
// intent mapped it.
func blobIDOfCID(r pebble.Reader, text string) (string, error) {
	c, err := blob.ParseCID(text)
	if err != nil {
		return "", nil // intake refused such CIDs; an old entry's is not mapped
	}
	v, err := storage.Get(r, storage.BlobCIDKey(c.Bytes()))
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(v), nil
}

func getIntent(r pebble.Reader, token [32]byte) (*ledgerpb.BlobIntent, error) {
	return getMessage[*ledgerpb.BlobIntent](r, storage.IntentKey(token), "intent "+hex.EncodeToString(token[:]))
}

func getBlob(r pebble.Reader, id [32]byte) (*ledgerpb.BlobMapping, error) {
	return getMessage[*ledgerpb.BlobMapping](r, storage.BlobKey(id), "blob "+hex.EncodeToString(id[:]))
}

func countOpenIntents(r pebble.Reader, wallet [20]byte, limit int) (int, error) {
	lower, upper := storage.OpenIntentBounds(wallet)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok && n < limit; ok = it.Next() {
		n++
	}
	return n, errors.Join(it.Error(), it.Close())
}

func blobTotals(r pebble.Reader) (count, size uint64, err error) {
	v, err := storage.Get(r, []byte(storage.BlobTotalsKey))
	if errors.Is(err, storage.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 16 {
		return 0, 0, ErrCorruptState
	}
	return binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:]), nil
}

// Intent returns the upload intent with token, nil when there is none (or
// no longer: it was deleted after its retention).
func (m *Machine) Intent(token [32]byte) (*ledgerpb.BlobIntent, error) {
	return getIntent(m.db.Pebble(), token)
}

// OpenIntents counts wallet's open intents, up to limit.
func (m *Machine) OpenIntents(wallet [20]byte, limit int) (int, error) {
	return countOpenIntents(m.db.Pebble(), wallet, limit)
}

// DueIntents returns, oldest first, at most limit intents due at or
// before nowMs: to expire, or to delete.
func (m *Machine) DueIntents(nowMs int64, limit int) ([][32]byte, error) {
	lower, upper := storage.IntentDueBounds(uint64(max(nowMs, 0)))
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	var due [][32]byte
	for ok := it.First(); ok && len(due) < limit; ok = it.Next() {
		if _, token, ok := storage.ParseIntentDueKey(it.Key()); ok {
			due = append(due, token)
		}
	}
	return due, errors.Join(it.Error(), it.Close())
}

// Blob returns the mapping of blob id, nil when there is none.
func (m *Machine) Blob(id blob.ID) (*ledgerpb.BlobMapping, error) {
	return getBlob(m.db.Pebble(), id)
}

// BlobOfCID returns the blob id a completed intent mapped a CID (binary
// form) to.
func (m *Machine) BlobOfCID(cid []byte) (id blob.ID, ok bool, err error) {
	v, err := storage.Get(m.db.Pebble(), storage.BlobCIDKey(cid))
	if errors.Is(err, storage.ErrNotFound) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	if len(v) != len(id) {
		return id, false, ErrCorruptState
	}
	return blob.ID(v), true, nil
}

// BlobTotals returns the number of blob mappings and their total size.
func (m *Machine) BlobTotals() (count, size uint64, err error) { return blobTotals(m.db.Pebble()) }
