package lifecycle

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ShutdownTimeout bounds how long ServeHTTP waits for the requests under
// way when its context ends.
const ShutdownTimeout = 5 * time.Second

// ServeHTTP serves srv on ln until ctx ends, then shuts it down, waiting
// up to ShutdownTimeout for the requests under way. Requests take ctx as
// their base context (unless srv sets its own), so long polls and streams
// end with it. It is a task for Group.Go; it fails only when serving does.
func ServeHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	if srv.BaseContext == nil {
		srv.BaseContext = func(net.Listener) context.Context { return ctx }
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
