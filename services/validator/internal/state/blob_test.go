package state

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

func token(n byte) [32]byte { return [32]byte{0x70, n} }

func declareOp(n byte, wallet []byte, size uint64, sha blob.ID, atMs, expiresAtMs int64) *ledgerpb.Entry {
	t := token(n)
	return &ledgerpb.Entry{Op: &ledgerpb.Entry_BlobIntentDeclare{BlobIntentDeclare: &ledgerpb.BlobIntentDeclare{
		Token: t[:], Wallet: wallet, Size: size, MimeType: "image/png", Sha256: sha[:],
		AtMs: atMs, ExpiresAtMs: expiresAtMs, MaxOpen: 2, RetainMs: 1000,
	}}}
}

func completeOp(n byte, c cid.Cid, atMs int64) *ledgerpb.Entry {
	t := token(n)
	return &ledgerpb.Entry{Op: &ledgerpb.Entry_BlobIntentComplete{BlobIntentComplete: &ledgerpb.BlobIntentComplete{Token: t[:], Cid: c.Bytes(), AtMs: atMs}}}
}

func expireOp(atMs int64, ns ...byte) *ledgerpb.Entry {
	op := &ledgerpb.BlobIntentExpire{AtMs: atMs}
	for _, n := range ns {
		t := token(n)
		op.Tokens = append(op.Tokens, t[:])
	}
	return &ledgerpb.Entry{Op: &ledgerpb.Entry_BlobIntentExpire{BlobIntentExpire: op}}
}

func mustIntent(t *testing.T, m *Machine, n byte) *ledgerpb.BlobIntent {
	t.Helper()
	rec, err := m.Intent(token(n))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func intentStatus(t *testing.T, m *Machine, n byte) ledgerpb.IntentStatus {
	t.Helper()
	return mustIntent(t, m, n).GetStatus() // INTENT_UNSPECIFIED when there is none
}

func mustDue(t *testing.T, m *Machine, nowMs int64) []byte {
	t.Helper()
	due, err := m.DueIntents(nowMs, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ns []byte
	for _, d := range due {
		ns = append(ns, d[1])
	}
	return ns
}

// TestIntentLifecycle walks intents through declaration, completion,
// expiry and deletion, with the refusals apply decides itself.
func TestIntentLifecycle(t *testing.T) {
	m, l := newMachine(t), newLog(t)
	bytesA := []byte("the bytes of a binary")
	shaA := blob.IDOf(bytesA)
	cidA, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: multihash.SHA2_256, MhLength: -1}.Sum(bytesA)
	if err != nil {
		t.Fatal(err)
	}

	mustApply(t, m,
		l.op(declareOp(1, alice[:], uint64(len(bytesA)), shaA, 1000, 10_000)),
		l.op(declareOp(1, alice[:], 999, shaA, 1500, 20_000)), // a repeat changes nothing
		l.op(declareOp(2, alice[:], 7, blob.IDOf([]byte("b")), 1000, 10_000)),
		l.op(declareOp(3, alice[:], 7, blob.IDOf([]byte("c")), 1000, 10_000)), // alice has 2 open: refused
		l.op(declareOp(4, bob[:], 7, blob.IDOf([]byte("d")), 1000, 900)),      // expires before declared: malformed
	)
	if rec := mustIntent(t, m, 1); rec.GetStatus() != ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD || rec.GetSize() != uint64(len(bytesA)) || rec.GetExpiresAtMs() != 10_000 {
		t.Fatalf("intent 1: %v", rec)
	}
	if s3, s4 := intentStatus(t, m, 3), intentStatus(t, m, 4); s3 != 0 || s4 != 0 {
		t.Fatalf("refused declarations recorded: %v %v", s3, s4)
	}
	if open, _ := m.OpenIntents(alice, 10); open != 2 {
		t.Fatalf("alice has %d open intents, want 2", open)
	}
	if due := mustDue(t, m, 9_999); len(due) != 0 {
		t.Fatalf("due before expiry: %v", due)
	}

	lastEvent := m.LastEventID()
	mustApply(t, m,
		l.op(completeOp(1, cidA, 2000)),
		l.op(completeOp(1, cidA, 2100)),   // done already: nothing
		l.op(completeOp(2, cidA, 10_000)), // at its expiry: refused
	)
	rec := mustIntent(t, m, 1)
	if rec.GetStatus() != ledgerpb.IntentStatus_INTENT_COMPLETED || rec.GetDoneAtMs() != 2000 || string(rec.GetCid()) != string(cidA.Bytes()) {
		t.Fatalf("intent 1 after completion: %v", rec)
	}
	if s := intentStatus(t, m, 2); s != ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD {
		t.Fatalf("intent 2 completed at its expiry: %v", s)
	}
	mapping, err := m.Blob(shaA)
	if err != nil || mapping.GetSize() != uint64(len(bytesA)) || string(mapping.GetCid()) != string(cidA.Bytes()) || mapping.GetMimeType() != "image/png" {
		t.Fatalf("mapping: %v, %v", mapping, err)
	}
	if id, ok, err := m.BlobOfCID(cidA.Bytes()); err != nil || !ok || id != shaA {
		t.Fatalf("BlobOfCID: %s %t %v", id, ok, err)
	}
	if n, size, err := m.BlobTotals(); err != nil || n != 1 || size != uint64(len(bytesA)) {
		t.Fatalf("totals %d %d %v", n, size, err)
	}
	evs, err := m.EventsSince(lastEvent, 0)
	if err != nil || len(evs) != 1 || evs[0].GetType() != EventTypeBinary || evs[0].GetAction() != EventActionUpload ||
		evs[0].GetCasCid() != cidA.String() || evs[0].GetBlobId() != shaA.String() || evs[0].GetTimestamp() != 2000 {
		t.Fatalf("events of the completion: %v, %v", evs, err)
	}
	if open, _ := m.OpenIntents(alice, 10); open != 1 {
		t.Fatalf("alice has %d open intents after completing one, want 1", open)
	}

	// The leader's expiry: intent 1 is due for deletion at 3000, intent 2
	// for expiry at 10_000.
	if due := mustDue(t, m, 10_000); string(due) != "\x01\x02" {
		t.Fatalf("due at 10000: %v", due)
	}
	mustApply(t, m, l.op(expireOp(2999, 1, 2))) // neither is due yet: nothing
	if s1, s2 := intentStatus(t, m, 1), intentStatus(t, m, 2); s1 != ledgerpb.IntentStatus_INTENT_COMPLETED || s2 != ledgerpb.IntentStatus_INTENT_READY_FOR_UPLOAD {
		t.Fatalf("an early expiry changed intents: %v %v", s1, s2)
	}
	mustApply(t, m, l.op(expireOp(10_000, 1, 2)))
	if s1, s2 := intentStatus(t, m, 1), intentStatus(t, m, 2); s1 != 0 || s2 != ledgerpb.IntentStatus_INTENT_EXPIRED {
		t.Fatalf("after the expiry at 10000: intent 1 %v (want deleted), intent 2 %v", s1, s2)
	}
	if open, _ := m.OpenIntents(alice, 10); open != 0 {
		t.Fatalf("alice has %d open intents after the expiry", open)
	}
	mustApply(t, m, l.op(completeOp(2, cidA, 10_500))) // expired: nothing
	if s := intentStatus(t, m, 2); s != ledgerpb.IntentStatus_INTENT_EXPIRED {
		t.Fatalf("an expired intent completed: %v", s)
	}
	if due := mustDue(t, m, 11_000); string(due) != "\x02" {
		t.Fatalf("due at 11000: %v", due)
	}
	mustApply(t, m, l.op(expireOp(11_000, 2)))
	if s := intentStatus(t, m, 2); s != 0 {
		t.Fatalf("intent 2 kept past its retention: %v", s)
	}
	if due := mustDue(t, m, 1<<40); len(due) != 0 {
		t.Fatalf("due keys left: %v", due)
	}
	if mapping, err := m.Blob(shaA); err != nil || mapping == nil {
		t.Fatalf("the mapping went with its intent: %v", err)
	}

	// A write referencing the mapped CID: its binary event names the blob.
	lastEvent = m.LastEventID()
	mustApply(t, m, l.batch(20_000, writeItem(1, alice, "assets/a", `{"ledger:cid":"`+cidA.String()+`"}`)))
	evs, err = m.EventsSince(lastEvent, 0)
	if err != nil || len(evs) != 2 || evs[1].GetType() != EventTypeBinary || evs[1].GetCasCid() != cidA.String() || evs[1].GetBlobId() != shaA.String() {
		t.Fatalf("events of the write: %v, %v", evs, err)
	}
}

// TestIntentsReplicateAlike applies the same intent entries on two
// machines: same state hash.
func TestIntentsReplicateAlike(t *testing.T) {
	sha := blob.IDOf([]byte("x"))
	c, _ := cid.Prefix{Version: 0, Codec: cid.DagProtobuf, MhType: multihash.SHA2_256, MhLength: -1}.Sum([]byte("x"))
	var hashes [][32]byte
	for range 2 {
		m, l := newMachine(t), newLog(t)
		mustApply(t, m, l.op(declareOp(1, alice[:], 1, sha, 1, 100)), l.op(completeOp(1, c, 50)), l.op(expireOp(2000, 1)))
		hashes = append(hashes, m.StateHash())
	}
	if hashes[0] != hashes[1] {
		t.Fatal("two machines differ after the same intent entries")
	}
}

// TestStateHashGoldenUploads pins the state hash of a log of the v10 ops:
// an upload declared, refused over the bound, completed, written, expired
// and deleted; and a client registration. A change here is a change of
// the stored encoding: bump the state hash version (hash.go).
func TestStateHashGoldenUploads(t *testing.T) {
	const want = "8c1e22b75fb70542e62aed032c2c048c951d515dee69619de992637b811d637a"
	m, l := newMachine(t), newLog(t)
	img := cid.MustParse("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG")
	mustApply(t, m,
		l.op(declareOp(1, alice[:], 12, blob.IDOf([]byte("hello world")), 15, 100)),
		l.op(declareOp(2, alice[:], 5, blob.IDOf([]byte("other")), 15, 100)),
		l.op(declareOp(3, alice[:], 5, blob.IDOf([]byte("third")), 15, 100)), // over the bound: nothing
		l.op(completeOp(1, img, 16)),
		l.batch(17, writeItem(1, alice, "img", `{"ledger:cid":"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"}`)),
		l.op(expireOp(1016, 1, 2)),
		registerEntry(l, "app-1", alice, 18),
	)
	if got := m.StateHash(); bytesHex(got[:]) != want {
		t.Fatalf("state hash of the upload log = %x, pinned %s", got, want)
	}
}

// TestWriteByIntent: a write naming a completed upload of its wallet by
// ledger:intent stores the upload's CID as ledger:cid and emits the binary
// event with the blob; naming another wallet's upload, an open one, an
// unknown one, or another CID beside it is rejected.
func TestWriteByIntent(t *testing.T) {
	m, l := newMachine(t), newLog(t)
	data := []byte("an uploaded binary")
	c, _ := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: multihash.SHA2_256, MhLength: -1}.Sum(data)
	done, open := token(1), token(2)
	mustApply(t, m,
		l.op(declareOp(1, alice[:], uint64(len(data)), blob.IDOf(data), 10, 10_000)),
		l.op(completeOp(1, c, 20)),
		l.op(declareOp(2, alice[:], 3, blob.IDOf([]byte("abc")), 10, 10_000)),
	)
	ref := func(tok [32]byte) string { return fmt.Sprintf(`"ledger:intent":"0x%x"`, tok) }
	lastEvent := m.LastEventID()
	mustApply(t, m, l.batch(30,
		writeItem(1, alice, "by-intent", `{"name":"x",`+ref(done)+`}`),
		writeItem(2, bob, "other-wallet", `{`+ref(done)+`}`),
		writeItem(3, alice, "open", `{`+ref(open)+`}`),
		writeItem(4, alice, "unknown", `{`+ref(token(9))+`}`),
		writeItem(5, alice, "both", `{"ledger:cid":"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",`+ref(done)+`}`),
		writeItem(6, alice, "same", `{"ledger:cid":"`+c.String()+`",`+ref(done)+`}`),
	))
	if got := props(mustNode(t, m, path(alice, "by-intent"))); got != `ledger:cid="`+c.String()+`";name="x";` {
		t.Fatalf("the node written by intent: %s", got)
	}
	if got := props(mustNode(t, m, path(alice, "same"))); got != `ledger:cid="`+c.String()+`";` {
		t.Fatalf("the node naming the CID and its intent: %s", got)
	}
	for n := 2; n <= 5; n++ {
		if rec := mustRecord(t, m, n); rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED || rec.GetReason() != ReasonInvalidField {
			t.Errorf("proposal %d: %v %s", n, rec.GetStatus(), rec.GetReason())
		}
	}
	evs, err := m.EventsSince(lastEvent, 0)
	if err != nil {
		t.Fatal(err)
	}
	var binaries []string
	for _, ev := range evs {
		if ev.GetType() == EventTypeBinary {
			binaries = append(binaries, ev.GetPath()+" "+ev.GetCasCid()+" "+ev.GetBlobId())
		}
	}
	want := []string{path(alice, "by-intent") + " " + c.String() + " " + blob.IDOf(data).String(),
		path(alice, "same") + " " + c.String() + " " + blob.IDOf(data).String()}
	if !slices.Equal(binaries, want) {
		t.Fatalf("binary events %v, want %v", binaries, want)
	}
}
