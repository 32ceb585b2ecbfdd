package devipfs

import (
	"net/http"

	"github.com/ipfs/boxo/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// gatewayConcurrency bounds the gateway requests served at once; more are
// answered 429 by boxo's limiter.
const gatewayConcurrency = 256

// gatewayHandler is boxo's path gateway over the node's blocks, on /ipfs/
// only: the node resolves no names (/ipns, DNSLink), having no network.
func (n *Node) gatewayHandler() (http.Handler, error) {
	backend, err := gateway.NewBlocksBackend(n.blocks)
	if err != nil {
		return nil, err
	}
	h := gateway.NewHandler(gateway.Config{
		DeserializedResponses: true,
		NoDNSLink:             true,
		// Plain-text errors: the readers are programs (validators, tests).
		DisableHTMLErrors:     true,
		RetrievalTimeout:      gateway.DefaultRetrievalTimeout,
		MaxConcurrentRequests: gatewayConcurrency,
		// A registry per node: boxo would register on the process's
		// default one, which a second node in the same process (a test
		// restarting it) could not register on again.
		MetricsRegistry: prometheus.NewRegistry(),
	}, backend)
	mux := http.NewServeMux()
	mux.Handle("/ipfs/", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not found: this gateway serves /ipfs/{cid} only (an offline devnet IPFS node)", http.StatusNotFound)
	})
	return mux, nil
}
