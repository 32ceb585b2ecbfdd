package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// testSnapshot is a snapshot as consensus hands it over: its index, its
// term and the data.
type testSnapshot struct {
	index, term uint64
	data        []byte
}

func (s testSnapshot) verify(m *Machine) error {
	return m.VerifySnapshot(s.index, s.term, bytes.NewReader(s.data))
}
func (s testSnapshot) restore(m *Machine) error {
	return m.RestoreSnapshot(s.index, s.term, bytes.NewReader(s.data))
}

// snapshotOf encodes m's state at its applied index as a snapshot in term.
func snapshotOf(t testing.TB, m *Machine, term uint64) testSnapshot {
	t.Helper()
	s, err := m.newSnapshot(m.AppliedIndex(), term)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var buf bytes.Buffer
	n, err := s.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return testSnapshot{index: s.Index(), term: term, data: buf.Bytes()}
}

// stateKeys returns every key and value under s/ as "key=value" lines.
func stateKeys(t testing.TB, m *Machine) []string {
	t.Helper()
	lo := []byte(storage.StatePrefix)
	it, err := m.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: storage.PrefixEnd(lo)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, fmt.Sprintf("%x=%x", it.Key(), it.Value()))
	}
	return out
}

func sameState(t testing.TB, got, want *Machine) {
	t.Helper()
	if got.AppliedIndex() != want.AppliedIndex() || got.StateHash() != want.StateHash() ||
		got.SegmentHash() != want.SegmentHash() || got.LastEventID() != want.LastEventID() {
		t.Fatalf("metadata: applied %d hash %x seg %x event %d; want %d %x %x %d",
			got.AppliedIndex(), got.StateHash(), got.SegmentHash(), got.LastEventID(),
			want.AppliedIndex(), want.StateHash(), want.SegmentHash(), want.LastEventID())
	}
	g, w := stateKeys(t, got), stateKeys(t, want)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("stored state differs: %d keys, want %d", len(g), len(w))
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	entries := scenario(t).entries
	src := newMachine(t)
	mustApply(t, src, entries...)
	snap := snapshotOf(t, src, 2)

	dst := newMachine(t)
	changed := dst.Changed()
	if err := snap.verify(dst); err != nil {
		t.Fatal(err)
	}
	if err := snap.restore(dst); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Error("Changed was not signalled by the restore")
	}
	sameState(t, dst, src)

	// The reads agree.
	for _, p := range []string{path(alice, "a"), path(alice, "a/x"), path(alice, "img")} {
		a, okA, errA := src.Node(p)
		b, okB, errB := dst.Node(p)
		if errA != nil || errB != nil || !okA || !okB || a.String() != b.String() {
			t.Fatalf("Node(%s): %v, %v", p, errA, errB)
		}
	}
	if _, ok, err := dst.Node(path(bob, "b")); ok || err != nil {
		t.Fatal("a deleted node came back with the snapshot")
	}
	for _, id := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9} {
		a, _, _ := src.Record(common.Hash(pid(id)))
		b, _, _ := dst.Record(common.Hash(pid(id)))
		if a.String() != b.String() {
			t.Fatalf("record %d differs", id)
		}
	}
	evA, _ := src.EventsSince(0, 0)
	evB, _ := dst.EventsSince(0, 0)
	if len(evA) != 14 || len(evA) != len(evB) {
		t.Fatalf("events: %d vs %d", len(evA), len(evB))
	}
	if a, b := segmentChain(t, src), segmentChain(t, dst); len(a) != len(b) {
		t.Fatalf("segment chains: %d vs %d", len(a), len(b))
	}

	// Both go on identically: the hash chain continues from the snapshot.
	more := newLog(t)
	more.next, more.term = src.AppliedIndex()+1, 3
	more.batch(9, writeItem(20, alice, "after", `{"k":1}`), deleteItem(21, alice, "a"))
	more.empty()
	mustApply(t, src, more.entries...)
	mustApply(t, dst, more.entries...)
	sameState(t, dst, src)

	// Equal states encode to identical bytes.
	if !bytes.Equal(snapshotOf(t, src, 3).data, snapshotOf(t, dst, 3).data) {
		t.Fatal("equal states produced different snapshot data")
	}
}

func TestRestoreReplacesExistingState(t *testing.T) {
	src := newMachine(t)
	l := newLog(t)
	l.batch(1, writeItem(1, alice, "kept", `{"v":1}`))
	l.batch(2, writeItem(2, alice, "other", `{"v":2}`))
	mustApply(t, src, l.entries...)
	snap := snapshotOf(t, src, 1)

	// dst is ahead on a different history (as a diverged follower would
	// never be, but the restore must not care): restoring an older
	// snapshot is refused, a newer one replaces everything.
	dst := newMachine(t)
	o := newLog(t)
	o.batch(5, writeItem(7, bob, "stale", `{"gone":true}`))
	mustApply(t, dst, o.entries...)
	if err := snap.restore(dst); err != nil {
		t.Fatal(err)
	}
	sameState(t, dst, src)
	if _, ok, err := dst.Node(path(bob, "stale")); ok || err != nil {
		t.Fatal("a key from before the restore survived it")
	}

	old := snapshotOf(t, src, 1)
	l.batch(3, writeItem(3, alice, "third", `{}`))
	mustApply(t, dst, l.entries[2:]...)
	if err := old.restore(dst); !errors.Is(err, ErrStaleSnapshot) {
		t.Fatalf("restoring an older snapshot = %v, want ErrStaleSnapshot", err)
	}
	// The same index again is accepted (a restart that restores twice).
	same := snapshotOf(t, dst, 1)
	if err := same.restore(dst); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreKeepsTheStoreFormat: a snapshot replaces the state, not the
// local keys, so the store it is restored into keeps its format and opens
// again.
func TestRestoreKeepsTheStoreFormat(t *testing.T) {
	src := newMachine(t)
	mustApply(t, src, scenario(t).entries...)
	snap := snapshotOf(t, src, 2)

	dir := t.TempDir()
	db := openDB(t, dir)
	dst, err := Open(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.restore(dst); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir) // fails on a store without this build's format
	defer db.Close()
	v, err := db.Get([]byte(storage.StoreFormatKey))
	if n, _ := storage.Uint64(v); err != nil || n != storage.StoreFormat {
		t.Fatalf("store format after a restore: %x, %v; want %d", v, err, storage.StoreFormat)
	}
	if dst, err = Open(db, Options{}); err != nil {
		t.Fatal(err)
	}
	if dst.StateHash() != src.StateHash() {
		t.Fatal("the restored state did not survive the reopen")
	}
}

// TestSnapshotWhileApplying: the snapshot is the state at the index it was
// opened at, even though entries keep applying while it is encoded.
func TestSnapshotWhileApplying(t *testing.T) {
	m := newMachine(t)
	ref := newMachine(t)
	l := newLog(t)
	for i := range 20 {
		l.batch(int64(i), writeItem(i, alice, fmt.Sprintf("p/%d", i), fmt.Sprintf(`{"v":%d,"n":{"w":%d}}`, i, i)))
	}
	mustApply(t, m, l.entries...)
	mustApply(t, ref, l.entries...)
	s, err := m.OpenSnapshot(m.AppliedIndex(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := m.OpenSnapshot(m.AppliedIndex()+1, 1); !errors.Is(err, ErrSnapshotIndex) {
		t.Fatalf("OpenSnapshot at the wrong index = %v, want ErrSnapshotIndex", err)
	}

	// Keep applying — rewrites and deletes of the same paths — while the
	// snapshot is written.
	more := newLog(t)
	more.next = m.AppliedIndex() + 1
	for i := range 200 {
		if i%3 == 0 {
			more.batch(int64(100+i), deleteItem(1000+i, alice, fmt.Sprintf("p/%d", i%20)))
		} else {
			more.batch(int64(100+i), writeItem(1000+i, alice, fmt.Sprintf("p/%d", i%20), fmt.Sprintf(`{"v":%d}`, -i)))
		}
	}
	// Half of them before the snapshot is read at all, half during.
	mustApply(t, m, more.entries[:100]...)
	done := make(chan error, 1)
	go func() {
		for _, e := range more.entries[100:] {
			if err := m.Apply([]Entry{*e}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var buf bytes.Buffer
	if _, err := s.WriteTo(&slowWriter{w: &buf}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.AppliedIndex() != ref.AppliedIndex()+200 {
		t.Fatal("the applies did not all run")
	}

	dst := newMachine(t)
	snap := testSnapshot{index: ref.AppliedIndex(), term: 1, data: buf.Bytes()}
	if err := snap.restore(dst); err != nil {
		t.Fatal(err)
	}
	sameState(t, dst, ref)
}

// slowWriter yields before every write so that the applies interleave.
type slowWriter struct{ w io.Writer }

func (s *slowWriter) Write(p []byte) (int, error) {
	runtime.Gosched()
	return s.w.Write(p)
}

// encodeRecords builds snapshot data around arbitrary records with a valid
// checksum, to reach the checks behind it.
func encodeRecords(h snapshotHeader, pairs ...[2]string) []byte {
	buf := h.append(nil)
	for _, kv := range pairs {
		buf = binary.AppendUvarint(buf, uint64(len(kv[0])))
		buf = append(buf, kv[0]...)
		buf = binary.AppendUvarint(buf, uint64(len(kv[1])))
		buf = append(buf, kv[1]...)
	}
	buf = binary.AppendUvarint(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(pairs)))
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	src := newMachine(t)
	mustApply(t, src, scenario(t).entries...)
	good := snapshotOf(t, src, 2)
	data := good.data

	dst := newMachine(t)
	l := newLog(t)
	l.batch(1, writeItem(1, bob, "mine", `{"keep":true}`))
	mustApply(t, dst, l.entries...)
	before := stateKeys(t, dst)
	beforeHash := dst.StateHash()

	h := snapshotHeader{index: good.index, term: good.term, stateHash: src.StateHash()}
	applied := [2]string{storage.AppliedIndexKey, string(storage.PutUint64(good.index))}
	hash := [2]string{storage.StateHashKey, string(h.stateHash[:])}
	flip := func(i int) []byte {
		d := bytes.Clone(data)
		d[i] ^= 0x40
		return d
	}
	at := func(data []byte) testSnapshot { return testSnapshot{index: good.index, term: good.term, data: data} }
	cases := map[string]testSnapshot{
		"empty":           at(nil),
		"wrong index":     {index: good.index + 1, term: good.term, data: data},
		"wrong term":      {index: good.index, term: good.term + 1, data: data},
		"magic":           at(flip(0)),
		"version":         at(flip(11)),
		"header index":    at(flip(23)),
		"state hash":      at(flip(40)),
		"record":          at(flip(len(data) / 2)),
		"count":           at(flip(len(data) - 5)),
		"checksum":        at(flip(len(data) - 1)),
		"trailing byte":   at(append(bytes.Clone(data), 0)),
		"unsorted keys":   at(encodeRecords(h, hash, applied)),
		"duplicate key":   at(encodeRecords(h, applied, applied, hash)),
		"key outside s/":  at(encodeRecords(h, [2]string{"r/hs", "x"}, applied, hash)),
		"applied differs": at(encodeRecords(h, [2]string{storage.AppliedIndexKey, string(storage.PutUint64(1))}, hash)),
		"hash differs":    at(encodeRecords(h, applied, [2]string{storage.StateHashKey, strings.Repeat("x", 32)})),
		"no hash":         at(encodeRecords(h, applied)),
		"bad event seq":   at(encodeRecords(h, [2]string{storage.EventSeqKey, "x"}, applied, hash)),
	}
	for cut := 1; cut < len(data); cut += max(1, len(data)/40) {
		cases[fmt.Sprintf("truncated to %d", cut)] = at(data[:cut])
	}
	for name, snap := range cases {
		if err := snap.verify(dst); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: VerifySnapshot = %v, want ErrBadSnapshot", name, err)
		}
		if err := snap.restore(dst); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: RestoreSnapshot = %v, want ErrBadSnapshot", name, err)
		}
	}
	if dst.StateHash() != beforeHash || dst.AppliedIndex() != 1 || strings.Join(stateKeys(t, dst), "\n") != strings.Join(before, "\n") {
		t.Fatal("a refused snapshot changed the state")
	}
	// The crafted encoder is right: with sorted, matching records it passes.
	if _, err := decodeSnapshot(bytes.NewReader(encodeRecords(h, applied, hash)), nil); err != nil {
		t.Fatalf("a well-formed crafted snapshot was refused: %v", err)
	}
}

// FuzzDecodeSnapshot: the decoder never panics, and whatever it accepts is
// the one canonical encoding of what it decoded.
//
// The seeds are built without a database: a Pebble instance in every fuzz
// worker stalls the fuzzer.
func FuzzDecodeSnapshot(f *testing.F) {
	h := snapshotHeader{index: 7, term: 1}
	h.stateHash[0] = 0xab
	seed := encodeRecords(h, // in key order
		[2]string{string(storage.SegmentKey(7, 0)), strings.Repeat("s", 200)},
		[2]string{storage.AppliedIndexKey, string(storage.PutUint64(7))},
		[2]string{storage.EventSeqKey, string(storage.PutUint64(3))},
		[2]string{storage.StateHashKey, string(h.stateHash[:])},
		[2]string{storage.SegmentHashKey, strings.Repeat("h", 32)},
		[2]string{string(storage.NodeKey(path(alice, "a/b"))), "node"},
		[2]string{string(storage.ProposalKey([32]byte(pid(1)))), "record"},
		[2]string{string(storage.EventKey(3)), "event"},
	)
	if _, err := decodeSnapshot(bytes.NewReader(seed), nil); err != nil {
		f.Fatalf("seed: %v", err)
	}
	f.Add(seed)
	f.Add([]byte(snapshotMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var pairs [][2]string
		h, err := decodeSnapshot(bytes.NewReader(data), func(k, v []byte) error {
			pairs = append(pairs, [2]string{string(k), string(v)})
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v does not wrap ErrBadSnapshot", err)
			}
			return
		}
		if again := encodeRecords(h, pairs...); !bytes.Equal(again, data) {
			t.Fatalf("accepted data is not the canonical encoding of its records")
		}
	})
}

// BenchmarkSnapshot creates and restores a snapshot of 100,000 small nodes
// (with their proposal records, events and segments) and reports the
// snapshot bytes per second.
func BenchmarkSnapshot(b *testing.B) {
	const nodes, perEntry = 100_000, 1000
	m := newMachine(b)
	l := newLog(b)
	for e := range nodes / perEntry {
		items := make([]*ledgerpb.BatchItem, perEntry)
		for j := range items {
			n := e*perEntry + j
			items[j] = writeItem(n, alice, fmt.Sprintf("bench/%03d/%04d", e, j), fmt.Sprintf(`{"n":%d}`, n))
			items[j].Proposal.Id[29] = byte(n >> 16)
		}
		mustApply(b, m, l.batch(int64(e), items...))
	}
	snap := snapshotOf(b, m, 1)
	size := int64(len(snap.data))
	b.Logf("snapshot of %d nodes: %.1f MiB", nodes, float64(size)/(1<<20))

	b.Run("create", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			s, err := m.OpenSnapshot(m.AppliedIndex(), 1)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run("restore", func(b *testing.B) {
		dst := newMachine(b)
		b.SetBytes(size)
		for b.Loop() {
			if err := snap.restore(dst); err != nil {
				b.Fatal(err)
			}
		}
		if dst.StateHash() != m.StateHash() {
			b.Fatal("restored state hash differs")
		}
	})
}
