// Package profiling serves Go's runtime profiles (net/http/pprof) on a
// listener of a service's own, kept off its API port so that it can be
// bound to loopback only.
package profiling

import (
	"net/http"
	"net/http/pprof"
	"time"
)

// Server returns the server of the /debug/pprof routes.
func Server() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}
