package segments

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// TestSegmentIndex groups hand-made segments into TAR files: a file closes
// when the next segment would pass the target or starts another
// generation; a segment that does not name its predecessor's hash breaks
// the chain; deletes count for the wallet their path names.
func TestSegmentIndex(t *testing.T) {
	w := common.HexToAddress("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
	path := proposal.ContentPath("ledger", w, "default", "page/x")
	x := newSegmentIndex(400)
	var prev [32]byte
	add := func(index uint64, gen uint32, ops []*ledgerpb.SegmentOp, link bool) {
		t.Helper()
		seg := &ledgerpb.Segment{Index: index, Generation: gen, Ops: ops}
		if link {
			seg.PrevHash = prev[:]
		}
		raw, err := proto.Marshal(seg)
		if err != nil {
			t.Fatal(err)
		}
		prev = sha256.Sum256(raw)
		x.add(index, raw, prev, new(segmentScan))
	}
	put := func(title string) []*ledgerpb.SegmentOp {
		return []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_Put{Put: &ledgerpb.Node{Path: path, Wallet: w[:],
			Properties: []*ledgerpb.Property{{Name: "title", ValueJson: `"` + strings.Repeat(title, 20) + `"`}}}}}}
	}
	add(3, 0, put("a"), true) // about 170 bytes each
	add(5, 0, put("b"), true)
	add(6, 0, put("c"), true) // passes 400: a new file
	add(7, 0, []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_DeletePath{DeletePath: path}}}, false)
	add(9, 1, put("d"), true) // another generation: a new file

	if len(x.tars) != 3 || x.tars[0].first != 3 || x.tars[0].last != 5 || x.tars[1].first != 6 || x.tars[1].last != 7 ||
		x.tars[2].generation != 1 {
		t.Fatalf("TAR files %+v", x.tars)
	}
	if x.breaks != 1 || !x.tars[0].chainOK || x.tars[1].chainOK || !x.tars[2].chainOK || x.next != 10 {
		t.Fatalf("chain: %d breaks, %+v", x.breaks, x.tars)
	}
	seg, tars := x.summary()
	if seg.ChainVerified || seg.Count != 5 || seg.NodeWrites != 4 || seg.NodeDeletes != 1 || seg.CurrentGeneration != 1 ||
		len(seg.Generations) != 2 || tars.Closed != 2 || tars.PackingEfficiency == nil || tars.Newest != "data00000b.tar" {
		t.Fatalf("summary %+v %+v", seg, tars)
	}
	files := x.tarFiles()
	if files[1].PrevHash != files[0].HeadHash || files[0].PrevHash != hexHash([32]byte{}) || files[2].Name != "data00000b.tar" {
		t.Fatalf("TAR chain %+v", files)
	}
	ww := x.wallets[w]
	if ww.writes != 4 || ww.deletes != 1 || len(ww.byTar) != 3 {
		t.Fatalf("wallet %+v", ww)
	}
	if tarOf(x.tars, 4) != 0 || tarOf(x.tars, 7) != 1 || tarOf(x.tars, 8) != -1 || tarOf(x.tars, 2) != -1 {
		t.Fatal("tarOf")
	}
}

// TestGenerationStartsATarFile: a segment of another generation starts a
// TAR file however little the current one holds; files are numbered within
// their generation (cleanup drops the oldest generation and renames
// nothing); the parts of one compaction stay in one file however large;
// after a cleanup the oldest segment kept, a compaction's first, anchors
// the chain; the generations present are listed once each, ascending.
func TestGenerationStartsATarFile(t *testing.T) {
	x := newSegmentIndex(100)
	prev := sha256.Sum256([]byte("the head of a generation dropped by cleanup"))
	add := func(seg *ledgerpb.Segment) {
		t.Helper()
		seg.PrevHash = append([]byte(nil), prev[:]...)
		seg.Ops = []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_Put{Put: &ledgerpb.Node{Path: strings.Repeat("p", 60)}}}}
		raw, err := proto.Marshal(seg)
		if err != nil {
			t.Fatal(err)
		}
		prev = sha256.Sum256(raw)
		x.add(seg.GetIndex(), raw, prev, new(segmentScan))
	}
	for part := range uint32(3) { // generation 25 starts: three parts, past the target together
		add(&ledgerpb.Segment{Index: 4, Part: part, Generation: 25, Compaction: true})
	}
	add(&ledgerpb.Segment{Index: 5, Generation: 25}) // passes the target: a new file
	add(&ledgerpb.Segment{Index: 6, Generation: 26, Compaction: true})
	add(&ledgerpb.Segment{Index: 7, Generation: 26})
	var names []string
	for _, f := range x.tarFiles() {
		names = append(names, f.Name)
	}
	// Generation 26 is letter a again: the letter is the generation mod 26.
	if got := strings.Join(names, " "); got != "data00000z.tar data00001z.tar data00000a.tar data00001a.tar" {
		t.Fatalf("TAR files %s", got)
	}
	if x.tars[0].segments != 3 || x.tars[0].first != 4 || x.tars[0].last != 4 {
		t.Fatalf("the compaction's file %+v", x.tars[0])
	}
	seg, _ := x.summary()
	if !seg.ChainVerified || len(seg.Generations) != 2 || seg.Generations[0] != 25 || seg.CurrentGeneration != 26 {
		t.Fatalf("summary %+v", seg)
	}
}

// TestTarNameRoundTrip: every name tarName writes parses back to its
// number; a name tarName would not write (another width, a sign, an upper
// case or missing letter, another prefix or suffix) names no TAR file.
func TestTarNameRoundTrip(t *testing.T) {
	for _, number := range []int{0, 1, 42, 99999, 100000, 1234567} {
		for _, gen := range []uint32{0, 1, 25, 26} {
			name := tarName(number, gen)
			got, ok := parseTarName(name)
			if !ok || got != number {
				t.Errorf("parseTarName(%q) = %d, %v; want %d", name, got, ok, number)
			}
		}
	}
	if got := tarName(7, 1); got != "data00007b.tar" {
		t.Errorf("tarName(7, 1) = %q", got)
	}
	if got := tarName(3, 26); got != "data00003a.tar" {
		t.Errorf("tarName(3, 26) = %q: the letter is the generation mod 26", got)
	}
	for _, name := range []string{
		"", "data.tar", "data00001.tar", "data0001a.tar", "data000001a.tar", "data+0001a.tar", "data-0001a.tar",
		"data 0001a.tar", "data00001A.tar", "data00001{.tar", "data00001`.tar", "data00001a.TAR", "data00001a.tar.gz",
		"Data00001a.tar", "xdata00001a.tar", "data00001a", "data00001aa.tar", "data0x001a.tar",
		"data99999999999999999999a.tar",
	} {
		if n, ok := parseTarName(name); ok {
			t.Errorf("parseTarName(%q) = %d, true; want no TAR file", name, n)
		}
	}
}

func TestWalletOfPath(t *testing.T) {
	if w, ok := walletOfPath(contentPath(alice, "page/x")); !ok || w != alice {
		t.Fatalf("walletOfPath of alice's page: %x %v", w, ok)
	}
	for _, p := range []string{"/", "/ledger/12/34/56", "/ledger/12/34/56/0x1234", "/ledger/12/34/56/1234567890abcdef1234567890abcdef1234567890"} {
		if _, ok := walletOfPath(p); ok {
			t.Errorf("walletOfPath(%q) found a wallet", p)
		}
	}
}

// TestJournalLine: the journal line of a segment, byte for byte.
func TestJournalLine(t *testing.T) {
	var hash [32]byte
	hash[0], hash[31] = 0xab, 0x01
	seg := &ledgerpb.Segment{Term: 2, Epoch: 1000, Generation: 1, ProposalIds: [][]byte{{1}, {2}, {3}}}
	got := string(appendJournalLine([]byte("previous\n"), 12, seg, hash))
	want := "previous\nindex=12 term=2 epoch=1000 generation=1 proposals=3 hash=0xab" + strings.Repeat("0", 60) + "01\n"
	if got != want {
		t.Fatalf("journal line\n got %q\nwant %q", got, want)
	}
}

// BenchmarkJournalLine: the cost of one journal line, a segment of one
// node write decoded and written out.
func BenchmarkJournalLine(b *testing.B) {
	seg := &ledgerpb.Segment{Index: 1_000_000, Term: 3, Epoch: 1000, PrevHash: make([]byte, 32),
		ProposalIds: [][]byte{make([]byte, 32)},
		Ops: []*ledgerpb.SegmentOp{{Op: &ledgerpb.SegmentOp_Put{Put: &ledgerpb.Node{
			Path: "/ledger/de/be/97/0xdebe97e245396cdd58bbc5d0b44001d648818cc6/default/page/0000000000000000"}}}}}
	raw, err := proto.Marshal(seg)
	if err != nil {
		b.Fatal(err)
	}
	var line []byte
	b.ReportAllocs()
	for b.Loop() {
		got := &ledgerpb.Segment{}
		if err := proto.Unmarshal(raw, got); err != nil {
			b.Fatal(err)
		}
		line = appendJournalLine(line[:0], got.GetIndex(), got, [32]byte{})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}
