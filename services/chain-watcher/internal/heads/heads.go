// Package heads wakes the relay when a WebSocket endpoint announces a new
// block, so that a payment is read as soon as it has its confirmations
// instead of at the next poll.
//
// # Design
//
// The subscription only says "look now": logs are still read by range
// with eth_getLogs, and blocks checked by hash, by the same code as when
// polling (internal/watch, internal/relay). The published stream is
// therefore the same, in the same order, whichever way the relay was woken;
// a lost or duplicated head changes nothing but when the next look happens,
// and polling goes on underneath at the configured interval in case the
// subscription is silently stuck. Subscribing to the contract's logs
// instead would need a second path for ordering, confirmations and reorgs
// (providers deliver removed logs inconsistently), for a few milliseconds
// less delay.
//
// Endpoints are tried in the configured order (preferred first); when a
// subscription fails or ends, the next one is tried, after a backoff once
// every endpoint has failed in a row.
package heads

import (
	"context"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/core/types"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/backoff"
)

// Subscriber is an endpoint that can stream new heads; *ethclient.Client
// over ws:// or wss:// is one.
type Subscriber interface {
	SubscribeNewHead(ctx context.Context, ch chan<- *types.Header) (ethereum.Subscription, error)
}

// Endpoint is one subscribable endpoint.
type Endpoint struct {
	Name   string // as in logs: never the URL, which may hold an API key
	Client Subscriber
}

// Config configures Run.
type Config struct {
	Endpoints []Endpoint
	// Retry is the wait after every endpoint failed in a row.
	Retry backoff.Policy
	// Logger; nil means no logging.
	Logger *zap.Logger
	// OnHead, if set, is called with the number of every head received.
	OnHead func(number uint64)
	// Rand is the jitter's random source; nil means math/rand/v2.
	Rand func() float64
}

// Run subscribes until ctx ends and signals wake, without blocking, on
// every new head. wake should have a buffer of one: a signal the relay has
// not taken yet already says everything a second one would.
func Run(ctx context.Context, cfg Config, wake chan<- struct{}) {
	if len(cfg.Endpoints) == 0 {
		return
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	retry := backoff.New(cfg.Retry, cfg.Rand)
	failures := 0
	for i := 0; ctx.Err() == nil; i = (i + 1) % len(cfg.Endpoints) {
		ep := cfg.Endpoints[i]
		received, err := follow(ctx, ep, cfg.OnHead, wake)
		if ctx.Err() != nil {
			return
		}
		if received {
			failures = 0
			retry.Reset()
		}
		failures++
		log.Warn("new-head subscription ended; polling meanwhile", zap.String("endpoint", ep.Name), zap.Error(err))
		if failures >= len(cfg.Endpoints) {
			failures = 0
			_ = backoff.Sleep(ctx, retry.Next())
		}
	}
}

// follow runs one subscription until it fails; received tells whether it
// delivered a head.
func follow(ctx context.Context, ep Endpoint, onHead func(uint64), wake chan<- struct{}) (received bool, err error) {
	heads := make(chan *types.Header, 16)
	sub, err := ep.Client.SubscribeNewHead(ctx, heads)
	if err != nil {
		return false, err
	}
	defer sub.Unsubscribe()
	for {
		select {
		case h := <-heads:
			received = true
			if onHead != nil && h != nil && h.Number != nil {
				onHead(h.Number.Uint64())
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		case err := <-sub.Err():
			return received, err
		case <-ctx.Done():
			return received, ctx.Err()
		}
	}
}
