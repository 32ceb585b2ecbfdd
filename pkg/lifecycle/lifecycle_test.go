package lifecycle

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// journal records what the parts did, in order.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// task is a part that records its start and its stop, and runs until its
// context ends.
func task(j *journal, name string, started chan<- string) func(context.Context) error {
	return func(ctx context.Context) error {
		started <- name
		<-ctx.Done()
		j.add("stop " + name)
		return nil
	}
}

func resource(j *journal, name string) func() error {
	return func() error {
		j.add("release " + name)
		return nil
	}
}

// TestStartInOrderStopInReverse: tasks start in the order added; when the
// context ends every part stops in reverse, each task having returned
// before the part before it stops.
func TestStartInOrderStopInReverse(t *testing.T) {
	var j journal
	started := make(chan string, 3)
	var g Group
	g.Add("db", resource(&j, "db"))
	g.Go("pipeline", task(&j, "pipeline", started))
	g.Add("node", resource(&j, "node"))
	g.Go("http", task(&j, "http", started))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var order []string
	for range 2 {
		order = append(order, <-started)
	}
	// Goroutines start in order but may run in any: only both must run.
	if !slices.Contains(order, "pipeline") || !slices.Contains(order, "http") {
		t.Fatalf("started %v", order)
	}
	if got := j.get(); len(got) != 0 {
		t.Fatalf("stopped before the context ended: %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"stop http", "release node", "stop pipeline", "release db"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("stopped %v, want %v", got, want)
	}
	if err := g.Stop(); err != nil || len(j.get()) != len(want) {
		t.Fatalf("Stop after Run: %v, %v", err, j.get())
	}
}

// TestFirstFailureStopsAll: a task that fails stops the others, in
// reverse, and Run returns its error, named.
func TestFirstFailureStopsAll(t *testing.T) {
	var j journal
	started := make(chan string, 2)
	boom := errors.New("boom")
	var g Group
	g.Add("db", resource(&j, "db"))
	g.Go("follower", task(&j, "follower", started))
	g.Go("relay", func(ctx context.Context) error {
		<-started // fail once the follower runs
		return boom
	})
	g.Go("http", task(&j, "http", started))
	err := g.Run(context.Background())
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "relay: ") {
		t.Fatalf("Run: %v, want relay: boom", err)
	}
	want := []string{"stop http", "stop follower", "release db"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("stopped %v, want %v", got, want)
	}
}

// TestEarlyReturnIsNotFailure: a task that has nothing to do returns nil at
// once, and the group runs on.
func TestEarlyReturnIsNotFailure(t *testing.T) {
	var j journal
	started := make(chan string, 1)
	var g Group
	g.Go("idle", func(context.Context) error { return nil })
	g.Go("http", task(&j, "http", started))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	<-started
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while a task runs", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil || !slices.Equal(j.get(), []string{"stop http"}) {
		t.Fatalf("Run: %v, %v", err, j.get())
	}
}

// TestStopWithoutRun: when building fails half way, Stop releases what was
// added, in reverse, starts no task, and joins the release errors.
func TestStopWithoutRun(t *testing.T) {
	var j journal
	ran := false
	var g Group
	g.Add("db", resource(&j, "db"))
	g.Go("pipeline", func(context.Context) error { ran = true; return nil })
	g.Add("conn", func() error { j.add("release conn"); return errors.New("already closed") })
	g.Add("nothing", nil)
	err := g.Stop()
	if err == nil || !strings.Contains(err.Error(), "stopping conn: already closed") {
		t.Fatalf("Stop: %v", err)
	}
	if got := j.get(); !slices.Equal(got, []string{"release conn", "release db"}) || ran {
		t.Fatalf("released %v, task ran %v", got, ran)
	}
	if err := g.Stop(); err != nil || len(j.get()) != 2 {
		t.Fatalf("second Stop: %v %v", err, j.get())
	}
	if err := g.Run(context.Background()); err == nil {
		t.Fatal("Run after Stop started")
	}
}

// TestTasksKeepContextValues: a task's context carries the values of Run's.
func TestTasksKeepContextValues(t *testing.T) {
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	got := make(chan any, 1)
	var g Group
	g.Go("reader", func(ctx context.Context) error {
		got <- ctx.Value(key{})
		<-ctx.Done()
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	if v := <-got; v != "v" {
		t.Fatalf("value %v", v)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestServeHTTP: the server answers until the context ends, then shuts
// down, ending the requests under way through their context.
func TestServeHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			close(inFlight)
			<-r.Context().Done() // a long poll: ends with the server
			return
		}
		_, _ = w.Write([]byte("ok"))
	})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHTTP(ctx, srv, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String() + "/wait"); err == nil {
			resp.Body.Close()
		}
	}()
	<-inFlight
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
		t.Fatal("the server still answers after its context ended")
	}
}
