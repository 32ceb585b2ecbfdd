package segarchive_test

import (
	"archive/tar"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/segarchive"
)

// segment is one stored segment of a test chain.
type segment struct {
	index uint64
	part  uint32
	raw   []byte
}

// chain makes n linked segments from index first (gaps of one index between
// them, as entries that change nothing leave), linked to prev.
func chain(t testing.TB, first uint64, n int, prev [32]byte) []segment {
	t.Helper()
	out := make([]segment, 0, n)
	for i := range n {
		seg := &ledgerpb.Segment{Index: first + 2*uint64(i), Term: 2, Epoch: 7, PrevHash: prev[:], Ops: []*ledgerpb.SegmentOp{
			{Op: &ledgerpb.SegmentOp_Put{Put: &ledgerpb.Node{Path: "/a/b"}}},
			{Op: &ledgerpb.SegmentOp_DeletePath{DeletePath: "/a/c"}},
		}}
		raw, err := proto.Marshal(seg)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, segment{index: seg.GetIndex(), raw: raw})
		prev = segarchive.Hash(raw)
	}
	return out
}

func hexHash(h [32]byte) string { return "0x" + hex.EncodeToString(h[:]) }

// manifest describes segs as the validator does.
func manifest(name string, segs []segment) segarchive.Manifest {
	m := segarchive.Manifest{Name: name, Segments: len(segs)}
	for _, s := range segs {
		m.Bytes += uint64(len(s.raw))
	}
	if len(segs) > 0 {
		first := &ledgerpb.Segment{}
		_ = proto.Unmarshal(segs[0].raw, first)
		m.FirstIndex, m.LastIndex = segs[0].index, segs[len(segs)-1].index
		var prev [32]byte
		copy(prev[:], first.GetPrevHash())
		m.PrevHash = hexHash(prev)
		m.HeadHash = hexHash(segarchive.Hash(segs[len(segs)-1].raw))
	}
	return m
}

// archive writes segs under m.
func archive(t testing.TB, m segarchive.Manifest, segs []segment) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := segarchive.NewWriter(&buf, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if err := w.Add(s.index, s.part, s.raw); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestArchiveVerifiesAcrossFiles(t *testing.T) {
	first := chain(t, 3, 5, [32]byte{})
	head := segarchive.Hash(first[len(first)-1].raw)
	second := chain(t, 20, 4, head)
	a1 := archive(t, manifest("data00000a.tar", first), first)
	a2 := archive(t, manifest("data00001a.tar", second), second)

	var c segarchive.Chain
	s1, err := c.Verify(bytes.NewReader(a1))
	if err != nil {
		t.Fatal(err)
	}
	if s1.Segments != 5 || s1.FirstIndex != 3 || s1.LastIndex != 11 || s1.HeadHash != head ||
		s1.NodeWrites != 5 || s1.NodeDeletes != 5 || s1.Manifest.Name != "data00000a.tar" {
		t.Fatalf("first archive: %+v", s1)
	}
	s2, err := c.Verify(bytes.NewReader(a2))
	if err != nil {
		t.Fatal(err)
	}
	if s2.PrevHash != head || s2.LastIndex != 26 {
		t.Fatalf("second archive: %+v", s2)
	}
	if last, h, ok := c.Head(); !ok || last != 26 || h != s2.HeadHash {
		t.Fatalf("chain head %d %x %v", last, h, ok)
	}

	// Out of order, the second file does not link to what came before.
	var other segarchive.Chain
	if _, err := other.Verify(bytes.NewReader(a2)); err != nil {
		t.Fatalf("an archive alone verifies from wherever it starts: %v", err)
	}
	if _, err := other.Verify(bytes.NewReader(a1)); !errors.Is(err, segarchive.ErrMalformed) {
		t.Fatalf("an older archive after a newer one: %v", err)
	}
}

func TestArchiveIsDeterministicAndPlainTar(t *testing.T) {
	segs := chain(t, 1, 3, [32]byte{})
	m := manifest("data00000a.tar", segs)
	a, b := archive(t, m, segs), archive(t, m, segs)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same segments differ")
	}
	tr := tar.NewReader(bytes.NewReader(a))
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		names = append(names, hdr.Name)
		if hdr.Name == segarchive.EntryName(segs[0].index, 0) && !bytes.Equal(body, segs[0].raw) {
			t.Fatal("a member does not hold the stored segment bytes")
		}
	}
	want := []string{segarchive.ManifestName, "00000000000000000001.seg", "00000000000000000003.seg", "00000000000000000005.seg"}
	if len(names) != len(want) {
		t.Fatalf("members %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("members %v, want %v", names, want)
		}
	}
}

func TestArchiveFaults(t *testing.T) {
	segs := chain(t, 1, 4, [32]byte{})
	m := manifest("data00000a.tar", segs)
	tampered := append([]segment(nil), segs...)
	tampered[2] = segment{index: segs[2].index, raw: append(append([]byte(nil), segs[2].raw...), 0x18, 0x01)} // epoch 1 appended: re-hashes
	swapped := []segment{segs[0], segs[2], segs[1], segs[3]}
	renamed := append([]segment(nil), segs...)
	renamed[1].index = 4
	otherHead := m
	otherHead.HeadHash = hexHash([32]byte{9})
	cases := map[string]struct {
		archive []byte
		want    error
	}{
		"a segment changed":           {archive(t, m, tampered), segarchive.ErrChainBroken},
		"two segments swapped":        {archive(t, m, swapped), segarchive.ErrChainBroken},
		"a segment repeated":          {archive(t, m, []segment{segs[0], segs[1], segs[1], segs[3]}), segarchive.ErrMalformed},
		"a member misnamed":           {archive(t, m, renamed), segarchive.ErrMalformed},
		"cut short at a member":       {archive(t, m, segs[:3]), segarchive.ErrMalformed},
		"cut short inside a member":   {archive(t, m, segs)[:1800], segarchive.ErrMalformed},
		"a segment from elsewhere":    {archive(t, m, append(segs[:3:3], chain(t, 9, 1, [32]byte{1})...)), segarchive.ErrChainBroken},
		"no manifest":                 {archive(t, m, segs)[512+512:], segarchive.ErrMalformed},
		"empty":                       {nil, segarchive.ErrMalformed},
		"not a segment":               {archive(t, manifest("x", []segment{{index: 1, raw: []byte{0xff}}}), []segment{{index: 1, raw: []byte{0xff}}}), segarchive.ErrMalformed},
		"manifest names another head": {archive(t, otherHead, segs), segarchive.ErrMalformed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c segarchive.Chain
			if _, err := c.Verify(bytes.NewReader(tc.archive)); !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			if _, _, ok := c.Head(); ok {
				t.Fatal("a failed archive advanced the chain")
			}
		})
	}
}

// FuzzVerifyArchive: Verify reads archives from outside (backups, another
// validator); whatever the bytes, it answers without panicking, and what
// it accepts is a chain the manifest describes.
func FuzzVerifyArchive(f *testing.F) {
	segs := chain(f, 1, 3, [32]byte{})
	f.Add(archive(f, manifest("data00000a.tar", segs), segs))
	f.Add(archive(f, manifest("data00000a.tar", segs[:1]), segs[:1]))
	f.Add(archive(f, segarchive.Manifest{}, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var c segarchive.Chain
		s, err := c.Verify(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, segarchive.ErrMalformed) && !errors.Is(err, segarchive.ErrChainBroken) {
				t.Fatalf("an error of no documented kind: %v", err)
			}
			return
		}
		if s.Segments != s.Manifest.Segments || s.Bytes != s.Manifest.Bytes {
			t.Fatalf("accepted %d segments of %d bytes under a manifest of %+v", s.Segments, s.Bytes, s.Manifest)
		}
		if s.Segments > 0 && (s.FirstIndex > s.LastIndex || hexHash(s.HeadHash) != s.Manifest.HeadHash) {
			t.Fatalf("accepted an inconsistent summary %+v", s)
		}
	})
}

// compacted is segs followed by a compaction at index: parts 0..parts-1 of
// the next generation (compaction set), then one ordinary segment of it.
func compacted(t testing.TB, segs []segment, index uint64, parts int, edit func(*ledgerpb.Segment)) []segment {
	t.Helper()
	prev := segarchive.Hash(segs[len(segs)-1].raw)
	out := append([]segment(nil), segs...)
	for i := 0; i <= parts; i++ {
		seg := &ledgerpb.Segment{Index: index, Part: uint32(i), Generation: 1, Compaction: true, PrevHash: prev[:],
			Ops: []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_Put{Put: &ledgerpb.Node{Path: "/a/b"}}}}}
		if i == parts { // the next entry's ordinary segment
			seg.Index, seg.Part, seg.Compaction = index+1, 0, false
		}
		if edit != nil {
			edit(seg)
		}
		raw, err := proto.Marshal(seg)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, segment{seg.GetIndex(), seg.GetPart(), raw})
		prev = segarchive.Hash(raw)
	}
	return out
}

// TestVerifyAcrossCompaction: the parts of a compaction are members of
// their own, in order; the chain runs on into the next generation, and the
// summary says where the compaction happened. A generation that changes
// anywhere else, or parts out of order, are refused.
func TestVerifyAcrossCompaction(t *testing.T) {
	segs := compacted(t, chain(t, 1, 3, [32]byte{}), 9, 3, nil)
	var c segarchive.Chain
	sum, err := c.Verify(bytes.NewReader(archive(t, manifest("data00000a.tar", segs), segs)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Segments != 7 || len(sum.Compactions) != 1 || sum.Compactions[0] != 9 || sum.LastIndex != 10 {
		t.Fatalf("summary %+v", sum)
	}

	noMark := compacted(t, chain(t, 1, 3, [32]byte{}), 9, 3, func(s *ledgerpb.Segment) { s.Compaction = false })
	if _, err := new(segarchive.Chain).Verify(bytes.NewReader(archive(t, manifest("data00000a.tar", noMark), noMark))); !errors.Is(err, segarchive.ErrChainBroken) {
		t.Fatalf("a generation change outside a compaction: %v", err)
	}
	repeated := append(append([]segment(nil), segs[:5]...), segs[4:]...) // part 1 twice
	if _, err := new(segarchive.Chain).Verify(bytes.NewReader(archive(t, manifest("data00000a.tar", repeated), repeated))); !errors.Is(err, segarchive.ErrMalformed) {
		t.Fatalf("a part repeated: %v", err)
	}
}
