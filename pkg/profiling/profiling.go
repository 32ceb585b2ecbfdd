// Package profiling serves Go's runtime profiles (net/http/pprof) on a
// listener of a service's own, kept off its API port so that it can be
// bound to loopback only.
package profiling

import (
	"net/http"
	"net/http/pprof"

	"github.com/contentledger/contentledger/pkg/httpserver"
)

// Server returns the server of the /debug/pprof routes, with the limits of
// cfg (the service's HTTP settings; a 30 s CPU profile fits in the default
// write timeout). The routes take no body.
func Server(cfg httpserver.Config) (*httpserver.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return httpserver.New(cfg, httpserver.LimitBodies(mux, cfg.WithDefaults().MaxBodyBytes))
}
