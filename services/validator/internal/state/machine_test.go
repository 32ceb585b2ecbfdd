package state

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

const nested = `{"jcr:primaryType":"nt:file","title":"hello","tags":["a","b"],"meta":{"size":12,"deep":{"ok":true}}}`

func TestApplyWrite(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	l.confChange()
	l.empty()
	e := l.batch(1_700_000_000_000, writeItem(1, alice, "docs/readme", nested))
	mustApply(t, m, l.entries...)

	base := path(alice, "docs/readme")
	want := []struct {
		path, primary, props string
	}{
		{base, "nt:file", `tags=["a","b"];title="hello";`},
		{base + "/meta", "nt:unstructured", `size=12;`},
		{base + "/meta/deep", "nt:unstructured", `ok=true;`},
	}
	for _, w := range want {
		n := mustNode(t, m, w.path)
		if n.GetPrimaryType() != w.primary || props(n) != w.props || n.GetRevision() != 1 ||
			!bytes.Equal(n.GetProposalId(), pid(1)) || !bytes.Equal(n.GetWallet(), alice.Bytes()) ||
			n.GetOrganization() != "default" || n.GetContentType() != "content" ||
			n.GetCommitIndex() != e.Index || n.GetUpdatedAtMs() != 1_700_000_000_000 {
			t.Errorf("node %s = %v", w.path, n)
		}
	}

	rec := mustRecord(t, m, 1)
	if rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || rec.GetReason() != "" || rec.GetCommitIndex() != 3 ||
		rec.GetCommittedAtMs() != 1_700_000_000_000 || rec.GetPayment().GetChainId() != 1337 ||
		!bytes.Equal(rec.GetProposal().GetMessage(), []byte(nested)) {
		t.Errorf("record = %v", rec)
	}

	evs, err := m.EventsSince(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantEv := &ledgerpb.Event{
		Id: 1, Type: "content", Action: "write", Path: base,
		Wallet:       "0x1234567890abcdef1234567890abcdef12345678",
		Timestamp:    1_700_000_000_000,
		Organization: "default",
		ProposalId:   "0xee" + strings.Repeat("0", 60) + "01",
		CommitIndex:  3,
		ContentHash:  "0x" + bytesHex(crypto.Keccak256([]byte(nested))),
	}
	if len(evs) != 1 || !proto.Equal(evs[0], wantEv) {
		t.Errorf("events = %v\nwant %v", evs, wantEv)
	}
	if m.LastEventID() != 1 {
		t.Errorf("LastEventID = %d", m.LastEventID())
	}

	seg, ok, err := m.Segment(3)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if seg.GetIndex() != 3 || seg.GetTerm() != 1 || seg.GetEpoch() != 1000 || seg.GetGeneration() != 0 ||
		!bytes.Equal(seg.GetPrevHash(), make([]byte, 32)) || len(seg.GetProposalIds()) != 1 || len(seg.GetOps()) != 3 {
		t.Fatalf("segment = %v", seg)
	}
	for i, w := range want {
		if got := seg.GetOps()[i].GetPut().GetPath(); got != w.path {
			t.Errorf("segment op %d puts %s, want %s", i, got, w.path)
		}
	}
	for _, idx := range []uint64{1, 2} {
		if _, ok, err := m.Segment(idx); ok || err != nil {
			t.Errorf("Segment(%d) = %v, %v, want none (nothing changed)", idx, ok, err)
		}
	}
	if m.AppliedIndex() != 3 {
		t.Errorf("AppliedIndex = %d", m.AppliedIndex())
	}
	if _, ok, err := m.Node(base + "/missing"); ok || err != nil {
		t.Errorf("Node(missing) = %v, %v, want none", ok, err)
	}
	if _, ok, err := m.Record(common.Hash(pid(99))); ok || err != nil {
		t.Errorf("Record(unknown) = %v, %v, want none", ok, err)
	}
}

func bytesHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

func TestApplyTextAndBinary(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	const cid = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
	mustApply(t, m,
		l.batch(10, writeItem(1, alice, "notes/1", "just text")),
		l.batch(20, writeItem(2, alice, "assets/logo", `{"ledger:cid":"`+cid+`","name":"logo.png"}`)),
	)
	if n := mustNode(t, m, path(alice, "notes/1")); props(n) != `message="just text";` {
		t.Errorf("text node = %v", n)
	}
	evs, _ := m.EventsSince(0, 0)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.GetType()+"/"+ev.GetAction()+"/"+ev.GetCasCid())
	}
	want := []string{"content/write/", "content/write/", "binary/write/" + cid}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events = %q, want %q", kinds, want)
	}
	if evs[2].GetId() != 3 || evs[2].GetPath() != path(alice, "assets/logo") || evs[2].GetContentHash() == "" {
		t.Errorf("binary event = %v", evs[2])
	}
	if page, _ := m.EventsSince(1, 1); len(page) != 1 || page[0].GetId() != 2 {
		t.Errorf("EventsSince(1, 1) = %v", page)
	}
	if page, _ := m.EventsSince(3, 10); len(page) != 0 {
		t.Errorf("EventsSince(3) = %v", page)
	}
}

func TestRejectionsAndDuplicates(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	rejected := writeItem(2, alice, "x/rejected", `{"a":1}`)
	rejected.Rejection = "payment_not_found"
	rejected.Payment = nil
	outside := writeItem(4, alice, "x/outside", `{"a":1}`)
	outside.Proposal.Path = path(bob, "x/outside") // alice's proposal into bob's subtree
	shallow := writeItem(6, alice, "x", `{}`)
	shallow.Proposal.Path = path(alice, "x")[:len(path(alice, "x"))-2] // the organization itself
	noAction := writeItem(7, alice, "x/none", `{}`)
	noAction.Proposal.Action = ledgerpb.Action_ACTION_UNSPECIFIED
	noID := writeItem(8, alice, "x/noid", `{}`)
	noID.Proposal.Id = []byte{1, 2, 3}
	dotdot := writeItem(10, alice, "x/a", `{}`)
	dotdot.Proposal.Path = path(alice, "x") + "/../../../../../../../etc"
	nul := writeItem(11, alice, "x/a", `{}`)
	nul.Proposal.Path = path(alice, "x") + "/a\x00b"

	mustApply(t, m, l.batch(100,
		writeItem(1, alice, "x/ok", `{"v":1}`),
		rejected,
		writeItem(3, alice, "x/badjson", `{"v":`),
		outside,
		writeItem(5, alice, "x/fine", `{"v":1}`),
		shallow,
		noAction,
		noID,
		dotdot,
		nul,
	))
	for n, want := range map[int]string{
		2: "payment_not_found", 3: "invalid_field", 4: "path_forbidden", 6: "invalid_field", 7: "invalid_field",
		10: "invalid_field", 11: "invalid_field",
	} {
		rec := mustRecord(t, m, n)
		if rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED || rec.GetReason() != want || rec.GetCommitIndex() != 1 || rec.GetCommittedAtMs() != 0 {
			t.Errorf("record %d = %v, want REJECTED %s", n, rec, want)
		}
	}
	for _, p := range []string{path(alice, "x/rejected"), path(alice, "x/badjson"), path(bob, "x/outside")} {
		if _, ok, err := m.Node(p); ok || err != nil {
			t.Errorf("rejected proposal wrote %s", p)
		}
	}
	if _, ok, err := m.Record(common.Hash(pid(8))); ok || err != nil {
		t.Error("an item without a valid id was recorded")
	}
	seg, _, _ := m.Segment(1)
	if len(seg.GetProposalIds()) != 9 || len(seg.GetOps()) != 2 { // x/ok and x/fine
		t.Fatalf("segment = %d ids, %d ops", len(seg.GetProposalIds()), len(seg.GetOps()))
	}
	evs, _ := m.EventsSince(0, 0)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2 (only commits emit)", len(evs))
	}

	// The same ids again, with different payloads: nothing changes, no
	// segment, but the index and the state hash still advance.
	before := m.StateHash()
	again := writeItem(1, alice, "x/ok", `{"v":2}`)
	dupReject := writeItem(3, alice, "x/badjson", `{"v":3}`)
	e := l.batch(200, again, dupReject)
	mustApply(t, m, e)
	if n := mustNode(t, m, path(alice, "x/ok")); props(n) != "v=1;" || n.GetRevision() != 1 {
		t.Errorf("duplicate id rewrote the node: %v", n)
	}
	if rec := mustRecord(t, m, 3); rec.GetReason() != "invalid_field" {
		t.Errorf("duplicate id changed a rejected record: %v", rec)
	}
	if _, ok, err := m.Segment(e.Index); ok || err != nil {
		t.Error("an entry of duplicates produced a segment")
	}
	if m.StateHash() == before || m.AppliedIndex() != 2 {
		t.Error("the state hash or applied index did not advance on a no-op entry")
	}
	if evs, _ := m.EventsSince(0, 0); len(evs) != 2 {
		t.Errorf("duplicates emitted events: %d", len(evs))
	}
	// Within one entry the second occurrence of an id is the duplicate.
	mustApply(t, m, l.batch(300, writeItem(9, alice, "y/first", `{}`), writeItem(9, alice, "y/second", `{}`)))
	if _, ok, err := m.Node(path(alice, "y/second")); ok || err != nil {
		t.Error("the second use of an id in one batch was applied")
	}
}

func TestReplaceSemantics(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	base := path(alice, "doc")
	mustApply(t, m,
		l.batch(1, writeItem(1, alice, "doc", `{"t":1,"a":{"x":1,"inner":{"q":1}},"b":{"y":2}}`)),
		// Another proposal writes below the node and rewrites one nested child.
		l.batch(2, writeItem(2, alice, "doc/own", `{"mine":true}`)),
		l.batch(3, writeItem(3, alice, "doc/b", `{"y":3}`)),
	)
	if n := mustNode(t, m, base+"/b"); n.GetRevision() != 2 || !bytes.Equal(n.GetProposalId(), pid(3)) {
		t.Fatalf("doc/b = %v", n)
	}
	e := l.batch(4, writeItem(4, alice, "doc", `{"t":2,"a":{"x":2}}`))
	mustApply(t, m, e)

	if n := mustNode(t, m, base); n.GetRevision() != 2 || props(n) != "t=2;" {
		t.Errorf("doc = %v", n)
	}
	if n := mustNode(t, m, base+"/a"); n.GetRevision() != 2 || props(n) != "x=2;" {
		t.Errorf("doc/a = %v", n)
	}
	// Created by proposal 1's nested object, gone from the new message: deleted.
	if _, ok, err := m.Node(base + "/a/inner"); ok || err != nil {
		t.Error("doc/a/inner survived the replace")
	}
	// Rewritten by proposal 3 and written by proposal 2: not the old
	// revision's children any more, kept.
	for _, p := range []string{base + "/b", base + "/own"} {
		if _, ok, err := m.Node(p); !ok || err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	seg, _, _ := m.Segment(e.Index)
	var ops []string
	for _, op := range seg.GetOps() {
		if d := op.GetDeletePath(); d != "" {
			ops = append(ops, "-"+d[len(base):])
		} else {
			ops = append(ops, "+"+op.GetPut().GetPath()[len(base):])
		}
	}
	if want := []string{"-/a/inner", "+", "+/a"}; !slices.Equal(ops, want) {
		t.Errorf("segment ops = %q, want %q", ops, want)
	}

	// A record keeps its message only when the message created nested
	// children (the next replace expands it again); the others' messages
	// live in their nodes alone.
	for n, want := range map[int]bool{1: true, 2: false, 3: false, 4: true} {
		rec, _, err := m.Record(common.Hash(pid(n)))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(rec.GetProposal().GetMessage()) > 0; got != want {
			t.Errorf("proposal %d: record keeps its message = %v, want %v", n, got, want)
		}
	}
	// A replace after a replace by a flat message: nothing nested is left
	// to find, and the node is rewritten.
	mustApply(t, m, l.batch(5, writeItem(5, alice, "doc/b", `plain text`)), l.batch(6, writeItem(6, alice, "doc/b", `{"z":1}`)))
	if n := mustNode(t, m, base+"/b"); n.GetRevision() != 4 || props(n) != "z=1;" {
		t.Errorf("doc/b = %v", n)
	}
}

func TestDeleteSubtree(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	base := path(alice, "tree")
	mustApply(t, m,
		l.batch(1, writeItem(1, alice, "tree", `{"a":{"b":{"c":{}}}}`)),
		l.batch(2, writeItem(2, alice, "tree/z", `{}`)),
		// Siblings whose names extend "tree": not part of the subtree.
		l.batch(3, writeItem(3, alice, "tree-x", `{}`), writeItem(4, alice, "tree.y", `{}`), writeItem(5, alice, "treez", `{}`)),
	)
	e := l.batch(4, deleteItem(6, alice, "tree"))
	mustApply(t, m, e)
	for _, p := range []string{"", "/a", "/a/b", "/a/b/c", "/z"} {
		if _, ok, err := m.Node(base + p); ok || err != nil {
			t.Errorf("tree%s survived the delete", p)
		}
	}
	for _, p := range []string{"tree-x", "tree.y", "treez"} {
		if _, ok, err := m.Node(path(alice, p)); !ok || err != nil {
			t.Errorf("sibling %s: %v", p, err)
		}
	}
	rec := mustRecord(t, m, 6)
	if rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || rec.GetCommittedAtMs() != 4 {
		t.Errorf("delete record = %v", rec)
	}
	seg, _, _ := m.Segment(e.Index)
	var deleted []string
	for _, op := range seg.GetOps() {
		deleted = append(deleted, op.GetDeletePath()[len(base):])
	}
	if want := []string{"", "/a", "/a/b", "/a/b/c", "/z"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %q, want %q", deleted, want)
	}
	evs, _ := m.EventsSince(0, 0)
	last := evs[len(evs)-1]
	if last.GetType() != "delete" || last.GetAction() != "delete" || last.GetPath() != base || last.GetCommitIndex() != 4 {
		t.Errorf("delete event = %v", last)
	}
	// A new write at the path starts over at revision 1.
	mustApply(t, m, l.batch(5, writeItem(7, alice, "tree", `{}`)))
	if n := mustNode(t, m, base); n.GetRevision() != 1 {
		t.Errorf("revision after delete = %d", n.GetRevision())
	}
}

func TestChildren(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	var items []*ledgerpb.BatchItem
	n := 0
	add := func(sub, msg string) {
		n++
		items = append(items, writeItem(n, alice, sub, msg))
	}
	add("dir", `{}`)
	for _, c := range []string{"b", "a", "c-1", "c", "c.2"} {
		add("dir/"+c, `{}`)
	}
	// Many grandchildren under "c": Children must not walk them.
	for i := range 300 {
		add("dir/c/g"+string(rune('a'+i%26))+string(rune('a'+i/26)), `{"deep":{"deeper":{}}}`)
	}
	add("dir/implicit/leaf", `{}`) // "implicit" exists only as a path segment
	mustApply(t, m, l.batch(1, items...))

	got, err := m.Children(path(alice, "dir"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "c-1", "c.2", "implicit"}
	if !slices.Equal(got, want) {
		t.Fatalf("Children = %q, want %q", got, want)
	}
	if got, _ := m.Children(path(alice, "dir")+"/", 2); !slices.Equal(got, want[:2]) {
		t.Errorf("Children(limit 2, trailing slash) = %q", got)
	}
	if got, _ := m.ChildrenAfter(path(alice, "dir"), "c", 2); !slices.Equal(got, []string{"c-1", "c.2"}) {
		t.Errorf("ChildrenAfter(c) = %q", got)
	}
	if got, _ := m.Children("/", 0); !slices.Equal(got, []string{"ledger"}) {
		t.Errorf("Children(/) = %q", got)
	}
	if got, _ := m.Children(path(alice, "dir/a"), 0); len(got) != 0 {
		t.Errorf("Children(leaf) = %q", got)
	}
	if got, _ := m.Children(path(alice, "dir/c"), 0); len(got) != 300 {
		t.Errorf("Children(dir/c) has %d names, want 300", len(got))
	}
}

func TestChangedAndIndexGap(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	ch := m.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any Apply")
	default:
	}
	mustApply(t, m, l.empty())
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("Changed not closed after Apply")
	}
	if m.Changed() == ch {
		t.Fatal("Changed was not replaced")
	}
	l.empty()
	gap := l.empty()
	if err := m.Apply([]Entry{*gap}); !errors.Is(err, ErrIndexGap) {
		t.Fatalf("Apply after a gap = %v, want ErrIndexGap", err)
	}
	if m.AppliedIndex() != 1 {
		t.Fatalf("a failed Apply moved the applied index to %d", m.AppliedIndex())
	}
}

// scenario is a log touching every kind of entry and item.
func scenario(t testing.TB) *testLog { return scenarioWith(t, EventRetention{}) }

// scenarioWith is the scenario with batches carrying retention r.
func scenarioWith(t testing.TB, r EventRetention) *testLog {
	l := newLog(t)
	l.retention = r
	l.confChange()
	l.empty()
	l.batch(1, writeItem(1, alice, "a", `{"x":{"y":{}}}`), writeItem(2, bob, "b", "text"))
	l.add([]byte{0xff, 0x01, 0x02}) // does not decode
	l.term = 2
	l.empty()
	rej := writeItem(3, alice, "c", `{}`)
	rej.Rejection = "payment_insufficient"
	l.batch(2, rej, writeItem(4, alice, "a", `{"x":{}}`), writeItem(1, alice, "dup", `{}`))
	l.batch(3, deleteItem(5, bob, "b"), writeItem(6, alice, "img", `{"ledger:cid":"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"}`))
	l.finalize(5, 4)                              // the proposals above carry epoch 0; consensus/finalize
	l.batch(5, writeItem(7, alice, "late", `{}`)) // in a final epoch: FINALIZED at once
	l.finalize(3, 6)                              // behind the state: nothing
	// The first job starts the schedule; the second executes bob's delete
	// debt (debt_executed).
	l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Epoch: 1, AtMs: 6}}})
	l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Epoch: 2, AtMs: 6}}})
	// limit_set, and writes_blocked: bob's executed 0.10 is above 0.05.
	l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: bob[:], LimitMicros: 50_000, AtMs: 6}}})
	// debt_paid; 0.07 is still above the limit.
	l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: &ledgerpb.GcPay{Wallet: bob[:], AmountMicros: 30_000, TxHash: pid(0xd1), AtMs: 6}}})
	// Reorgs (reorg.go). Proposal 8 is committed on a log the chain then
	// takes back (marked orphaned) and mines again in another block (its
	// payment replaced, the mark gone). Proposal 9 is accepted, its payment
	// is taken back while its decision is on its way, and that decision is
	// rejected payment_orphaned.
	paid8 := writeItem(8, alice, "paid", `{}`)
	paid8.Payment = minedPayment(8, 0xb8)
	l.batch(6, paid8)
	l.reorg(8, minedPayment(8, 0xb8), nil, 7)
	l.reorg(8, minedPayment(8, 0xb8), minedPayment(8, 0xc8), 8)
	accept9 := writeItem(9, alice, "orphan", `{}`)
	accept9.Payment, accept9.Accept = nil, true
	l.batch(9, accept9)
	l.reorg(9, minedPayment(9, 0xb9), nil, 10)
	decide9 := writeItem(9, alice, "orphan", `{}`)
	decide9.Payment = minedPayment(9, 0xb9)
	l.batch(11, decide9)
	// A new leader announces itself (consensus/leader); a repeat and an
	// announcement of another term than the entry's change nothing.
	l.term = 3
	l.empty()
	l.leader(2, 3, 12)
	l.leader(2, 3, 13)
	l.leader(1, 2, 14)
	return l
}

func segmentChain(t testing.TB, m *Machine) (raws [][]byte) {
	t.Helper()
	var prev [32]byte
	err := m.SegmentsFrom(0, func(index uint64, raw []byte, hash [32]byte) bool {
		seg := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, seg); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(seg.GetPrevHash(), prev[:]) {
			t.Fatalf("segment %d: prev_hash %x, previous segment hashes to %x", index, seg.GetPrevHash(), prev)
		}
		if hash != sha256.Sum256(raw) {
			t.Fatalf("segment %d: hash is not SHA-256 of the stored bytes", index)
		}
		prev = hash
		raws = append(raws, append([]byte(nil), raw...))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if prev != m.SegmentHash() {
		t.Fatalf("SegmentHash %x, chain ends at %x", m.SegmentHash(), prev)
	}
	return raws
}

func TestDeterminism(t *testing.T) {
	entries := scenario(t).entries

	// Same entries, different Apply chunking, separate databases.
	a := newMachine(t)
	mustApply(t, a, entries...)
	b := newMachine(t)
	for _, e := range entries {
		mustApply(t, b, e)
	}
	if a.StateHash() != b.StateHash() || a.AppliedIndex() != b.AppliedIndex() || a.AppliedIndex() != uint64(len(entries)) {
		t.Fatalf("state hashes differ: %x@%d vs %x@%d", a.StateHash(), a.AppliedIndex(), b.StateHash(), b.AppliedIndex())
	}
	chainA, chainB := segmentChain(t, a), segmentChain(t, b)
	if len(chainA) != 6 || !slices.EqualFunc(chainA, chainB, bytes.Equal) {
		t.Fatalf("segment chains differ (%d vs %d segments)", len(chainA), len(chainB))
	}
	evA, _ := a.EventsSince(0, 0)
	evB, _ := b.EventsSince(0, 0)
	if len(evA) != 14 || !slices.EqualFunc(evA, evB, func(x, y *ledgerpb.Event) bool { return proto.Equal(x, y) }) {
		t.Fatalf("events differ: %d vs %d", len(evA), len(evB))
	}

	// The hash formula, recomputed independently for the first entries.
	var h [32]byte
	h = nextStateHash(h, 1, 1, [32]byte{})
	h = nextStateHash(h, 2, 1, [32]byte{})
	c := newMachine(t)
	mustApply(t, c, entries[:2]...)
	if c.StateHash() != h {
		t.Fatal("the state hash of two no-op entries does not follow the documented formula")
	}

	// One changed byte in one message changes the hash from there on.
	changed := scenario(t)
	item := writeItem(2, bob, "b", "texT")
	data, _ := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{
		SealedAtMs: 1, Epoch: 1000, Items: []*ledgerpb.BatchItem{writeItem(1, alice, "a", `{"x":{"y":{}}}`), item},
	}}})
	changed.entries[2].Data = data
	d := newMachine(t)
	mustApply(t, d, changed.entries...)
	if d.StateHash() == a.StateHash() {
		t.Fatal("a changed entry left the state hash unchanged")
	}
	// So does a different term for the same content.
	e := newMachine(t)
	other := scenario(t).entries
	other[1].Term = 7
	mustApply(t, e, other...)
	if e.StateHash() == a.StateHash() {
		t.Fatal("a different term left the state hash unchanged")
	}
}

// TestStateHashGolden pins the state hash of the scenario. Every validator
// of a cluster must compute the same hash, so a change here is a change of
// the replicated format: it needs a new state hash version (hash.go) and a
// coordinated upgrade, not a new constant.
func TestStateHashGolden(t *testing.T) {
	const want = "4d7484f80f283f851c2ef60a7855a58186654f2f70fccebe3ed47d36a8455d42"
	m := newMachine(t)
	mustApply(t, m, scenario(t).entries...)
	got := m.StateHash()
	if bytesHex(got[:]) != want {
		t.Fatalf("state hash of the scenario = %x, pinned %s", got, want)
	}
}

func TestRestartDoesNotReapply(t *testing.T) {
	dir := t.TempDir()
	db, m := openMachine(t, dir)
	entries := scenario(t).entries
	mustApply(t, m, entries[:5]...)
	hash, applied, events, seg := m.StateHash(), m.AppliedIndex(), m.LastEventID(), m.SegmentHash()
	counts, _ := m.Counts()
	m = reopen(t, db, dir)
	after, _ := m.Counts()
	if m.StateHash() != hash || m.AppliedIndex() != applied || m.LastEventID() != events || m.SegmentHash() != seg ||
		!proto.Equal(after, counts) || counts.GetCommitted() == 0 {
		t.Fatal("metadata did not survive the restart")
	}
	// Redelivered entries are skipped: nothing moves.
	mustApply(t, m, entries[:5]...)
	if m.StateHash() != hash || m.LastEventID() != events {
		t.Fatal("redelivered entries were applied again")
	}
	// The rest continues as if there had been no restart.
	mustApply(t, m, entries[3:]...)
	ref := newMachine(t)
	mustApply(t, ref, entries...)
	if m.StateHash() != ref.StateHash() || m.LastEventID() != ref.LastEventID() {
		t.Fatal("state after restart differs from an uninterrupted run")
	}
}
