package heads

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
)

// fakeSub is a subscription the test ends with an error.
type fakeSub struct {
	errc chan error
	once sync.Once
}

func (s *fakeSub) Unsubscribe()      { s.once.Do(func() { close(s.errc) }) }
func (s *fakeSub) Err() <-chan error { return s.errc }

// fakeEndpoint refuses to subscribe while down; otherwise it hands the
// test the channel of each subscription.
type fakeEndpoint struct {
	mu       sync.Mutex
	down     bool
	attempts int
	subs     chan *subscription
}

type subscription struct {
	heads chan<- *types.Header
	sub   *fakeSub
}

func (e *fakeEndpoint) SubscribeNewHead(_ context.Context, ch chan<- *types.Header) (ethereum.Subscription, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.attempts++
	if e.down {
		return nil, errors.New("connection refused")
	}
	s := &fakeSub{errc: make(chan error, 1)}
	e.subs <- &subscription{heads: ch, sub: s}
	return s, nil
}

func (e *fakeEndpoint) setDown(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down = down
}

func TestRunFailsOverAndWakes(t *testing.T) {
	a := &fakeEndpoint{down: true, subs: make(chan *subscription, 8)}
	b := &fakeEndpoint{subs: make(chan *subscription, 8)}
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var mu sync.Mutex
	var numbers []uint64
	go func() {
		defer close(done)
		Run(ctx, Config{
			Endpoints: []Endpoint{{Name: "a", Client: a}, {Name: "b", Client: b}},
			Retry:     backoff.Policy{Initial: time.Millisecond, Max: 10 * time.Millisecond},
			OnHead: func(n uint64) {
				mu.Lock()
				defer mu.Unlock()
				numbers = append(numbers, n)
			},
		}, wake)
	}()
	defer func() {
		cancel()
		<-done
	}()

	// a refuses: b is subscribed.
	s := receive(t, b.subs)
	s.heads <- &types.Header{Number: big.NewInt(7)}
	receive(t, wake)
	// Two heads before the relay takes the signal: one signal, no block.
	s.heads <- &types.Header{Number: big.NewInt(8)}
	s.heads <- &types.Header{Number: big.NewInt(9)}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(numbers) == 3 })
	receive(t, wake)
	select {
	case <-wake:
		t.Fatal("a second signal for heads the relay had not looked at yet")
	default:
	}

	// b's subscription fails and a is back: a is subscribed next.
	a.setDown(false)
	s.sub.errc <- errors.New("websocket closed")
	s = receive(t, a.subs)
	s.heads <- &types.Header{Number: big.NewInt(10)}
	receive(t, wake)
}

func TestRunRetriesWhenEveryEndpointFails(t *testing.T) {
	a := &fakeEndpoint{down: true, subs: make(chan *subscription, 8)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{Endpoints: []Endpoint{{Name: "a", Client: a}}, Retry: backoff.Policy{Initial: time.Millisecond, Max: time.Millisecond}}, make(chan struct{}, 1))
	}()
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.attempts >= 3 })
	a.setDown(false)
	receive(t, a.subs)
	cancel()
	<-done
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received in 10s")
		panic("unreachable")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond) // polling the fake's state
	}
}
