package state

import (
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// BenchmarkApply applies entries of 100 write proposals with 1 KiB JSON
// messages each (every proposal a new path) and reports proposals/s.
func BenchmarkApply(b *testing.B) {
	const perBatch = 100
	m := newMachine(b)
	l := newLog(b)
	msg := func(i int) string {
		// A flat object of 1 KiB: 16 properties of ~56 bytes.
		var sb strings.Builder
		sb.WriteString("{")
		for k := range 16 {
			if k > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"p%02d":"%s"`, k, strings.Repeat(string(rune('a'+(i+k)%26)), 55))
		}
		sb.WriteString("}")
		return sb.String()
	}
	if n := len(msg(0)); n < 1000 || n > 1100 {
		b.Fatalf("message is %d bytes, want about 1 KiB", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		items := make([]*ledgerpb.BatchItem, perBatch)
		for j := range items {
			n := i*perBatch + j
			items[j] = writeItem(n, alice, fmt.Sprintf("bench/%d/%d", i, j), msg(n))
			items[j].Proposal.Id[29] = byte(n >> 16)
		}
		e := l.batch(int64(i), items...)
		b.StartTimer()
		if err := m.Apply([]*raftpb.Entry{e}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "proposals/s")
	if testing.Verbose() {
		mt := m.db.Pebble().Metrics()
		b.Logf("block cache %+v, L0 tables %d, filter %+v", mt.BlockCache, mt.Levels[0].TablesCount, mt.Filter)
	}
}
