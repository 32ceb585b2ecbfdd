package app

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
)

// lazyEndpoint is a JSON-RPC endpoint dialled at its first use rather than
// at start. go-ethereum dials a WebSocket URL at once (an HTTP one only
// per request), so one WebSocket endpoint down at start would otherwise
// stop the watcher, whatever the others. A failed dial fails the call, as
// any transport error does: the pool then passes the endpoint over for its
// cooldown and the next use dials again. Once dialled, the client redials a
// dropped connection itself.
type lazyEndpoint struct {
	url, name string

	mu     sync.Mutex
	client *ethclient.Client
}

func newLazyEndpoint(url, name string) *lazyEndpoint {
	return &lazyEndpoint{url: url, name: name}
}

// errClosed is returned by calls after Close.
var errClosed = errors.New("endpoint closed")

// get returns the client, dialling it when there is none yet.
func (e *lazyEndpoint) get(ctx context.Context) (*ethclient.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		return e.client, nil
	}
	if e.url == "" {
		return nil, errClosed
	}
	c, err := ethclient.DialContext(ctx, e.url)
	if err != nil {
		// Named, not quoted: the URL may hold an API key.
		return nil, errors.New("dial " + e.name + ": " + strings.ReplaceAll(err.Error(), e.url, "<"+e.name+">"))
	}
	e.client = c
	return c, nil
}

// Close closes the client, if dialled; later calls fail.
func (e *lazyEndpoint) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		e.client.Close()
		e.client = nil
	}
	e.url = ""
}

func (e *lazyEndpoint) ChainID(ctx context.Context) (*big.Int, error) {
	c, err := e.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.ChainID(ctx)
}

func (e *lazyEndpoint) BlockNumber(ctx context.Context) (uint64, error) {
	c, err := e.get(ctx)
	if err != nil {
		return 0, err
	}
	return c.BlockNumber(ctx)
}

func (e *lazyEndpoint) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	c, err := e.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.HeaderByNumber(ctx, number)
}

func (e *lazyEndpoint) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	c, err := e.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.FilterLogs(ctx, q)
}

func (e *lazyEndpoint) SubscribeNewHead(ctx context.Context, ch chan<- *types.Header) (ethereum.Subscription, error) {
	c, err := e.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.SubscribeNewHead(ctx, ch)
}
