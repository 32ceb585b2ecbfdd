package events

import (
	"net/http"
	"sync"

	"github.com/contentledger/contentledger/pkg/httpserver"
)

// Budget counts the open streams of each client, across every hub given it
// (Config.Budget).
type Budget struct {
	max int
	key func(*http.Request) string

	mu sync.Mutex
	n  map[string]int
}

// NewBudget allows each client maxPerClient concurrent streams
// (DefaultMaxPerIP when 0 or less). clientKey names the client of a
// request: the validator passes its trusted-proxy resolution
// (httpserver.Clients.Key); nil is the connection's address keyed by
// httpserver.ClientKey, since without a trusted proxy the headers a client
// sets are not believed.
func NewBudget(maxPerClient int, clientKey func(*http.Request) string) *Budget {
	if maxPerClient <= 0 {
		maxPerClient = DefaultMaxPerIP
	}
	if clientKey == nil {
		clientKey = directClientKey
	}
	return &Budget{max: maxPerClient, key: clientKey, n: map[string]int{}}
}

// Max is the number of concurrent streams each client may hold.
func (b *Budget) Max() int { return b.max }

func (b *Budget) acquire(client string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n[client] >= b.max {
		return false
	}
	b.n[client]++
	return true
}

func (b *Budget) release(client string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n[client] <= 1 {
		delete(b.n, client)
		return
	}
	b.n[client]--
}

// directClientKey is the client key of the connection's address.
func directClientKey(r *http.Request) string {
	if a := httpserver.RemoteAddr(r); a.IsValid() {
		return httpserver.ClientKey(a)
	}
	return r.RemoteAddr
}
