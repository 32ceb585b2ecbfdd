package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// counter is a Raft that only counts what it receives.
type counter struct{ n atomic.Int64 }

func (c *counter) Step(context.Context, *raftpb.Message) error { c.n.Add(1); return nil }
func (c *counter) ReportUnreachable(uint64)                    {}
func (c *counter) ReportSnapshot(uint64, raft.SnapshotStatus)  {}
func (c *counter) OpenSnapshotFile(*raftpb.Message) (io.ReadCloser, int64, error) {
	return nil, 0, errors.New("no snapshots in this benchmark")
}
func (c *counter) ReceiveSnapshot(context.Context, *raftpb.Message, io.Reader, int64) error {
	return errors.New("no snapshots in this benchmark")
}

// BenchmarkSend measures MsgApp messages with one 1 KiB entry from one
// transport to another over loopback TCP, from Send to Raft.Step on the
// receiver. Send is paced to the queue so that nothing is dropped.
func BenchmarkSend(b *testing.B) {
	quiet := func(c *Config) { c.Logger = zap.NewNop() }
	ca, cb := testConfig(b, 1), testConfig(b, 2)
	quiet(&ca)
	quiet(&cb)
	a, rx := newTransport(b, ca), newTransport(b, cb)
	must(b, a.AddPeer(2, rx.Addr()))
	must(b, rx.AddPeer(1, a.Addr()))
	recv := &counter{}
	must(b, a.Start(&counter{}))
	must(b, rx.Start(recv))

	payload := bytes.Repeat([]byte("x"), 1024)
	const batch = 64
	msgs := make([]*raftpb.Message, batch)
	for i := range msgs {
		msgs[i] = appendMsg(1, 2, uint64(i), payload)
	}
	frame, _ := appendFrame(nil, msgs[0], DefaultMaxFrameSize)
	b.SetBytes(int64(len(frame)))

	// Warm the connection up.
	a.Send(msgs[:1])
	waitFor(b, 5*time.Second, "the connection", func() bool { return recv.n.Load() == 1 })
	recv.n.Store(0)
	p := a.peer(2)

	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		n := min(batch, b.N-sent)
		for len(p.queue) > DefaultQueueLen-batch {
			time.Sleep(20 * time.Microsecond)
		}
		a.Send(msgs[:n])
		sent += n
	}
	for recv.n.Load() < int64(b.N) {
		if st := a.Stats()[2]; st.Dropped > 0 {
			b.Fatalf("dropped %d messages", st.Dropped)
		}
		time.Sleep(50 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}
