package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"defaults", Options{Dir: "x"}, true},
		{"no dir", Options{}, false},
		{"negative cache", Options{Dir: "x", CacheSize: -1}, false},
		{"tiny memtable", Options{Dir: "x", MemTableSize: 1024}, false},
		{"cache smaller than memtables", Options{Dir: "x", CacheSize: 64 << 20, MemTableSize: 32 << 20}, false},
	} {
		err := tc.opts.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: error %v does not wrap ErrInvalidOptions", tc.name, err)
		}
	}
}

func TestOpenGetReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if db.DurableWrites() != pebble.Sync {
		t.Fatal("sync must be on by default")
	}
	if _, err := db.Get([]byte("missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(missing) = %v, want ErrNotFound", err)
	}
	if err := db.Pebble().Set([]byte(AppliedIndexKey), PutUint64(42), db.DurableWrites()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, err := db.Get([]byte(AppliedIndexKey))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := Uint64(v); !ok || n != 42 {
		t.Fatalf("applied = %v, want 42", v)
	}
}

func TestIntegerKeysSortNumerically(t *testing.T) {
	idx := []uint64{0, 1, 255, 256, 1 << 32, 1<<64 - 1}
	for i := 1; i < len(idx); i++ {
		firstPart := func(index uint64) []byte { return SegmentKey(index, 0) }
		for _, f := range []func(uint64) []byte{RaftEntryKey, EventKey, firstPart, GcRunKey} {
			if bytes.Compare(f(idx[i-1]), f(idx[i])) >= 0 {
				t.Fatalf("key(%d) does not sort before key(%d)", idx[i-1], idx[i])
			}
		}
	}
	if n, ok := RaftEntryIndex(RaftEntryKey(300)); !ok || n != 300 {
		t.Fatalf("RaftEntryIndex round trip = %d, %v", n, ok)
	}
}

// TestSegmentKeysAreChainOrder: the parts of a compaction's segments sort
// after the segments of earlier indexes and before those of later ones, so
// key order is chain order and a generation is one key range.
func TestSegmentKeysAreChainOrder(t *testing.T) {
	keys := [][]byte{SegmentKey(7, 0), SegmentKey(8, 0), SegmentKey(8, 1), SegmentKey(8, 1<<32-1), SegmentKey(9, 0), SegmentKey(256, 0)}
	for i := 1; i < len(keys); i++ {
		if bytes.Compare(keys[i-1], keys[i]) >= 0 {
			t.Fatalf("segment key %d %x does not sort before key %d %x", i-1, keys[i-1], i, keys[i])
		}
	}
	if idx, part, ok := SegmentKeyIndex(SegmentKey(300, 2)); !ok || idx != 300 || part != 2 {
		t.Fatalf("SegmentKeyIndex round trip = %d, %d, %v", idx, part, ok)
	}
	if _, _, ok := SegmentKeyIndex(EventKey(300)); ok {
		t.Fatal("SegmentKeyIndex accepted an event key")
	}
}

// TestDebtTxKeyIsPerLog: each DebtPaid log of a transaction has its own
// spent mark, of one fixed width, so no mark is a prefix of another.
func TestDebtTxKeyIsPerLog(t *testing.T) {
	var tx, other [32]byte
	tx[0], other[0] = 1, 2
	keys := [][]byte{DebtTxKey(tx, 0), DebtTxKey(tx, 1), DebtTxKey(tx, 1<<32-1), DebtTxKey(other, 0)}
	for i, k := range keys {
		if len(k) != len(debtTxPrefix)+32+4 || !bytes.HasPrefix(k, []byte(debtTxPrefix)) {
			t.Fatalf("key %d: %x", i, k)
		}
		for j := range i {
			if bytes.Equal(k, keys[j]) {
				t.Fatalf("keys %d and %d are equal: %x", j, i, k)
			}
		}
	}
	if bytes.Compare(keys[0], keys[1]) >= 0 || bytes.Compare(keys[1], keys[2]) >= 0 {
		t.Fatal("a transaction's marks do not sort by log index")
	}
}

func TestNodeKeysKeepSubtreesContiguous(t *testing.T) {
	paths := []string{"/a/b-c", "/a/b/x/y", "/a/b", "/a/b.d", "/a/b/x", "/a/ba", "/a/b/z"}
	keys := make([][]byte, len(paths))
	for i, p := range paths {
		keys[i] = NodeKey(p)
		if back, ok := NodePath(keys[i]); !ok || back != p {
			t.Fatalf("NodePath(NodeKey(%q)) = %q", p, back)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	var got []string
	for _, k := range keys {
		p, _ := NodePath(k)
		got = append(got, p)
	}
	want := []string{"/a/b", "/a/b/x", "/a/b/x/y", "/a/b/z", "/a/b-c", "/a/b.d", "/a/ba"}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %q, want %q", got, want)
	}
	lo, hi := SubtreeBounds("/a/b")
	var in []string
	for _, p := range want {
		k := NodeKey(p)
		if bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 {
			in = append(in, p)
		}
	}
	if !slices.Equal(in, []string{"/a/b", "/a/b/x", "/a/b/x/y", "/a/b/z"}) {
		t.Fatalf("subtree of /a/b = %q", in)
	}
	clo, chi := ChildrenBounds("/a/b/")
	if !bytes.HasPrefix(NodeKey("/a/b/x"), clo) || bytes.Compare(NodeKey("/a/b/z"), chi) >= 0 || bytes.Compare(NodeKey("/a/b"), clo) >= 0 {
		t.Fatal("ChildrenBounds does not bracket exactly the descendants")
	}
	rlo, _ := ChildrenBounds("/")
	if !bytes.HasPrefix(NodeKey("/a"), rlo) {
		t.Fatal("root ChildrenBounds does not cover /a")
	}
}

func TestPrefixEnd(t *testing.T) {
	if got := PrefixEnd([]byte("s/")); string(got) != "s0" {
		t.Fatalf("PrefixEnd(s/) = %q", got)
	}
	if got := PrefixEnd([]byte{0xff, 0xff}); got != nil {
		t.Fatalf("PrefixEnd(ff ff) = %x, want nil", got)
	}
}

// TestSnapshotDirInsideTheDatabase: Pebble leaves the snapshot directory
// (and the files in it) alone, on the OS file system and on another FS.
func TestSnapshotDirInsideTheDatabase(t *testing.T) {
	for name, opts := range map[string]Options{
		"os":  {Dir: t.TempDir()},
		"mem": {Dir: "/data", FS: vfs.NewMem()},
	} {
		db, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		fs, dir := db.FS(), db.SnapshotDir()
		if dir != fs.PathJoin(opts.Dir, SnapshotDirName) {
			t.Fatalf("%s: SnapshotDir = %s", name, dir)
		}
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(fs.PathJoin(dir, "x.snap"), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := db.Pebble().Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if db, err = Open(opts); err != nil {
			t.Fatalf("%s: reopen with a snapshot directory: %v", name, err)
		}
		f, err = fs.Open(fs.PathJoin(dir, "x.snap"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := io.ReadAll(f)
		f.Close()
		if string(got) != "data" {
			t.Fatalf("%s: snapshot file holds %q", name, got)
		}
		db.Close()
	}
}

// BenchmarkGet reads keys present and absent in a database whose data was
// compacted into L6 and is ten times the block cache, as a running
// validator's mostly is: Get (filters in every level) against Pebble's own
// Get (no filters in L6).
func BenchmarkGet(b *testing.B) {
	db, err := Open(Options{Dir: b.TempDir(), NoSync: true, MemTableSize: 4 << 20, CacheSize: 20 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const keys = 200_000
	value := bytes.Repeat([]byte("v"), 1024)
	key := func(i int) []byte { return fmt.Appendf(nil, "s/p/%016x", uint64(i)*0x9e3779b97f4a7c15) }
	batch := db.Pebble().NewBatch()
	for i := range keys {
		if err := batch.Set(key(2*i), value, nil); err != nil { // even: present, odd: absent
			b.Fatal(err)
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		b.Fatal(err)
	}
	if err := db.Pebble().Compact(context.Background(), []byte("s/"), []byte("s0"), true); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		get  func(k []byte) ([]byte, error)
	}{
		{"storage.Get", db.Get},
		{"pebble.Get", func(k []byte) ([]byte, error) {
			v, closer, err := db.Pebble().Get(k)
			if err != nil {
				return nil, err
			}
			out := append([]byte(nil), v...)
			return out, closer.Close()
		}},
	} {
		for _, present := range []bool{false, true} {
			b.Run(fmt.Sprintf("reader=%s/present=%t", bc.name, present), func(b *testing.B) {
				n := 0
				for b.Loop() {
					i := 2*(n%keys) + 1
					if present {
						i--
					}
					n++
					_, err := bc.get(key(i))
					if present != (err == nil) {
						b.Fatalf("key %d: %v", i, err)
					}
				}
			})
		}
	}
}

// TestValuesSeparated: a state value of SeparatedValueMinSize bytes goes to
// a blob file when flushed, a smaller one and a raft log entry stay in the
// tables, and InlineValues keeps them all inline; every one reads back.
func TestValuesSeparated(t *testing.T) {
	large := bytes.Repeat([]byte("message "), SeparatedValueMinSize/8)
	writes := []struct {
		key, value []byte
	}{
		{NodeKey("/a"), large},
		{RaftEntryKey(7), large},
		{AccountKey([20]byte{1}), []byte("small")},
	}
	for _, tc := range []struct {
		name         string
		inline       bool
		wantSeparate uint64 // values in blob files
	}{
		{"separated", false, uint64(len(large))},
		{"inline", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(Options{Dir: t.TempDir(), NoSync: true, InlineValues: tc.inline})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, w := range writes {
				if err := db.Pebble().Set(w.key, w.value, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Pebble().Flush(); err != nil {
				t.Fatal(err)
			}
			if got := db.Pebble().Metrics().BlobFiles.ValueSize; got != tc.wantSeparate {
				t.Errorf("blob files hold %d B of values, want %d (the node's only)", got, tc.wantSeparate)
			}
			for _, w := range writes {
				for name, get := range map[string]func(pebble.Reader, []byte) ([]byte, error){"Get": Get, "GetRecent": GetRecent} {
					if v, err := get(db.Pebble(), w.key); err != nil || !bytes.Equal(v, w.value) {
						t.Errorf("%s(%q) = %d B, %v; want the %d B written", name, w.key, len(v), err, len(w.value))
					}
				}
			}
			if _, err := GetRecent(db.Pebble(), AccountKey([20]byte{2})); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetRecent of an absent key: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestDroppedSegmentsLeaveNoBlobGarbage: nodes and segments written in one
// flush go to separate blob files, so dropping the segments (cleanup's
// range deletion, compacted) deletes their blob file whole and the nodes'
// blob file holds no garbage a rewrite would have to copy around.
func TestDroppedSegmentsLeaveNoBlobGarbage(t *testing.T) {
	db, err := Open(Options{Dir: t.TempDir(), NoSync: true, manualCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := bytes.Repeat([]byte("message "), 2*SeparatedValueMinSize/8)
	const n = 16
	for i := range uint64(n) {
		if err := db.Pebble().Set(NodeKey(fmt.Sprintf("/a/%d", i)), value, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Pebble().Set(SegmentKey(i, 0), value, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := db.Pebble().Metrics().BlobFiles.ValueSize, uint64(2*n*len(value)); got != want {
		t.Fatalf("blob files hold %d B of values after the flush, want %d (nodes and segments)", got, want)
	}
	lower, upper := SegmentBounds()
	if err := db.Pebble().DeleteRange(lower, upper, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactRange(context.Background(), lower, upper); err != nil {
		t.Fatal(err)
	}
	m := db.Pebble().Metrics()
	if got, want := m.BlobFiles.ValueSize, uint64(n*len(value)); got != want {
		t.Errorf("blob files hold %d B of values after the segments were dropped, want %d (the nodes' only)", got, want)
	}
	if m.BlobFiles.ReferencedValueSize != m.BlobFiles.ValueSize {
		t.Errorf("blob files hold %d B of unreferenced values, want none", m.BlobFiles.ValueSize-m.BlobFiles.ReferencedValueSize)
	}
}

func TestSpanPolicies(t *testing.T) {
	fast := pebble.SpanPolicy{PreferFastCompression: true}
	policies := spanPolicies([]policySpan{
		{Start: []byte("b"), End: []byte("c"), Policy: fast},
		{Start: []byte("e"), End: []byte("f")},
	})
	for _, tc := range []struct {
		key, wantEnd string
		want         pebble.SpanPolicy
	}{
		{"a", "b", pebble.SpanPolicy{}},
		{"b", "c", fast},
		{"bz", "c", fast},
		{"c", "e", pebble.SpanPolicy{}},
		{"e", "f", pebble.SpanPolicy{}},
		{"f", "", pebble.SpanPolicy{}},
	} {
		got, end, err := policies([]byte(tc.key))
		if err != nil || got != tc.want || string(end) != tc.wantEnd {
			t.Errorf("policy of %q = %+v up to %q, %v; want %+v up to %q", tc.key, got, end, err, tc.want, tc.wantEnd)
		}
	}
}

// TestKeySpaceUsage: the disk of flushed nodes and segments shows in their
// key spaces, and the others stay empty.
func TestKeySpaceUsage(t *testing.T) {
	db, err := Open(Options{Dir: t.TempDir(), NoSync: true, manualCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 4<<10)
	for i := range uint64(64) { // 256 KiB each of incompressible nodes and segments
		rand.Read(value)
		if err := db.Pebble().Set(NodeKey(fmt.Sprintf("/a/%d", i)), value, nil); err != nil {
			t.Fatal(err)
		}
		rand.Read(value)
		if err := db.Pebble().Set(SegmentKey(i, 0), value, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	spaces, err := db.KeySpaceUsage()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ks := range spaces {
		names = append(names, ks.Name)
		switch ks.Name {
		case "nodes", "segments":
			if ks.Bytes < 256<<10 || ks.Bytes > 320<<10 {
				t.Errorf("%s take %d B, want the 256 KiB written and their keys", ks.Name, ks.Bytes)
			}
		case "local": // the store format (format.go), in a table of its own
			if ks.Bytes > 4<<10 {
				t.Errorf("local takes %d B, want a small table", ks.Bytes)
			}
		default:
			if ks.Bytes != 0 {
				t.Errorf("%s take %d B, want none", ks.Name, ks.Bytes)
			}
		}
	}
	if want := []string{"local", "raftLog", "segments", "nodes", "records", "events", "otherState"}; !slices.Equal(names, want) {
		t.Errorf("key spaces %v, want %v", names, want)
	}
}
