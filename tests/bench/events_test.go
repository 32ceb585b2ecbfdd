package bench

// BenchmarkEvents measures the event streams of a 3-validator cluster
// (MOCK mode): subscribers spread over the three validators follow
// GET /v1/events/stream while writers commit 1 KiB writes at a steady rate
// (BENCH_EVENTS_RATE proposals/s, default 500: under the streams' 1,000
// events/s, so that the figures show the fan-out, not the pacing). Each
// sub-benchmark commits b.N proposals (one content event each):
//
//	BenchmarkEvents/subscribers=1000  ...  events/s  p50-ms  p99-ms  dropped
//
// events/s are the events delivered to all subscribers together per second;
// p50-ms and p99-ms the delay from the leader sealing the batch (the event's
// timestamp) to a subscriber reading the event, which bounds the delay from
// commit to delivery from above; dropped the events streams dropped from
// full queues (told to the client as dropped events). BENCH_EVENTS_SUBSCRIBERS
// overrides the subscriber counts (default 100,1000); BENCH_PROFILE=dir
// profiles the validators and this process as in BenchmarkCluster.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkEvents(b *testing.B) {
	// Every subscriber comes from this one address.
	cluster, err := startLedger(b.Cleanup, b.TempDir(), "SVC_VALIDATOR_EVENTS_STREAM_PER_IP=1000")
	if err != nil {
		b.Fatal(err)
	}
	rate := 500.0
	if s := os.Getenv("BENCH_EVENTS_RATE"); s != "" {
		if rate, err = strconv.ParseFloat(s, 64); err != nil || rate <= 0 {
			b.Fatalf("BENCH_EVENTS_RATE=%q is not a positive number", s)
		}
	}
	for _, n := range counts(b, "BENCH_EVENTS_SUBSCRIBERS", []int{100, 1000}) {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			eventsLoad(b, cluster, n, rate)
		})
	}
}

// counts reads a comma-separated list of positive integers from env.
func counts(b *testing.B, env string, def []int) []int {
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: %q is not a positive integer", env, s, f)
		}
		out = append(out, n)
	}
	return out
}

// subscriber is one stream's tally.
type subscriber struct {
	received atomic.Int64
	dropped  atomic.Int64
	delays   []int64 // milliseconds, written by the reader goroutine only
	err      error
}

// follow reads the stream until ctx ends, noting each event's delay.
func (s *subscriber) follow(ctx context.Context, client *http.Client, url string, connected chan<- error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		connected <- err
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		connected <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		connected <- fmt.Errorf("GET %s: %s", url, resp.Status)
		return
	}
	connected <- nil
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	dropped := false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if ctx.Err() == nil {
				s.err = err
			}
			return
		}
		switch {
		case bytes.HasPrefix(line, []byte("event: dropped")):
			dropped = true
		case bytes.HasPrefix(line, []byte("data: ")):
			if dropped {
				s.dropped.Add(jsonInt(line, `"count":`))
				dropped = false
				continue
			}
			if ts := jsonInt(line, `"timestamp":`); ts > 0 {
				s.delays = append(s.delays, time.Now().UnixMilli()-ts)
			}
			s.received.Add(1)
		}
	}
}

// jsonInt reads the integer after key in a JSON line, without decoding the
// rest: the clients share the machine with the cluster.
func jsonInt(line []byte, key string) int64 {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range line[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// eventsLoad commits b.N proposals at rate per second while subscribers
// streams follow the events.
func eventsLoad(b *testing.B, c *ledgerCluster, subscribers int, rate float64) {
	submit := c.prepare(b, b.N)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: subscribers, DisableCompression: true}}
	defer client.CloseIdleConnections()
	subs := make([]*subscriber, subscribers)
	connected := make(chan error, subscribers)
	var readers sync.WaitGroup
	for i := range subs {
		subs[i] = &subscriber{delays: make([]int64, 0, b.N)}
		url := c.nodes[i%len(c.nodes)].url + "/v1/events/stream"
		readers.Go(func() { subs[i].follow(ctx, client, url, connected) })
	}
	defer readers.Wait()
	defer cancel()
	for range subs {
		if err := <-connected; err != nil {
			b.Fatal(err)
		}
	}

	// Open loop: proposals are released at the rate whatever the
	// latency, by enough writers that none waits for a slot (each holds
	// one until its proposal is committed).
	next := make(chan int)
	var writers sync.WaitGroup
	for range 1024 {
		writers.Go(func() {
			for i := range next {
				if err := submit(ctx, i); err != nil {
					b.Error(err)
				}
			}
		})
	}
	defer func() {
		cancel()
		writers.Wait()
	}()
	b.ResetTimer()
	start := time.Now()
	profiled := startProfile(b, c, subscribers) // BENCH_PROFILE
	defer profiled()
	go func() {
		defer close(next)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := range b.N {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
			<-tick.C
		}
	}()
	deadline := time.Now().Add(time.Duration(float64(b.N)/rate*float64(time.Second)) + 2*time.Minute)
	for {
		done := true
		for _, s := range subs {
			if s.received.Load()+s.dropped.Load() < int64(b.N) {
				done = false
				break
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) || b.Failed() {
			b.Fatalf("the subscribers did not receive %d events each in time", b.N)
		}
		time.Sleep(10 * time.Millisecond) // polling the tallies
	}
	elapsed := time.Since(start)
	b.StopTimer()
	writers.Wait()
	cancel()
	readers.Wait()

	var delays []int64
	var received, dropped int64
	for _, s := range subs {
		if s.err != nil {
			b.Fatal(s.err)
		}
		received += s.received.Load()
		dropped += s.dropped.Load()
		delays = append(delays, s.delays...)
	}
	slices.Sort(delays)
	pct := func(p float64) float64 {
		if len(delays) == 0 {
			return 0
		}
		return float64(delays[int(p*float64(len(delays)-1))])
	}
	b.ReportMetric(float64(received)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(dropped), "dropped")
}
