package publish_test

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/publish"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

func samplePayment(logIndex uint) payment.ProposalPaid {
	return payment.ProposalPaid{
		ChainID:            1337,
		Contract:           common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3"),
		ProposalID:         common.HexToHash("0x1234"),
		Payer:              common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
		Amount:             payment.Express.Price(payment.ETH),
		Class:              payment.Express,
		Token:              payment.ETH,
		PreferredValidator: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
		Timestamp:          1_700_000_000,
		TxHash:             common.HexToHash("0xaa"),
		BlockHash:          common.HexToHash("0xbb"),
		BlockNumber:        42,
		LogIndex:           logIndex,
		Confirmations:      2,
	}
}

func TestEnsureStreamIsIdempotent(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	cfg := publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour}
	for i := range 2 {
		info, err := publish.EnsureStream(ctx, js, cfg)
		if err != nil {
			t.Fatalf("declaration %d: %v", i, err)
		}
		c := info.Config
		if c.Storage != jetstream.FileStorage || c.Duplicates != time.Hour || len(c.Subjects) != 1 || c.Subjects[0] != "chain.>" ||
			c.MaxAge != 0 || c.MaxMsgs != -1 || c.MaxBytes != -1 || c.Retention != jetstream.LimitsPolicy || c.PersistMode == jetstream.AsyncPersistMode {
			t.Fatalf("declaration %d: config %+v", i, c)
		}
	}
	// A limit set by hand is undone by the next declaration.
	s, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	limited := s.CachedInfo().Config
	limited.MaxMsgs, limited.Discard = 10, jetstream.DiscardNew
	if _, err := js.UpdateStream(ctx, limited); err != nil {
		t.Fatal(err)
	}
	if info, err := publish.EnsureStream(ctx, js, cfg); err != nil || info.Config.MaxMsgs != -1 || info.Config.Discard != jetstream.DiscardOld {
		t.Fatalf("after a limit set by hand: %+v, %v", info, err)
	}
	// A changed window is applied to the existing stream.
	cfg.DuplicateWindow = 2 * time.Hour
	info, err := publish.EnsureStream(ctx, js, cfg)
	if err != nil || info.Config.Duplicates != 2*time.Hour {
		t.Fatalf("update: %v, %v", info, err)
	}
	if _, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "X"}); err == nil {
		t.Error("zero duplicate window accepted")
	}
}

func TestPublishStoresOnceWithMsgID(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	if _, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pub := publish.NewPublisher(js, "CHAIN_EVENTS")
	p := samplePayment(3)
	first, err := pub.Publish(ctx, p)
	if err != nil || first.Duplicate || first.Sequence != 1 {
		t.Fatalf("first publish: %+v, %v", first, err)
	}
	again, err := pub.Publish(ctx, p)
	if err != nil || !again.Duplicate {
		t.Fatalf("republish: %+v, %v; want an acknowledged duplicate", again, err)
	}
	other, err := pub.Publish(ctx, samplePayment(4))
	if err != nil || other.Duplicate || other.Sequence != 2 {
		t.Fatalf("second payment: %+v, %v", other, err)
	}

	stream, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "chain.1337.payments" {
		t.Errorf("subject %q", msg.Subject)
	}
	if got := msg.Header.Get(jetstream.MsgIDHeader); got != p.MsgID() {
		t.Errorf("Nats-Msg-Id %q, want %q", got, p.MsgID())
	}
	var m ledgerpb.Payment
	if err := proto.Unmarshal(msg.Data, &m); err != nil {
		t.Fatal(err)
	}
	back, err := payment.FromProto(&m)
	if err != nil {
		t.Fatal(err)
	}
	if back.Amount.Cmp(p.Amount) != 0 {
		t.Errorf("amount %v, want %v", back.Amount, p.Amount)
	}
	back.Amount, p.Amount = nil, nil
	if back != p {
		t.Errorf("stored payment\n got  %+v\n want %+v", back, p)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Errorf("stream holds %v messages (%v), want 2", info.State.Msgs, err)
	}
}

// TestPublishDebtStoresOnceWithMsgID: a debt payment goes on the debts
// subject with its message id, once, next to the payments in the same
// stream.
func TestPublishDebtStoresOnceWithMsgID(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	if _, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pub := publish.NewPublisher(js, "CHAIN_EVENTS")
	if _, err := pub.Publish(ctx, samplePayment(3)); err != nil {
		t.Fatal(err)
	}
	d := payment.DebtPaid{
		ChainID: 1337, Contract: common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3"),
		Wallet: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), Payer: common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
		Amount: payment.Standard.Price(payment.ETH), Timestamp: 1_700_000_000, TxHash: common.HexToHash("0xcc"),
		BlockHash: common.HexToHash("0xbb"), BlockNumber: 42, LogIndex: 4, Confirmations: 2,
	}
	first, err := pub.PublishDebt(ctx, d)
	if err != nil || first.Duplicate || first.Sequence != 2 {
		t.Fatalf("first publish: %+v, %v", first, err)
	}
	again, err := pub.PublishDebt(ctx, d)
	if err != nil || !again.Duplicate {
		t.Fatalf("republish: %+v, %v; want an acknowledged duplicate", again, err)
	}
	stream, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "chain.1337.debts" {
		t.Errorf("subject %q", msg.Subject)
	}
	if got := msg.Header.Get(jetstream.MsgIDHeader); got != d.MsgID() {
		t.Errorf("Nats-Msg-Id %q, want %q", got, d.MsgID())
	}
	var m ledgerpb.DebtPayment
	if err := proto.Unmarshal(msg.Data, &m); err != nil {
		t.Fatal(err)
	}
	back, err := payment.DebtPaidFromProto(&m)
	if err != nil {
		t.Fatal(err)
	}
	if back.Amount.Cmp(d.Amount) != 0 {
		t.Errorf("amount %v, want %v", back.Amount, d.Amount)
	}
	back.Amount, d.Amount = nil, nil
	if back != d {
		t.Errorf("stored debt payment\n got  %+v\n want %+v", back, d)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Errorf("stream holds %v messages (%v), want 2", info.State.Msgs, err)
	}
	// Expecting another stream is refused for debts too, and stores nothing.
	d.LogIndex, d.Amount = 5, big.NewInt(1)
	_, err = publish.NewPublisher(js, "OTHER").PublishDebt(ctx, d)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != streamNotMatch {
		t.Fatalf("publish expecting another stream: %v, want API error %d", err, streamNotMatch)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Errorf("stream holds %v messages (%v), want 2", info.State.Msgs, err)
	}
}

func TestPublishRefusesAnotherStream(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	if _, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// The subject binds to CHAIN_EVENTS; a publisher expecting OTHER is
	// refused by the server (expected stream does not match), and nothing
	// is stored.
	_, err := publish.NewPublisher(js, "OTHER").Publish(ctx, samplePayment(0))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != streamNotMatch {
		t.Fatalf("publish expecting another stream: %v, want API error %d", err, streamNotMatch)
	}
	stream, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("stream holds %v messages (%v), want 0", info.State.Msgs, err)
	}
}

// streamNotMatch is the server's JSStreamNotMatchErr code; nats.go has no
// constant for it.
const streamNotMatch jetstream.ErrorCode = 10060

// TestPublishEpoch: an epoch update goes on the epochs subject as JSON with
// its message id, once; an update that contradicts itself is not sent.
func TestPublishEpoch(t *testing.T) {
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	if _, err := publish.EnsureStream(ctx, js, publish.StreamConfig{Name: "CHAIN_EVENTS", DuplicateWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pub := publish.NewPublisher(js, "CHAIN_EVENTS")
	u := payment.EpochUpdate{ChainID: 1337, Current: 12, Finalized: 10, Source: payment.EpochSourceBlockTime, BlockNumber: 300, ObservedAtMs: 1}
	if res, err := pub.PublishEpoch(ctx, u); err != nil || res.Duplicate || res.Sequence != 1 {
		t.Fatalf("first publish: %+v, %v", res, err)
	}
	u.ObservedAtMs, u.BlockNumber = 2, 301 // the same figures seen later: the same id
	if res, err := pub.PublishEpoch(ctx, u); err != nil || !res.Duplicate {
		t.Fatalf("the same figures again: %+v, %v", res, err)
	}
	if _, err := pub.PublishEpoch(ctx, payment.EpochUpdate{ChainID: 1337, Current: 1, Finalized: 2, Source: payment.EpochSourceBeacon}); !errors.Is(err, payment.ErrMalformedEpochUpdate) {
		t.Fatalf("an update with finalized after current: %v", err)
	}
	stream, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := payment.DecodeEpochUpdate(msg.Data)
	if msg.Subject != "chain.1337.epochs" || msg.Header.Get(jetstream.MsgIDHeader) != "1337:epochs:block-time:12:10" || err != nil ||
		got.BlockNumber != 300 || got.Current != 12 || got.Finalized != 10 {
		t.Fatalf("stored %s %q %s (%v)", msg.Subject, msg.Header.Get(jetstream.MsgIDHeader), msg.Data, err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %v messages (%v), want 1", info.State.Msgs, err)
	}
}
