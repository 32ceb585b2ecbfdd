package payments

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// memStore is a CheckpointStore in memory.
type memStore struct {
	mu    sync.Mutex
	data  []byte
	saves int
}

func (s *memStore) Load() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data), nil
}

func (s *memStore) Save(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data, s.saves = bytes.Clone(b), s.saves+1
	return nil
}

// sampleIndex holds a payment, a re-mined payment with its retraction, a
// retraction alone and a debt payment, as consumed through seq 9.
func sampleIndex() *Index {
	ix := NewIndex()
	ix.Observe(paidAt(1, 10))
	ix.Observe(retracted(paidAt(2, 11)))
	remined := paidAt(2, 12)
	ix.Observe(remined)
	ix.Observe(retracted(paidAt(3, 13)))
	ix.ObserveDebt(debtAt(1, 14))
	ix.consumedThrough(9, time.Unix(1_700_000_000, 123))
	return ix
}

func encoded(t testing.TB, ix *Index) []byte {
	t.Helper()
	cp, ok := ix.snapshot()
	if !ok {
		t.Fatal("no snapshot of an index that consumed messages")
	}
	b, err := cp.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckpointRoundTrip(t *testing.T) {
	src := sampleIndex()
	cp, err := decodeCheckpoint(encoded(t, src))
	if err != nil {
		t.Fatal(err)
	}
	got := NewIndex()
	got.restore(cp)
	if s, want := got.Stats(), src.Stats(); s.Consumed != 9 || s.Indexed != want.Indexed || s.Retracted != want.Retracted || s.Debts != want.Debts {
		t.Fatalf("restored %+v, from %+v", s, want)
	}
	for _, n := range []uint64{1, 2} {
		want, _ := src.Lookup(paidAt(n, 0).ProposalID)
		if p, ok := got.Lookup(want.ProposalID); !ok || p.BlockHash != want.BlockHash || p.Amount.Cmp(want.Amount) != 0 || p.Payer != want.Payer {
			t.Errorf("payment %d restored as %+v", n, p)
		}
		tx := want.TxHash
		if a, b := got.Transaction(tx), src.Transaction(tx); len(a) != len(b) || a[0].ObservedAt != b[0].ObservedAt {
			t.Errorf("transaction %d: %+v, want %+v", n, a, b)
		}
	}
	for _, n := range []uint64{2, 3} {
		want, _ := src.Retracted(paidAt(n, 0).ProposalID)
		if x, ok := got.Retracted(want.ProposalID); !ok || x.BlockHash != want.BlockHash || !x.Removed {
			t.Errorf("retraction %d restored as %+v %v", n, x, ok)
		}
	}
	if d := got.Debts(); len(d) != 1 || d[0].TxHash != debtAt(1, 14).TxHash {
		t.Errorf("debts restored as %+v", d)
	}
	if !bytes.Equal(encoded(t, got), encoded(t, src)) {
		t.Error("a restored index checkpoints differently")
	}
}

func TestCheckpointRefusesDamage(t *testing.T) {
	good := encoded(t, sampleIndex())
	damaged := map[string][]byte{
		"empty":      nil,
		"truncated":  good[:len(good)-1],
		"flipped":    append(append([]byte(nil), good[:20]...), append([]byte{good[20] ^ 1}, good[21:]...)...),
		"no header":  append([]byte("XXXX"), good[4:]...),
		"trailing":   append(bytes.Clone(good), 0),
		"wrong sums": append(bytes.Clone(good[:len(good)-4]), 0, 0, 0, 0),
	}
	for name, b := range damaged {
		if _, err := decodeCheckpoint(b); !errors.Is(err, ErrMalformedCheckpoint) {
			t.Errorf("%s: decoded (err %v)", name, err)
		}
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(encoded(f, sampleIndex()))
	f.Add(encoded(f, NewIndexConsumed()))
	good := encoded(f, sampleIndex())
	f.Add(good[:len(good)-4]) // the body: the target appends the checksum
	f.Add([]byte(checkpointMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		// As is, and with its checksum made right: otherwise hardly any
		// mutation gets past the checksum to the records.
		for _, b := range [][]byte{data, binary.BigEndian.AppendUint32(bytes.Clone(data), crc32.Checksum(data, castagnoli))} {
			fuzzOneCheckpoint(t, b)
		}
	})
}

func fuzzOneCheckpoint(t *testing.T, data []byte) {
	{
		cp, err := decodeCheckpoint(data)
		if err != nil {
			if !errors.Is(err, ErrMalformedCheckpoint) {
				t.Fatalf("error not wrapping ErrMalformedCheckpoint: %v", err)
			}
			return
		}
		// What decodes restores, and checkpoints again to what decodes
		// the same.
		ix := NewIndex()
		ix.restore(cp)
		again, err := decodeCheckpoint(encoded(t, ix))
		if err != nil {
			t.Fatalf("a restored checkpoint does not decode again: %v", err)
		}
		if again.seq != cp.seq || again.streamCreated != cp.streamCreated || len(again.records) > len(cp.records) {
			t.Fatalf("round trip changed the checkpoint: %+v -> %+v", cp, again)
		}
	}
}

// NewIndexConsumed is an empty index that consumed a message.
func NewIndexConsumed() *Index {
	ix := NewIndex()
	ix.consumedThrough(1, time.Unix(1, 0))
	return ix
}

func TestKeeperDoesNotCheckpointAnIndexThatConsumedNothing(t *testing.T) {
	store := &memStore{data: []byte("a good checkpoint")}
	k, err := NewKeeper(KeeperConfig{Index: NewIndex(), State: newFakeState(), Chain: fakeChain{}, Checkpoints: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Checkpoint(); err != nil || string(store.data) != "a good checkpoint" {
		t.Fatalf("checkpoint of an index that consumed nothing: %v, store %q", err, store.data)
	}
}

// publishPayments publishes ps on the payments subject and returns the
// stream's last sequence.
func publishPayments(t *testing.T, js jetstream.JetStream, ps ...payment.ProposalPaid) uint64 {
	t.Helper()
	var last uint64
	for _, p := range ps {
		data, err := proto.Marshal(p.Proto())
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.Publish(context.Background(), payment.Subject(1337), data)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// runFollower runs a follower of a fresh index from store until it has
// consumed through seq, and stops it.
func runFollower(t *testing.T, js jetstream.JetStream, store CheckpointStore, seq uint64) *Index {
	t.Helper()
	ix := NewIndex()
	f := &Follower{JS: js, Stream: "CHAIN_EVENTS", ChainID: 1337, Index: ix, Log: zap.NewNop(), Checkpoints: store, Retry: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(20 * time.Second)
	// Changed signals a change of the payments, and Consumed moves just
	// after it (consumedThrough signals nothing): a wait on Changed alone
	// can miss the last message. So poll too.
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		changed := ix.Changed()
		if ix.Stats().Consumed >= seq {
			return ix
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-deadline:
			t.Fatalf("the follower consumed %d of %d", ix.Stats().Consumed, seq)
		}
	}
}

func TestFollowerRestartsFromItsCheckpoint(t *testing.T) {
	js := embeddedJetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CHAIN_EVENTS", Subjects: []string{"chain.>"}}); err != nil {
		t.Fatal(err)
	}
	st, store := newFakeState(), &memStore{}
	var spent, unspent []payment.ProposalPaid
	for n := range uint64(40) {
		p := paidAt(n+1, 10+n)
		if n%2 == 0 {
			st.decide(p, ledgerpb.Status_STATUS_COMMITTED)
			spent = append(spent, p)
		} else {
			unspent = append(unspent, p)
		}
	}
	seq := publishPayments(t, js, append(append([]payment.ProposalPaid(nil), spent...), unspent...)...)

	// First life: a full replay, then prune and checkpoint, then killed.
	first := runFollower(t, js, store, seq)
	if s := first.Stats(); s.Indexed != 40 || s.Observed != 40 {
		t.Fatalf("first start: %+v", s)
	}
	k, err := NewKeeper(KeeperConfig{Index: first, State: st, Chain: finalAt(1000, 1000), Checkpoints: store})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := k.Prune(); err != nil || s.Pruned != len(spent) {
		t.Fatalf("prune: %+v %v", s, err)
	}
	if err := k.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	late := paidAt(100, 2000) // published after the checkpoint
	seq = publishPayments(t, js, late)

	// Second life: from the checkpoint, reading only what came after it.
	second := runFollower(t, js, store, seq)
	if s := second.Stats(); s.Observed != 1 || s.Indexed != len(unspent)+1 {
		t.Fatalf("restart read %d messages and holds %d payments; want 1 and %d", s.Observed, s.Indexed, len(unspent)+1)
	}
	for _, p := range append(unspent, late) {
		if got, ok := second.Lookup(p.ProposalID); !ok || got.TxHash != p.TxHash {
			t.Errorf("unspent payment %s lost across the restart", p.ProposalID.Hex())
		}
	}
	for _, p := range spent {
		if _, ok := second.Lookup(p.ProposalID); ok {
			t.Errorf("spent payment %s came back", p.ProposalID.Hex())
		}
	}

	// The stream is recreated (the watcher's storage lost): the checkpoint
	// no longer applies, and the whole new stream is read.
	if err := js.DeleteStream(ctx, "CHAIN_EVENTS"); err != nil {
		t.Fatal(err)
	}
	// The server removes a deleted stream's files after it answers; a
	// create of the same name meanwhile fails to make its store (the
	// server's JSStreamCreateErrF, which nats.go names no constant for):
	// retried.
	const streamCreateFailed jetstream.ErrorCode = 10049
	for recreate := time.Now().Add(10 * time.Second); ; {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CHAIN_EVENTS", Subjects: []string{"chain.>"}})
		var apiErr *jetstream.APIError
		if err == nil {
			break
		}
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != streamCreateFailed || time.Now().After(recreate) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // polling the server
	}
	seq = publishPayments(t, js, unspent[:3]...)
	third := runFollower(t, js, store, seq)
	if s := third.Stats(); s.Observed != 3 || s.Indexed != 3 {
		t.Fatalf("after the stream was recreated: %+v, want a full replay of 3", s)
	}
}

func TestResumable(t *testing.T) {
	created := time.Unix(1_700_000_000, 5)
	cp := checkpoint{seq: 100, streamCreated: created.UnixNano()}
	info := func(first, last uint64, at time.Time) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{Created: at, State: jetstream.StreamState{FirstSeq: first, LastSeq: last}}
	}
	for name, c := range map[string]struct {
		info *jetstream.StreamInfo
		ok   bool
	}{
		"continues":         {info(1, 150, created), true},
		"nothing new":       {info(1, 100, created), true},
		"purged through it": {info(101, 100, created), true},
		"recreated":         {info(1, 150, created.Add(time.Second)), false},
		"shorter":           {info(1, 99, created), false},
		"purged past it":    {info(102, 150, created), false},
	} {
		if why := resumable(cp, c.info); (why == "") != c.ok {
			t.Errorf("%s: %q", name, why)
		}
	}
}
