package segments

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/segarchive"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
)

func TestConfig(t *testing.T) {
	if err := (Config{}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no NodeID: %v", err)
	}
	if _, err := New(Config{}, newLedger(t).machine); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New without NodeID: %v", err)
	}
	c, err := New(Config{NodeID: 1}, newLedger(t).machine)
	if err != nil {
		t.Fatal(err)
	}
	if c.TarTargetBytes() != DefaultTarTargetBytes || c.cfg.Now == nil {
		t.Fatalf("defaults %+v", c.cfg)
	}
}

// page is a message of about size bytes.
func page(title string, size int) string {
	return `{"title":"` + title + `","text":"` + strings.Repeat("x", size) + `"}`
}

// TestTarFilesBySize applies writes to a real state and checks the TAR
// files they group into: contiguous, in raft index order, each within the
// target unless a single segment passes it, each closed only because the
// next segment would have passed the target, chained by hash; the recent
// segments name the TAR file whose range holds them and add up to it.
func TestTarFilesBySize(t *testing.T) {
	l := newLedger(t)
	const target = 1500
	cat := l.catalog(target, newClock())
	for i := range 12 {
		l.apply(l.write(alice, fmt.Sprintf("page/%d", i), page("p", 150+60*i)))
	}
	tars, err := cat.Tars()
	if err != nil {
		t.Fatal(err)
	}
	recent, err := cat.Recent(api.MaxRecentSegments)
	if err != nil {
		t.Fatal(err)
	}
	if tars.NodeID != 7 || tars.TargetBytes != target || tars.AppliedIndex != l.next-1 || len(tars.Tars) < 3 {
		t.Fatalf("TAR files %+v", tars)
	}
	if recent.AppliedIndex != tars.AppliedIndex || len(recent.Segments) == 0 || recent.Segments[0].Index != tars.Tars[len(tars.Tars)-1].LastIndex {
		t.Fatalf("recent segments %+v", recent)
	}
	sizes := map[uint64]uint64{} // segment bytes by raft index
	bytesIn := map[string]uint64{}
	for _, s := range recent.Segments {
		sizes[s.Index] = uint64(s.Bytes)
		bytesIn[s.Tar] += uint64(s.Bytes)
	}
	var total int
	for i, f := range tars.Tars {
		total += f.Segments
		if f.Name != fmt.Sprintf("data%05da.tar", i) || f.Number != i || f.Closed != (i < len(tars.Tars)-1) || !f.ChainOK {
			t.Fatalf("TAR file %d: %+v", i, f)
		}
		if f.Bytes > target && f.Segments > 1 {
			t.Fatalf("TAR file %s holds %d bytes in %d segments, above the target %d", f.Name, f.Bytes, f.Segments, target)
		}
		if bytesIn[f.Name] != f.Bytes || uint64(f.Segments) != f.LastIndex-f.FirstIndex+1 {
			t.Fatalf("TAR file %s: %d bytes, its segments %d", f.Name, f.Bytes, bytesIn[f.Name])
		}
		if i == 0 {
			if f.PrevHash != hexHash([32]byte{}) {
				t.Fatalf("the first TAR file starts after %s", f.PrevHash)
			}
			continue
		}
		prev := tars.Tars[i-1]
		if f.FirstIndex != prev.LastIndex+1 || f.PrevHash != prev.HeadHash {
			t.Fatalf("TAR file %s does not follow %s: %+v after %+v", f.Name, prev.Name, f, prev)
		}
		if prev.Bytes+sizes[f.FirstIndex] <= target {
			t.Fatalf("TAR file %s closed with %d bytes, though segment %d (%d bytes) fit in %d", prev.Name, prev.Bytes, f.FirstIndex,
				sizes[f.FirstIndex], target)
		}
	}
	st, err := cat.Storage(true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments.Count != uint64(total) || len(recent.Segments) != total || st.Tars.Count != len(tars.Tars) ||
		st.Tars.Closed != len(tars.Tars)-1 || st.Tars.PackingEfficiency == nil || *st.Tars.PackingEfficiency > 1 ||
		st.Tars.Newest != tars.Tars[len(tars.Tars)-1].Name || len(st.TarFiles) != len(tars.Tars) {
		t.Fatalf("storage %+v", st)
	}
	if st, err := cat.Storage(false); err != nil || st.TarFiles != nil {
		t.Fatalf("storage without files: %v %+v", err, st.TarFiles)
	}
	if r, err := cat.Recent(2); err != nil || len(r.Segments) != 2 || r.Limit != 2 || r.Segments[0].Index <= r.Segments[1].Index {
		t.Fatalf("two recent segments: %v %+v", err, r)
	}
}

// TestIndexIsIncremental: a catalog that read the segments a few at a
// time, as applies came, answers what one reading them all at once
// answers.
func TestIndexIsIncremental(t *testing.T) {
	l := newLedger(t)
	c := newClock()
	incremental := l.catalog(1000, c)
	for i := range 10 {
		items := l.write(alice, fmt.Sprintf("page/%d", i), page("p", 100+50*i))
		if i%3 == 2 {
			items = l.delete(alice, fmt.Sprintf("page/%d", i-1))
		}
		l.apply(items)
		if _, err := incremental.Storage(false); err != nil {
			t.Fatal(err)
		}
	}
	got, err := incremental.Storage(true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := l.catalog(1000, c).Storage(true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read incrementally %+v\nread at once %+v", got, want)
	}
	if got.Segments.NodeDeletes != 3 || got.Segments.NodeWrites != 7 || !got.Segments.ChainVerified {
		t.Fatalf("segments %+v", got.Segments)
	}
}

// countingWriter counts the writes that reach it.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestArchive: a TAR file's archive is the segments the listing names,
// verifiable with segarchive; a closed file says so; names that are no TAR
// file, or no TAR file of this state, are not found.
func TestArchive(t *testing.T) {
	l := newLedger(t)
	cat := l.catalog(2000, newClock())
	for i := range 8 {
		l.apply(l.write(alice, fmt.Sprintf("page/%d", i), page("p", 600)))
	}
	tars, err := cat.Tars()
	if err != nil || len(tars.Tars) < 2 {
		t.Fatalf("TAR files: %v %+v", err, tars)
	}
	var chain segarchive.Chain
	for _, f := range tars.Tars {
		a, err := cat.OpenArchive(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		var out countingWriter
		var hooked int
		err = a.Write(&out, func() { hooked++ })
		if cerr := a.Close(); err != nil || cerr != nil {
			t.Fatal(err, cerr)
		}
		if a.Closed != f.Closed || a.Manifest.HeadHash != f.HeadHash || hooked != out.writes || hooked == 0 {
			t.Fatalf("archive of %s: closed %v, manifest %+v, %d hook calls for %d writes", f.Name, a.Closed, a.Manifest, hooked, out.writes)
		}
		s, err := chain.Verify(&out.Buffer) // each file continues the chain of the one before
		if err != nil {
			t.Fatalf("archive of %s: %v", f.Name, err)
		}
		if s.Segments != f.Segments || s.FirstIndex != f.FirstIndex || s.LastIndex != f.LastIndex || s.Bytes != f.Bytes ||
			hexHash(s.HeadHash) != f.HeadHash || s.Manifest.Name != f.Name || s.NodeWrites != f.Segments {
			t.Fatalf("archive %+v, TAR file %+v", s, f)
		}
	}
	for _, name := range []string{"data0a.tar", "data00000A.tar", "../data00000a.tar"} {
		_, err := cat.OpenArchive(name)
		if e := apierror.As(err); e == nil || e.Code != apierror.NotFound || !strings.Contains(e.Message, "is not a TAR file name") {
			t.Errorf("OpenArchive(%q): %v", name, err)
		}
	}
	for _, name := range []string{fmt.Sprintf("data%05da.tar", len(tars.Tars)), "data00000b.tar"} {
		_, err := cat.OpenArchive(name)
		if e := apierror.As(err); e == nil || e.Code != apierror.NotFound || e.Message != "no TAR file "+name+" on this validator; GET /api/segments/tars lists them" {
			t.Errorf("OpenArchive(%q): %v", name, err)
		}
	}
}

// journalLine is the format of a journal line.
var journalLine = regexp.MustCompile(`^index=(\d+) term=1 epoch=1000 generation=0 proposals=(\d+) hash=(0x[0-9a-f]{64})$`)

// TestJournal: a line per segment from the index asked, in index order,
// with the hash the segment views give; the last one is the head of the
// chain the manifest names.
func TestJournal(t *testing.T) {
	l := newLedger(t)
	cat := l.catalog(DefaultTarTargetBytes, newClock())
	for i := range 5 {
		l.apply(l.write(alice, fmt.Sprintf("page/%d", i), page("p", 50)), l.write(bob, fmt.Sprintf("page/%d", i), page("p", 50)))
	}
	read := func(from uint64) (lines [][]string, applied uint64) {
		t.Helper()
		j, err := cat.OpenJournal(from)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		var out countingWriter
		var hooked int
		if err := j.Write(&out, func() { hooked++ }); err != nil {
			t.Fatal(err)
		}
		if hooked != out.writes {
			t.Fatalf("%d hook calls for %d writes", hooked, out.writes)
		}
		sc := bufio.NewScanner(&out.Buffer)
		for sc.Scan() {
			m := journalLine.FindStringSubmatch(sc.Text())
			if m == nil {
				t.Fatalf("journal line %q", sc.Text())
			}
			lines = append(lines, m[1:])
		}
		return lines, j.AppliedIndex
	}
	lines, applied := read(1)
	recent, err := cat.Recent(api.MaxRecentSegments)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cat.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if applied != l.next-1 || len(lines) != len(recent.Segments) || len(lines) != 5 {
		t.Fatalf("journal at %d: %d lines, %d segments", applied, len(lines), len(recent.Segments))
	}
	for i, line := range lines {
		s := recent.Segments[len(recent.Segments)-1-i] // recent: newest first
		if line[0] != fmt.Sprint(s.Index) || line[1] != "2" || line[2] != s.Hash {
			t.Fatalf("journal line %v, segment %+v", line, s)
		}
	}
	store := map[string]string{}
	for _, kv := range m.Lines {
		store[kv.Key] = kv.Value
	}
	if m.AppliedIndex != applied || store["segments.head"] != lines[4][2] || store["segments.last"] != lines[4][0] ||
		store["segments.count"] != "5" || store["tar.count"] != "1" || store["generation.current"] != "0" ||
		store["tar.targetBytes"] != fmt.Sprint(DefaultTarTargetBytes) || m.Lines[0].Key != "segment.encoding" {
		t.Fatalf("manifest %+v", m)
	}
	if tail, _ := read(recent.Segments[0].Index); len(tail) != 1 || tail[0][2] != lines[4][2] {
		t.Fatalf("journal from the head: %v", tail)
	}
	if none, _ := read(1 << 62); len(none) != 0 {
		t.Fatalf("journal past the end: %v", none)
	}
}

// TestManifestOfAnEmptyStore: no segment, no generation.
func TestManifestOfAnEmptyStore(t *testing.T) {
	m, err := newLedger(t).catalog(0, newClock()).Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, kv := range m.Lines {
		fmt.Fprintf(&b, "%s=%s\n", kv.Key, kv.Value)
	}
	want := "segment.encoding=protobuf contentledger.v1.Segment\nsegment.hash=sha256 of the stored bytes\nsegments.count=0\n" +
		"segments.bytes=0\nsegments.first=0\nsegments.last=0\nsegments.head=0x" + strings.Repeat("0", 64) + "\n" +
		"segments.chainBreaks=0\ntar.targetBytes=268435456\ntar.count=0\ngeneration.current=none\n"
	if b.String() != want || m.AppliedIndex != 0 {
		t.Fatalf("manifest at %d:\n%s", m.AppliedIndex, b.String())
	}
}

// failingWriter fails every write.
type failingWriter struct{}

var errWrite = errors.New("the client went away")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

// TestStreamsReportWriteFailures: an archive or journal that cannot be
// written says so, so that the HTTP side cuts the answer short.
func TestStreamsReportWriteFailures(t *testing.T) {
	l := newLedger(t)
	cat := l.catalog(0, newClock())
	for i := range 3 {
		l.apply(l.write(alice, fmt.Sprintf("page/%d", i), page("p", 40<<10)))
	}
	a, err := cat.OpenArchive("data00000a.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Write(failingWriter{}, nil); !errors.Is(err, errWrite) {
		t.Fatalf("archive to a failing writer: %v", err)
	}
	j, err := cat.OpenJournal(1)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Write(failingWriter{}, nil); !errors.Is(err, errWrite) {
		t.Fatalf("journal to a failing writer: %v", err)
	}
}

// TestFragmentation: a wallet's dead bytes are the bytes its segments
// wrote that no live node holds: an overwritten revision and a deleted
// node; the totals add the wallets up; the estimate reclaims the same.
func TestFragmentation(t *testing.T) {
	l := newLedger(t)
	cat := l.catalog(0, newClock())
	l.apply(l.write(alice, "page/x", page("first", 300)))
	_, first := l.node(alice, "page/x")
	l.apply(l.write(alice, "page/y", page("y", 200)), l.write(bob, "page/z", page("z", 100)))
	_, y := l.node(alice, "page/y")
	_, z := l.node(bob, "page/z")
	l.apply(l.write(alice, "page/x", page("second", 500)))
	_, second := l.node(alice, "page/x")
	last := l.apply(l.delete(alice, "page/y"))

	a, err := cat.WalletFragmentation(alice)
	if err != nil {
		t.Fatal(err)
	}
	f := a.WalletFragmentation
	written, live := first+y+second, second
	if a.AppliedIndex != last || a.NodeID != 7 || f.Wallet != strings.ToLower(alice.Hex()) || f.BytesWritten != written ||
		f.LiveBytes != live || f.DeadBytes != written-live || f.LiveNodes != 1 || f.NodeWrites != 3 || f.NodeDeletes != 1 ||
		f.TarFilesTouched != 1 || f.FragmentationScore != float64(written-live)/float64(written) {
		t.Fatalf("alice %+v; want written %d, live %d", a, written, live)
	}
	b, err := cat.WalletFragmentation(bob)
	if err != nil || b.BytesWritten != z || b.LiveBytes != z || b.DeadBytes != 0 || b.FragmentationScore != 0 {
		t.Fatalf("bob: %v %+v", err, b)
	}
	all, err := cat.Fragmentation()
	if err != nil {
		t.Fatal(err)
	}
	if all.Totals.Wallets != 2 || all.Totals.TarFiles != 1 || all.Totals.BytesWritten != written+z || all.Totals.LiveBytes != live+z ||
		all.Totals.DeadBytes != written-live || all.Totals.FragmentationScore != float64(written-live)/float64(written+z) ||
		len(all.Wallets) != 2 || all.Wallets[0].Wallet != f.Wallet || all.WalletsTruncated {
		t.Fatalf("totals %+v", all)
	}
	top, err := cat.TopFragmented(1)
	if err != nil || len(top.Wallets) != 1 || top.Wallets[0].Wallet != f.Wallet || top.Limit != 1 {
		t.Fatalf("top 1: %v %+v", err, top)
	}
	if top, err := cat.TopFragmented(10); err != nil || len(top.Wallets) != 2 || top.Wallets[1].Wallet != b.Wallet {
		t.Fatalf("top 10: %v %+v", err, top)
	}

	est, err := cat.WalletGcEstimate(alice)
	if err != nil || est.Wallet != f.Wallet || len(est.ByTar) != 1 || est.WrittenBytes != written || est.LiveBytes != live ||
		est.ReclaimableBytes != f.DeadBytes || est.ByTar[0].Name != "data00000a.tar" {
		t.Fatalf("alice's estimate: %v %+v", err, est)
	}
	st, err := cat.Storage(false)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := cat.GcEstimate()
	if err != nil || whole.Wallet != "" || len(whole.ByTar) != 1 || whole.SegmentBytes != st.Segments.Bytes ||
		whole.ReclaimableBytes != whole.SegmentBytes-whole.LiveBytes || whole.LiveBytes == 0 {
		t.Fatalf("estimate: %v %+v", err, whole)
	}
	nobody := [20]byte{0x42}
	if est, err := cat.WalletGcEstimate(nobody); err != nil || len(est.ByTar) != 0 || est.WrittenBytes != 0 {
		t.Fatalf("an unknown wallet's estimate: %v %+v", err, est)
	}
	_, err = cat.WalletFragmentation(nobody)
	if e := apierror.As(err); e == nil || e.Code != apierror.NotFound ||
		e.Message != fmt.Sprintf("wallet 0x42%s has written nothing (as of applied index %d)", strings.Repeat("0", 38), last) {
		t.Fatalf("an unknown wallet's fragmentation: %v", err)
	}
}

// TestScanKept: the live scan is reused while the applied index has not
// moved, and for rate.KeptFor its cost (rate.MinReuse on a small state) after.
func TestScanKept(t *testing.T) {
	l := newLedger(t)
	c := newClock()
	cat := l.catalog(0, c)
	first := l.apply(l.write(alice, "page/a", page("a", 10)))
	scanned := c.Now()
	applied := func() (uint64, time.Time) {
		t.Helper()
		s, err := cat.CIDStats()
		if err != nil {
			t.Fatal(err)
		}
		return s.AppliedIndex, s.ComputedAt
	}
	if index, at := applied(); index != first || !at.Equal(scanned) {
		t.Fatalf("first scan at %d, %v", index, at)
	}
	second := l.apply(l.write(alice, "page/b", page("b", 10)))
	c.advance(rate.MinReuse - time.Nanosecond)
	if index, at := applied(); index != first || !at.Equal(scanned) {
		t.Fatalf("a scan younger than rate.MinReuse was redone: at %d, %v", index, at)
	}
	c.advance(time.Nanosecond)
	if index, at := applied(); index != second || !at.Equal(c.Now()) {
		t.Fatalf("a scan rate.MinReuse old, behind the applied index, was kept: at %d, %v", index, at)
	}
	scanned = c.Now()
	c.advance(time.Hour)
	if index, at := applied(); index != second || !at.Equal(scanned) {
		t.Fatalf("a scan at the applied index of now was redone: at %d, %v", index, at)
	}
}

// verifyNewestArchive streams the newest TAR file and checks that the
// archive holds the segments its manifest names.
func verifyNewestArchive(cat *Catalog) error {
	tars, err := cat.Tars()
	if err != nil || len(tars.Tars) == 0 {
		return err
	}
	a, err := cat.OpenArchive(tars.Tars[len(tars.Tars)-1].Name)
	if err != nil {
		return err
	}
	defer a.Close()
	var out bytes.Buffer
	if err := a.Write(&out, nil); err != nil {
		return err
	}
	if s, err := new(segarchive.Chain).Verify(&out); err != nil || s.LastIndex != a.Manifest.LastIndex {
		return fmt.Errorf("archive %+v: %v", a.Manifest, err)
	}
	return nil
}

// TestConcurrentViews reads every view while entries are applied (run
// with -race): the index and scan locks keep them consistent, and each
// answer holds together at its own applied index.
func TestConcurrentViews(t *testing.T) {
	l := newLedger(t)
	c := newClock()
	cat := l.catalog(4000, c)
	l.apply(l.write(alice, "page/0", page("p", 100)))
	const applies = 40
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := make(chan struct{})
	for r := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.advance(rate.MinReuse) // a fresh scan each time
				var err error
				switch r {
				case 0:
					var st Storage
					if st, err = cat.Storage(true); err == nil && st.Segments.LastIndex > st.AppliedIndex {
						err = fmt.Errorf("storage at %d holds segment %d", st.AppliedIndex, st.Segments.LastIndex)
					}
				case 1:
					var f api.FragmentationMetrics
					if f, err = cat.Fragmentation(); err == nil && f.Totals.LiveBytes > f.Totals.BytesWritten {
						err = fmt.Errorf("live %d above written %d", f.Totals.LiveBytes, f.Totals.BytesWritten)
					}
					if err == nil {
						err = verifyNewestArchive(cat)
					}
				case 2:
					var j *Journal
					if j, err = cat.OpenJournal(1); err == nil {
						err = errors.Join(j.Write(io.Discard, nil), j.Close())
					}
				case 3:
					_, err = cat.GcEstimate()
					if err == nil {
						_, err = cat.GcStatus()
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range applies {
		l.apply(l.write(alice, fmt.Sprintf("page/%d", i%7), page("p", 100+i)))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := cat.Storage(true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := l.catalog(4000, c).Storage(true)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after concurrent reads %+v\nread at once %+v (%v)", got, want, err)
	}
}

// TestCIDs: the statistics count the live nodes whose ledger:cid property
// names a CID, and the CIDs once each; the reverse lookup finds those
// nodes and no node that merely mentions the CID, stops at
// api.MaxCIDReferences, and an unreferenced CID is not found.
func TestCIDs(t *testing.T) {
	const (
		cid   = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
		other = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"
		many  = "QmNLei78zWmzUdbeRB3CiUfAizWUrbeeZh5K1rhAQKCh51"
	)
	l := newLedger(t)
	cat := l.catalog(0, newClock())
	l.apply(l.write(alice, "bin/one", `{"title":"one","ledger:cid":"`+cid+`"}`),
		l.write(bob, "bin/two", `{"title":"two","ledger:cid":"`+cid+`"}`),
		l.write(alice, "bin/three", `{"title":"three","ledger:cid":"`+other+`"}`),
		l.write(alice, "text", `{"title":"no binary, but the text `+cid+`"}`))
	stats, err := cat.CIDStats()
	if err != nil || stats.NodesWithCID != 3 || stats.DistinctCIDs != 2 || stats.StoredBytes != 3*46 || stats.NodeID != 7 ||
		stats.AppliedIndex != 1 {
		t.Fatalf("CID stats: %v %+v", err, stats)
	}
	refs, err := cat.CIDReferences(cid)
	if err != nil || refs.CID != cid || refs.Truncated || len(refs.Nodes) != 2 {
		t.Fatalf("references of %s: %v %+v", cid, err, refs)
	}
	for i, want := range []struct {
		wallet string
		path   string
	}{{strings.ToLower(alice.Hex()), contentPath(alice, "bin/one")}, {strings.ToLower(bob.Hex()), contentPath(bob, "bin/two")}} {
		if n := refs.Nodes[i]; n.Wallet != want.wallet || n.Path != want.path || n.CommitIndex != 1 || len(n.ProposalID) != 66 {
			t.Fatalf("reference %d: %+v", i, n)
		}
	}

	items := make([]*ledgerpb.BatchItem, api.MaxCIDReferences+1)
	for i := range items {
		items[i] = l.write(alice, fmt.Sprintf("many/%d", i), `{"ledger:cid":"`+many+`"}`)
	}
	l.apply(items...)
	if refs, err := cat.CIDReferences(many); err != nil || !refs.Truncated || len(refs.Nodes) != api.MaxCIDReferences {
		t.Fatalf("references of %s: %v, %d, truncated %v", many, err, len(refs.Nodes), refs.Truncated)
	}
	const unknown = "QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"
	_, err = cat.CIDReferences(unknown)
	if e := apierror.As(err); e == nil || e.Code != apierror.NotFound || e.Message != "no live content references "+unknown {
		t.Fatalf("an unreferenced CID: %v", err)
	}
}
