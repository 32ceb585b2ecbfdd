package eventpub_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/services/validator/internal/eventpub"
)

// hookedJS is a JetStream context whose batch commits (the publications
// that wait for an ack) go through before first: an error it returns is the
// publication's, and the commit is not sent.
type hookedJS struct {
	jetstream.JetStream
	mu     sync.Mutex
	calls  int
	before func(call int, m *nats.Msg) error
}

func (h *hookedJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	h.mu.Lock()
	h.calls++
	call := h.calls
	h.mu.Unlock()
	if err := h.before(call, m); err != nil {
		return nil, err
	}
	return h.JetStream.PublishMsg(ctx, m, opts...)
}

// refused tells whether err is the stream's refusal of a publication.
func refused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr)
}

// copyMsg copies m: the publisher reuses its message.
func copyMsg(m *nats.Msg) *nats.Msg {
	h := nats.Header{}
	for k, vs := range m.Header {
		h[k] = slices.Clone(vs)
	}
	return &nats.Msg{Subject: m.Subject, Header: h, Data: slices.Clone(m.Data)}
}

// TestInterruptedBatchIsNotStored: the messages of a batch reach the server
// but its commit does not (the connection failed); the server stores none
// of them, the publisher resumes from the stream and publishes each event
// once, and the lost commit, arriving late, is refused.
func TestInterruptedBatchIsNotStored(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	held := make(chan *nats.Msg, 1)
	hooked := &hookedJS{JetStream: connect(t, s), before: func(call int, m *nats.Msg) error {
		if call == 1 {
			held <- copyMsg(m)
			return errors.New("connection lost")
		}
		return nil
	}}
	log := newEventLog()
	log.add(20)
	p := newPublisher(t, hooked, log, newLeader(true))
	run(t, p)
	commit := <-held
	if got := commit.Header.Get(eventpub.BatchSeqHeader); got != "8" || commit.Header.Get(eventpub.BatchCommitHeader) != "1" {
		t.Fatalf("first commit is message %q of its batch, commit %q; want the 8th of a window", got, commit.Header.Get(eventpub.BatchCommitHeader))
	}
	waitIDs(t, js, span(1, 20))
	waitFor(t, "status caught up", func() bool { return p.Status().LastPublishedID == 20 })
	if st := p.Status(); st.Published != 20 || st.Resumptions != 2 || st.LastError == "" {
		t.Fatalf("status %+v", st)
	}

	ack, err := js.PublishMsg(context.Background(), commit)
	if !refused(err) {
		t.Fatalf("late commit of the interrupted batch: ack %+v, error %v; want refused by the stream", ack, err)
	}
	if msgs := readStream(t, js); len(msgs) != 20 || !slices.Equal(ids(msgs), span(1, 20)) {
		t.Fatalf("after the late commit the stream holds %v", ids(msgs))
	}
}

// TestMessageBetweenBatchesRefusesTheNext: another publisher stores a
// message while a batch is on its way; the batch no longer finds the last
// sequence it expects and is refused whole, and the publisher resumes after
// its last stored event: every event once, in order, around the foreign
// message.
func TestMessageBetweenBatchesRefusesTheNext(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	other := connect(t, s)
	hooked := &hookedJS{JetStream: connect(t, s), before: func(call int, _ *nats.Msg) error {
		if call == 2 {
			_, err := other.Publish(context.Background(), "ledger.events.other._", []byte("{}"))
			return err
		}
		return nil
	}}
	log := newEventLog()
	log.add(20)
	p := newPublisher(t, hooked, log, newLeader(true))
	run(t, p)
	msgs := waitIDs(t, js, span(1, 20))
	if len(msgs) != 21 || msgs[8].msgID != "" || msgs[8].subject != "ledger.events.other._" {
		t.Fatalf("stream %+v", msgs)
	}
	waitFor(t, "status caught up", func() bool { return p.Status().LastPublishedID == 20 })
	if st := p.Status(); st.Published != 20 || st.Resumptions != 2 {
		t.Fatalf("status %+v", st)
	}
}

// TestStaleLeaderBatchIsRefused: a leader's batch is delayed (its commit
// held back) while a new leader publishes the same events and more; when
// the old batch arrives it is refused, and the stream holds each event once.
func TestStaleLeaderBatchIsRefused(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	arrived, release := make(chan struct{}), make(chan struct{})
	var stale struct {
		ack *jetstream.PubAck
		err error
	}
	oldJS := connect(t, s)
	hooked := &hookedJS{JetStream: oldJS, before: func(call int, m *nats.Msg) error {
		if call != 1 {
			return nil
		}
		close(arrived)
		<-release
		stale.ack, stale.err = oldJS.PublishMsg(context.Background(), m)
		return errors.New("delayed")
	}}
	logA, logB := newEventLog(), newEventLog()
	logA.add(5)
	logB.add(5)
	leadA := newLeader(true)
	a := newPublisher(t, hooked, logA, leadA)
	run(t, a)
	<-arrived
	b := newPublisher(t, connect(t, s), logB, newLeader(true))
	run(t, b)
	logB.add(3)
	waitIDs(t, js, span(1, 8))
	close(release)
	waitFor(t, "old leader's attempt ended", func() bool { return a.Status().LastError != "" })
	if !refused(stale.err) {
		t.Fatalf("stale batch: ack %+v, error %v; want refused by the stream", stale.ack, stale.err)
	}
	leadA.set(false)
	if msgs := readStream(t, js); len(msgs) != 8 || !slices.Equal(ids(msgs), span(1, 8)) {
		t.Fatalf("stream holds %v", ids(msgs))
	}
}

// TestStoredMessagesCarryTheirBatch: consumers see each message's batch
// headers next to its id; the expectation is on the first of each batch.
func TestStoredMessagesCarryTheirBatch(t *testing.T) {
	s := startNATS(t)
	js := connect(t, s)
	log := newEventLog()
	log.add(10)
	run(t, newPublisher(t, js, log, newLeader(true)))
	waitIDs(t, js, span(1, 10))
	stream, err := js.Stream(context.Background(), eventpub.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	var batches []string
	for seq := uint64(1); seq <= 10; seq++ {
		m, err := stream.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		id, bseq := m.Header.Get(eventpub.BatchIDHeader), m.Header.Get(eventpub.BatchSeqHeader)
		if id == "" || bseq == "" {
			t.Fatalf("message %d headers %v", seq, maps.Collect(maps.All(m.Header)))
		}
		first := bseq == "1"
		if first != (m.Header.Get(jetstream.ExpectedLastSeqHeader) != "") {
			t.Fatalf("message %d (batch position %s) headers %v", seq, bseq, m.Header)
		}
		if first {
			batches = append(batches, id)
		}
	}
	// A window of 8 events, then the 2 left.
	if len(batches) != 2 || batches[0] == batches[1] {
		t.Fatalf("batches %v", batches)
	}
}
