package segarchive_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/contentledger/contentledger/pkg/segarchive"
)

// A TAR file's worth of typical segments: 2,000 segments of two node
// writes and a delete each.
func benchArchive(b *testing.B) ([]segment, segarchive.Manifest, []byte) {
	segs := chain(b, 1, 2000, [32]byte{})
	m := manifest("data00000a.tar", segs)
	return segs, m, archive(b, m, segs)
}

func BenchmarkWrite(b *testing.B) {
	segs, m, a := benchArchive(b)
	b.SetBytes(int64(len(a)))
	for b.Loop() {
		w, err := segarchive.NewWriter(io.Discard, m)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range segs {
			if err := w.Add(s.index, 0, s.raw); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(segs)*b.N)/b.Elapsed().Seconds(), "segments/s")
}

func BenchmarkVerify(b *testing.B) {
	segs, _, a := benchArchive(b)
	b.SetBytes(int64(len(a)))
	for b.Loop() {
		var c segarchive.Chain
		if _, err := c.Verify(bytes.NewReader(a)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(segs)*b.N)/b.Elapsed().Seconds(), "segments/s")
}
