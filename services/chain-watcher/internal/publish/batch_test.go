package publish_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

// sampleLogs returns n logs in chain order, payments and debt payments
// alternating, four to a block.
func sampleLogs(n int) []publish.Log {
	logs := make([]publish.Log, n)
	for i := range logs {
		block := uint64(100 + i/4)
		hash := common.BigToHash(new(big.Int).SetUint64(block))
		if i%2 == 0 {
			p := samplePayment(uint(i % 4))
			p.BlockNumber, p.BlockHash, p.ProposalID = block, hash, common.BigToHash(big.NewInt(int64(i+1)))
			logs[i] = publish.PaymentLog(p)
			continue
		}
		logs[i] = publish.DebtLog(payment.DebtPaid{
			ChainID: 1337, Contract: common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3"),
			Wallet: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), Payer: common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
			Amount: big.NewInt(int64(i + 1)), Timestamp: 1_700_000_000, TxHash: common.HexToHash("0xcc"),
			BlockHash: hash, BlockNumber: block, LogIndex: uint(i % 4), Confirmations: 2,
		})
	}
	return logs
}

// stored is one message of the stream: its sequence, id and batch headers.
type stored struct {
	seq           uint64
	id            string
	batch, commit string
}

// streamMessages reads the whole stream in order.
func streamMessages(t *testing.T, ctx context.Context, js jetstream.JetStream) []stored {
	t.Helper()
	s, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []stored
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stored{seq: seq, id: m.Header.Get(jetstream.MsgIDHeader),
			batch: m.Header.Get(publish.BatchIDHeader), commit: m.Header.Get(publish.BatchCommitHeader)})
	}
	return out
}

func ids(logs []publish.Log) []string {
	out := make([]string, len(logs))
	for i, l := range logs {
		out[i] = l.MsgID()
	}
	return out
}

// checkIDs asserts the stream holds exactly want, in that order.
func checkIDs(t *testing.T, got []stored, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("stream holds %d messages, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].id != want[i] {
			t.Fatalf("message %d is %s, want %s (stream %v)", i+1, got[i].id, want[i], got)
		}
	}
}

func declare(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	info, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Config.AllowAtomicPublish {
		t.Fatal("the stream is declared without atomic publication")
	}
}

// TestPublishLogsAsAtomicBatches: logs go in order, in batches of at most
// the limit, each stored whole; the results carry the stream sequences.
func TestPublishLogsAsAtomicBatches(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	declare(t, ctx, js)
	logs := sampleLogs(25)
	res, err := publish.NewPublisher(js, "CHAIN_EVENTS", publish.WithMaxBatch(10)).PublishLogs(ctx, logs)
	if err != nil || len(res) != len(logs) {
		t.Fatalf("PublishLogs: %d results, %v", len(res), err)
	}
	got := streamMessages(t, ctx, js)
	checkIDs(t, got, ids(logs))
	sizes := map[string]int{}
	for i, m := range got {
		if res[i].Sequence != m.seq || res[i].Duplicate {
			t.Errorf("result %d %+v, stored at %d", i, res[i], m.seq)
		}
		if m.batch == "" {
			t.Fatalf("message %d was not published in a batch", m.seq)
		}
		sizes[m.batch]++
		if last := i == len(got)-1 || got[i+1].batch != m.batch; last != (m.commit == "1") {
			t.Errorf("message %d: commit header %q", m.seq, m.commit)
		}
	}
	if len(sizes) != 3 {
		t.Errorf("batches %v, want 10, 10 and 5 messages", sizes)
	}
	for id, n := range sizes {
		if n > 10 {
			t.Errorf("batch %s holds %d messages", id, n)
		}
	}
}

// TestPublishLogsWithStoredDuplicates: the server refuses a whole batch
// that holds a message id it already stored (or one id twice); the
// publisher then publishes that batch's logs one at a time, so the stored
// ones are acknowledged as duplicates, the others stored once, in order.
func TestPublishLogsWithStoredDuplicates(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	declare(t, ctx, js)
	logs := sampleLogs(12)
	pub := publish.NewPublisher(js, "CHAIN_EVENTS", publish.WithMaxBatch(5))
	// Logs 3, 4 and 8 (of 1 to 12) are in the stream already: published
	// by a run that crashed before its checkpoint, or by another watcher.
	before, err := pub.PublishLogs(ctx, []publish.Log{logs[2], logs[3]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.PublishLogs(ctx, logs[7:8]); err != nil {
		t.Fatal(err)
	}
	res, err := pub.PublishLogs(ctx, logs)
	if err != nil || len(res) != len(logs) {
		t.Fatalf("PublishLogs: %d results, %v", len(res), err)
	}
	for i, r := range res {
		if dup := i == 2 || i == 3 || i == 7; r.Duplicate != dup {
			t.Errorf("log %d: %+v, duplicate %v expected", i+1, r, dup)
		}
	}
	if res[2].Sequence != before[0].Sequence || res[3].Sequence != before[1].Sequence {
		t.Errorf("duplicates acknowledged at %d and %d, stored at %d and %d", res[2].Sequence, res[3].Sequence, before[0].Sequence, before[1].Sequence)
	}
	want := []string{logs[2].MsgID(), logs[3].MsgID(), logs[7].MsgID()}
	for i, l := range logs {
		if i != 2 && i != 3 && i != 7 {
			want = append(want, l.MsgID())
		}
	}
	got := streamMessages(t, ctx, js)
	checkIDs(t, got, want)
	// Batches 1 and 2 held a duplicate and went one log at a time; batch 3
	// (logs 11 and 12) did not.
	for _, m := range got[3:] {
		if inBatch := m.seq > 10; (m.batch != "") != inBatch {
			t.Errorf("message %d (%s): batch %q", m.seq, m.id, m.batch)
		}
	}

	// Everything again: all duplicates, nothing stored.
	again, err := pub.PublishLogs(ctx, logs)
	if err != nil || len(again) != len(logs) {
		t.Fatalf("again: %d results, %v", len(again), err)
	}
	for i, r := range again {
		if !r.Duplicate || r.Sequence != res[i].Sequence {
			t.Errorf("again, log %d: %+v, want a duplicate of %d", i+1, r, res[i].Sequence)
		}
	}
	// One id twice in a batch: refused by the server, stored once.
	more := sampleLogs(16)[12:]
	twice := []publish.Log{more[0], more[1], more[0], more[2], more[3]}
	if res, err := pub.PublishLogs(ctx, twice); err != nil || len(res) != 5 || res[0].Duplicate || !res[2].Duplicate || res[2].Sequence != res[0].Sequence {
		t.Fatalf("an id twice in a batch: %+v, %v", res, err)
	}
	checkIDs(t, streamMessages(t, ctx, js), append(want, ids(more)...))
}

// TestPublishLogsWhenTheStreamRefusesBatches: a stream without atomic
// publication (declared so by an older watcher) refuses the batch whole;
// the publisher says so once, stores nothing of it, and publishes one log
// at a time from then on.
func TestPublishLogsWhenTheStreamRefusesBatches(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	declare(t, ctx, js)
	pub := publish.NewPublisher(js, "CHAIN_EVENTS", publish.WithMaxBatch(4))
	logs := sampleLogs(12)
	if res, err := pub.PublishLogs(ctx, logs[:4]); err != nil || len(res) != 4 {
		t.Fatalf("first batch: %d results, %v", len(res), err)
	}
	// An older watcher declares the stream as it knew it.
	s, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	res, err := pub.PublishLogs(ctx, logs[4:])
	if !errors.Is(err, publish.ErrAtomicUnavailable) || len(res) != 0 {
		t.Fatalf("on a stream without atomic publication: %d results, %v; want ErrAtomicUnavailable and none", len(res), err)
	}
	checkIDs(t, streamMessages(t, ctx, js), ids(logs[:4]))
	res, err = pub.PublishLogs(ctx, logs[4:8])
	if err != nil || len(res) != 4 {
		t.Fatalf("one at a time: %d results, %v", len(res), err)
	}
	// Said once: the next call goes on quietly, even with atomic
	// publication allowed again (until the publisher is made anew).
	cfg.AllowAtomicPublish = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if res, err := pub.PublishLogs(ctx, logs[8:]); err != nil || len(res) != 4 {
		t.Fatalf("after: %d results, %v", len(res), err)
	}
	got := streamMessages(t, ctx, js)
	checkIDs(t, got, ids(logs))
	for _, m := range got[4:] {
		if m.batch != "" {
			t.Errorf("message %d published in batch %s after the fallback", m.seq, m.batch)
		}
	}
}

// TestPublishLogsLearnsTheServerLimit: a server whose max_batch_size is
// below the publisher's refuses the batch; the publisher takes the limit
// from the refusal and goes on in smaller batches.
func TestPublishLogsLearnsTheServerLimit(t *testing.T) {
	ctx := testenv.Context(t)
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, NoSigs: true, NoLog: true,
		JetStreamLimits: server.JSLimitOpts{MaxBatchSize: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	js := testenv.JetStream(t, s)
	declare(t, ctx, js)
	logs := sampleLogs(10)
	res, err := publish.NewPublisher(js, "CHAIN_EVENTS").PublishLogs(ctx, logs)
	if err != nil || len(res) != len(logs) {
		t.Fatalf("PublishLogs: %d results, %v", len(res), err)
	}
	got := streamMessages(t, ctx, js)
	checkIDs(t, got, ids(logs))
	sizes := map[string]int{}
	for _, m := range got {
		sizes[m.batch]++
	}
	// The last log goes on its own: a batch of one costs more than it.
	if len(sizes) != 4 || sizes[""] != 1 {
		t.Errorf("batches %v, want 3 of 3 messages and 1 message on its own", sizes)
	}
}

// senderOnly hides the connection of a JetStream context.
type senderOnly struct{ js jetstream.JetStream }

func (s senderOnly) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return s.js.PublishMsg(ctx, msg, opts...)
}

// TestPublishLogsWithoutConnection: a Sender without a core connection
// publishes one log at a time, in order.
func TestPublishLogsWithoutConnection(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	declare(t, ctx, js)
	logs := sampleLogs(6)
	res, err := publish.NewPublisher(senderOnly{js}, "CHAIN_EVENTS").PublishLogs(ctx, logs)
	if err != nil || len(res) != len(logs) {
		t.Fatalf("PublishLogs: %d results, %v", len(res), err)
	}
	got := streamMessages(t, ctx, js)
	checkIDs(t, got, ids(logs))
	for _, m := range got {
		if m.batch != "" {
			t.Errorf("message %d in batch %s", m.seq, m.batch)
		}
	}
}

// TestPublishLogsRefusesAnotherStream: a batch expecting another stream
// is refused whole.
func TestPublishLogsRefusesAnotherStream(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	declare(t, ctx, js)
	_, err := publish.NewPublisher(js, "OTHER").PublishLogs(ctx, sampleLogs(5))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != streamNotMatch {
		t.Fatalf("a batch expecting another stream: %v, want API error %d", err, streamNotMatch)
	}
	checkIDs(t, streamMessages(t, ctx, js), nil)
}

// generation returns logs as published in generation gen, retractions when
// removed is set.
func generation(logs []publish.Log, gen uint32, removed bool) []publish.Log {
	out := make([]publish.Log, len(logs))
	for i, l := range logs {
		if l.Debt != nil {
			d := *l.Debt
			d.Removed = removed
			out[i] = publish.Log{Debt: &d, Generation: gen}
		} else {
			p := *l.Payment
			p.Removed = removed
			out[i] = publish.Log{Payment: &p, Generation: gen}
		}
	}
	return out
}

// TestPublishLogsGenerations: the logs of a block published, retracted,
// published again (generation 1) and retracted again each get ids of their
// own, ":g1" before ":removed", and the same payload as the first
// publication but for removed; a generation published twice is stored
// once. Both in batches and one log at a time.
func TestPublishLogsGenerations(t *testing.T) {
	for _, batches := range []bool{true, false} {
		t.Run(map[bool]string{true: "batches", false: "one at a time"}[batches], func(t *testing.T) {
			ctx := testenv.Context(t)
			js := testenv.JetStream(t, testenv.NATS(t))
			declare(t, ctx, js)
			pub := publish.NewPublisher(js, "CHAIN_EVENTS")
			if !batches {
				pub = publish.NewPublisher(senderOnly{js}, "CHAIN_EVENTS")
			}
			logs := sampleLogs(4) // one block
			var want []string
			for _, step := range []struct {
				gen     uint32
				removed bool
				suffix  string
			}{{0, false, ""}, {0, true, ":removed"}, {1, false, ":g1"}, {1, false, ":g1"}, {1, true, ":g1:removed"}} {
				res, err := pub.PublishLogs(ctx, generation(logs, step.gen, step.removed))
				if err != nil || len(res) != len(logs) {
					t.Fatalf("PublishLogs generation %d removed=%v: %d results, %v", step.gen, step.removed, len(res), err)
				}
				again := step.gen == 1 && !step.removed && len(want) == 3*len(logs)
				for i := range logs {
					id := fmt.Sprintf("1337:%s:%d%s", common.BigToHash(big.NewInt(100)).Hex(), i, step.suffix)
					if res[i].Duplicate != again {
						t.Errorf("%s: duplicate=%v", id, res[i].Duplicate)
					}
					if !again {
						want = append(want, id)
					}
				}
			}
			got := streamMessages(t, ctx, js)
			checkIDs(t, got, want)
			s, err := js.Stream(ctx, "CHAIN_EVENTS")
			if err != nil {
				t.Fatal(err)
			}
			// The generation is in the id only: generation 1's payloads
			// are generation 0's.
			for i := range logs {
				first, err1 := s.GetMsg(ctx, got[i].seq)
				readopted, err2 := s.GetMsg(ctx, got[2*len(logs)+i].seq)
				if err1 != nil || err2 != nil || !bytes.Equal(first.Data, readopted.Data) || first.Subject != readopted.Subject {
					t.Errorf("log %d: generation 1 payload differs from generation 0 (%v, %v)", i, err1, err2)
				}
			}
		})
	}
}
