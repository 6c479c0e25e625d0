// Package httpserve serves an http.Server on a listener until a stop that frees
// the port before it returns. Components the server bundle runs again after they
// lose their Lease (the scheduler, the controller-manager) listen on the same
// port in the new run, so the old run's port must be closed when it ends, not
// when the process does.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve starts srv on ln (with TLS when srv.TLSConfig holds the certificates) and
// returns the stop. onError receives the error that ends serving early, if any.
func Serve(srv *http.Server, ln net.Listener, onError func(error)) (stop func()) {
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) && onError != nil {
			onError(err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = ln.Close() // Serve may not have taken it over yet, and Shutdown closes only what it serves
	}
}
