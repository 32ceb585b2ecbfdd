package eventpub

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
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

// errCodeBatchDuplicate is the JetStream error of an atomic batch that holds
// a message id the stream already stored.
const errCodeBatchDuplicate jetstream.ErrorCode = 10201

// isDuplicate tells whether err refused a batch because the stream already
// held one of its events.
func isDuplicate(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchDuplicate
}

// batcher publishes atomic batches for one attempt. One message, header
// map and body buffer serve every event: a core publication has copied
// them into the connection's buffer when it returns.
type batcher struct {
	js     JetStream
	nc     *nats.Conn
	stream string
	// prefix makes the batch ids of this attempt unique among every
	// publisher's: a batch staged by the server under the same id (one cut
	// short) would otherwise take this attempt's messages.
	prefix string
	n      uint64
	msg    nats.Msg
	body   bytes.Buffer
	enc    *json.Encoder
}

func newBatcher(js JetStream, stream string) (*batcher, error) {
	nc := js.Conn()
	if nc == nil {
		return nil, errors.New("eventpub: JetStream context without a connection")
	}
	b := &batcher{js: js, nc: nc, stream: stream, prefix: rand.Text()[:16] + "-"}
	b.msg.Header = nats.Header{}
	b.enc = json.NewEncoder(&b.body)
	return b, nil
}

// publish sends evs as one atomic batch that the server stores only if
// the stream's last sequence is lastSeq, and returns the batch's ack: the
// sequence of its last message.
//
// Every message carries its event id and its place in the batch; the first
// one the expected stream and last sequence, the last one the commit. The
// messages before the commit go without a reply subject, so the server
// sends nothing for them; the commit waits for the ack.
func (b *batcher) publish(ctx context.Context, evs []*ledgerpb.Event, lastSeq uint64) (*jetstream.PubAck, error) {
	b.n++
	id := b.prefix + strconv.FormatUint(b.n, 10)
	h := b.msg.Header
	for i, ev := range evs {
		if err := b.encode(ev); err != nil {
			return nil, err
		}
		setHeader(h, jetstream.MsgIDHeader, MsgID(ev.GetId()))
		setHeader(h, BatchIDHeader, id)
		setHeader(h, BatchSeqHeader, strconv.Itoa(i+1))
		switch i {
		case 0:
			setHeader(h, jetstream.ExpectedStreamHeader, b.stream)
			setHeader(h, jetstream.ExpectedLastSeqHeader, strconv.FormatUint(lastSeq, 10))
		case 1:
			// The server takes an expected last sequence on the first
			// message of a batch only.
			delete(h, jetstream.ExpectedStreamHeader)
			delete(h, jetstream.ExpectedLastSeqHeader)
		}
		b.msg.Subject, b.msg.Reply = Subject(ev), ""
		if i < len(evs)-1 {
			delete(h, BatchCommitHeader)
			if err := b.nc.PublishMsg(&b.msg); err != nil {
				return nil, fmt.Errorf("eventpub: publish event %d: %w", ev.GetId(), err)
			}
			continue
		}
		setHeader(h, BatchCommitHeader, "1")
		ack, err := b.js.PublishMsg(ctx, &b.msg)
		if err != nil {
			return nil, fmt.Errorf("eventpub: batch of events %d to %d: %w", evs[0].GetId(), ev.GetId(), err)
		}
		return ack, nil
	}
	return nil, errors.New("eventpub: empty batch")
}

// encode writes the api.Event JSON of ev, the same as the SSE data line,
// into the message body.
func (b *batcher) encode(ev *ledgerpb.Event) error {
	b.body.Reset()
	if err := b.enc.Encode(api.EventOf(ev)); err != nil {
		return fmt.Errorf("eventpub: encode event %d: %w", ev.GetId(), err)
	}
	// Encode ends the value with a newline, which json.Marshal does not.
	b.msg.Data = bytes.TrimSuffix(b.body.Bytes(), []byte{'\n'})
	return nil
}

// setHeader sets a single-valued header, reusing its value slice.
func setHeader(h nats.Header, key, value string) {
	if vs := h[key]; len(vs) == 1 {
		vs[0] = value
		return
	}
	h[key] = []string{value}
}
