package publish

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/payment"
)

// Headers of JetStream atomic batch publication (nats-server 2.12 and
// later). The server keeps them on the stored messages.
const (
	BatchIDHeader     = "Nats-Batch-Id"
	BatchSeqHeader    = "Nats-Batch-Sequence"
	BatchCommitHeader = "Nats-Batch-Commit"
)

// MaxBatch is the most messages a server takes in one atomic batch unless
// its jetstream limits say otherwise (max_batch_size).
const MaxBatch = 1000

// minBatch is the fewest logs sent as an atomic batch: the server stages
// each batch in a store of its own, created and removed per batch, which
// costs more than a lone message's write.
const minBatch = 2

// commitTimeout bounds the wait for a batch's acknowledgement when the
// context has no deadline. A batch cut short is dropped by the server after
// 10 s without a message, so waiting longer for its ack gains nothing.
const commitTimeout = 10 * time.Second

// JetStream error codes of atomic batch publication (nats-server's
// jetstream_errors_generated.go; nats.go has no constants for them).
const (
	// The batch holds a message id the stream already stored, or holds one
	// twice: nothing of it is stored.
	errCodeBatchDuplicate jetstream.ErrorCode = 10201
	// A message id is being stored by another publication (clustered).
	errCodeDuplicateInProcess jetstream.ErrorCode = 10158
	// The stream does not allow atomic publication.
	errCodeAtomicDisabled jetstream.ErrorCode = 10174
	// The batch is larger than the server's max_batch_size.
	errCodeBatchTooLarge jetstream.ErrorCode = 10199
	// The stream or the server has too many open batches.
	errCodeTooManyBatches jetstream.ErrorCode = 10210
)

// ErrAtomicUnavailable is returned, once per Publisher, when atomic batch
// publication turns out to be unavailable: the stream does not allow it (an
// older watcher declared it), or the server is older than 2.12. Nothing of
// the refused batch was stored, and the Publisher publishes one message at
// a time from then on: the caller logs it and publishes the rest again.
var ErrAtomicUnavailable = errors.New("publish: atomic batch publication unavailable")

// Log is one payment contract log to publish: exactly one of Payment and
// Debt is set.
type Log struct {
	Payment *payment.ProposalPaid
	Debt    *payment.DebtPaid
	// Generation counts the retractions of the log's block published
	// before this message: 0 for a first publication. A block that a reorg
	// dropped and the chain then took back is published again under new
	// ids (generation 1, 2, …), which the stream's deduplication of the
	// earlier ones does not swallow.
	Generation uint32
}

// PaymentLog is the Log of a ProposalPaid log.
func PaymentLog(p payment.ProposalPaid) Log { return Log{Payment: &p} }

// DebtLog is the Log of a DebtPaid log.
func DebtLog(d payment.DebtPaid) Log { return Log{Debt: &d} }

// MsgID is the log's Nats-Msg-Id: the payment's own (ADR 0023),
// <chainId>:<blockHash>:<logIndex>, with ":removed" for a retraction. From
// generation 1 on, ":g<generation>" follows the log index (before
// ":removed"), so that every publication of a re-adopted block and every
// retraction of it has an id of its own, while a publication repeated in
// the same generation (after a crash) keeps its id and is deduplicated.
func (l Log) MsgID() string {
	var id string
	removed := l.Removed()
	switch {
	case l.Generation == 0 && l.Debt != nil:
		return l.Debt.MsgID()
	case l.Generation == 0:
		return l.Payment.MsgID()
	case l.Debt != nil:
		d := *l.Debt
		d.Removed = false
		id = d.MsgID()
	default:
		p := *l.Payment
		p.Removed = false
		id = p.MsgID()
	}
	id += ":g" + strconv.FormatUint(uint64(l.Generation), 10)
	if removed {
		id += ":removed"
	}
	return id
}

// Removed tells whether the log is a retraction.
func (l Log) Removed() bool {
	if l.Debt != nil {
		return l.Debt.Removed
	}
	return l.Payment.Removed
}

// message returns the subject, the message id and the encoded body of l.
// The body is the log's alone: the generation is in the id only.
func (l Log) message() (subject, msgID string, data []byte, err error) {
	var m proto.Message
	switch {
	case l.Debt != nil:
		subject, msgID, m = payment.DebtSubject(l.Debt.ChainID), l.MsgID(), l.Debt.Proto()
	case l.Payment != nil:
		subject, msgID, m = payment.Subject(l.Payment.ChainID), l.MsgID(), l.Payment.Proto()
	default:
		return "", "", nil, errors.New("publish: empty log")
	}
	data, err = proto.Marshal(m)
	if err != nil {
		return "", "", nil, fmt.Errorf("publish: encode %s: %w", msgID, err)
	}
	return subject, msgID, data, nil
}

// PublishLogs publishes logs in their order and returns once the stream has
// acknowledged every one, with one Result per log. On an error it returns
// the results of the logs acknowledged before it, a prefix of logs.
//
// The logs go as JetStream atomic batches of up to MaxBatch (fewer when the
// server's max_batch_size is lower), one at a time, each waiting for its
// acknowledgement: the server stores a batch whole and contiguously at its
// commit, or not at all, and syncs it once. So the stream holds the logs in
// the order given, as one-by-one publication would, for far fewer syncs and
// round trips. A batch holding a message id the stream already has is
// refused whole (the server takes no part of it); its logs are then
// published one at a time, where the stream's deduplication acknowledges
// the stored ones as duplicates and stores the others, still in order.
func (p *Publisher) PublishLogs(ctx context.Context, logs []Log) ([]Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Result, 0, len(logs))
	for len(out) < len(logs) {
		rest := logs[len(out):]
		n := min(len(rest), p.maxBatch)
		if p.nc == nil || p.atomicOff || n < minBatch {
			res, err := p.publishLog(ctx, rest[0])
			if err != nil {
				return out, err
			}
			out = append(out, res)
			continue
		}
		if err := p.checkServer(); err != nil {
			return out, err
		}
		res, err := p.publishBatch(ctx, rest[:n])
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			out = append(out, res...)
		case errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeBatchDuplicate || apiErr.ErrorCode == errCodeDuplicateInProcess ||
			apiErr.ErrorCode == errCodeTooManyBatches):
			// Nothing of the batch was stored: publish it one log at a
			// time, which the deduplication absorbs.
			for _, l := range rest[:n] {
				res, err := p.publishLog(ctx, l)
				if err != nil {
					return out, err
				}
				out = append(out, res)
			}
		case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchTooLarge:
			p.maxBatch = smallerBatch(apiErr.Description, n)
		case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeAtomicDisabled:
			p.atomicOff = true
			return out, fmt.Errorf("%w: stream %s does not allow it (declared by an older watcher?): %w", ErrAtomicUnavailable, p.stream, err)
		default:
			return out, err
		}
	}
	return out, nil
}

// checkServer turns atomic publication off, once, when the connected
// server predates it: such a server would store a batch's messages one by
// one as they arrive, and acknowledge only the last.
func (p *Publisher) checkServer() error {
	v := p.nc.ConnectedServerVersion()
	if v == "" || atLeast(v, 2, 12) {
		// Unknown (not connected): the publication fails or waits as any
		// other would.
		return nil
	}
	p.atomicOff = true
	return fmt.Errorf("%w: nats-server %s is older than 2.12", ErrAtomicUnavailable, v)
}

// atLeast tells whether the version v ("2.15.2", maybe with a suffix) is
// major.minor or later.
func atLeast(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// smallerBatch is the server's limit named in its refusal ("atomic publish
// batch is too large: 100"), or half of n when it names none.
func smallerBatch(description string, n int) int {
	if i := strings.LastIndexByte(description, ':'); i >= 0 {
		if limit, err := strconv.Atoi(strings.TrimSpace(description[i+1:])); err == nil && limit >= 1 && limit < n {
			return limit
		}
	}
	return max(n/2, 1)
}

// publishLog publishes one log on its own, under its id (generation
// included), like Publish and PublishDebt.
func (p *Publisher) publishLog(ctx context.Context, l Log) (Result, error) {
	subject, msgID, data, err := l.message()
	if err != nil {
		return Result{}, err
	}
	what := "payment"
	if l.Debt != nil {
		what = "debt payment"
	}
	return p.send(ctx, what, subject, msgID, data)
}

// batchAck is the server's answer to a batch's commit.
type batchAck struct {
	Stream   string `json:"stream"`
	Sequence uint64 `json:"seq"`
	Batch    string `json:"batch"`
	Count    int    `json:"count"`
	Error    *struct {
		Code        int                 `json:"code"`
		ErrorCode   jetstream.ErrorCode `json:"err_code"`
		Description string              `json:"description"`
	} `json:"error"`
}

// publishBatch sends logs as one atomic batch and returns their results.
//
// Every message carries its message id, the expected stream (a misrouted
// subject refuses the whole batch) and its place in the batch; the last one
// the commit. The messages before the commit go without a reply subject, so
// the server sends nothing for them; the commit waits for the ack, which
// names the sequence of the batch's last message. No expected last sequence:
// epoch updates and a second watcher write into the stream too, and the
// message ids, not the stream's end, are what keeps each log once.
func (p *Publisher) publishBatch(ctx context.Context, logs []Log) ([]Result, error) {
	p.batches++
	id := p.batchPrefix + strconv.FormatUint(p.batches, 10)
	msg := &p.msg
	h := msg.Header
	setHeader(h, BatchIDHeader, id)
	setHeader(h, jetstream.ExpectedStreamHeader, p.stream)
	delete(h, BatchCommitHeader)
	msg.Reply = ""
	for i, l := range logs {
		subject, msgID, data, err := l.message()
		if err != nil {
			return nil, err
		}
		msg.Subject, msg.Data = subject, data
		setHeader(h, jetstream.MsgIDHeader, msgID)
		setHeader(h, BatchSeqHeader, strconv.Itoa(i+1))
		if i < len(logs)-1 {
			// Copied into the connection's buffer before it returns, so
			// the one message serves every log.
			if err := p.nc.PublishMsg(msg); err != nil {
				return nil, fmt.Errorf("publish: batch %s, %s: %w", id, msgID, err)
			}
			continue
		}
		setHeader(h, BatchCommitHeader, "1")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, commitTimeout)
		defer cancel()
	}
	first, last := logs[0].MsgID(), logs[len(logs)-1].MsgID()
	resp, err := p.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("publish: batch %s of %d logs %s to %s: %w", id, len(logs), first, last, err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return nil, fmt.Errorf("publish: batch %s: unreadable acknowledgement %q: %w", id, resp.Data, err)
	}
	if ack.Error != nil {
		return nil, fmt.Errorf("publish: batch %s of %d logs %s to %s: %w", id, len(logs), first, last,
			&jetstream.APIError{Code: ack.Error.Code, ErrorCode: ack.Error.ErrorCode, Description: ack.Error.Description})
	}
	if ack.Stream != p.stream {
		return nil, fmt.Errorf("%w: %s, want %s", ErrWrongStream, ack.Stream, p.stream)
	}
	if ack.Batch != id || ack.Count != len(logs) || ack.Sequence < uint64(len(logs)) {
		return nil, p.notAtomic(ack)
	}
	out := make([]Result, len(logs))
	for i := range out {
		// Stored contiguously, ending at the ack's sequence.
		out[i] = Result{Sequence: ack.Sequence - uint64(len(logs)-1-i)}
	}
	return out, nil
}

// notAtomic handles a commit acknowledged as a plain message: a server that
// does not know atomic batches (a cluster node older than 2.12 leading the
// stream) stored the messages one by one. Atomic publication is turned off,
// and the caller publishes the logs again one at a time: the deduplication
// acknowledges those stored, and stores any the server lost on the way.
func (p *Publisher) notAtomic(ack batchAck) error {
	p.atomicOff = true
	return fmt.Errorf("%w: the batch's commit was acknowledged as a single message (stream %s, sequence %d, batch %q of %d)",
		ErrAtomicUnavailable, ack.Stream, ack.Sequence, ack.Batch, ack.Count)
}

// newBatchPrefix makes this publisher's batch ids unique among every
// publisher's: a batch staged by the server under the same id (one cut
// short) would otherwise take this publisher's messages. Ids stay well
// under the server's 64 characters.
func newBatchPrefix() string { return rand.Text()[:16] + "-" }

// setHeader sets a single-valued header, reusing its value slice.
func setHeader(h nats.Header, key, value string) {
	if vs := h[key]; len(vs) == 1 {
		vs[0] = value
		return
	}
	h[key] = []string{value}
}
