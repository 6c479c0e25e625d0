// Package httpserve runs an http.Server in the background with a stop that returns only
// once the server's listener is closed, for components that a bundle starts again in
// the same process (after a lost Lease) and that must bind the same port again.
package httpserve

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// shutdownTimeout bounds how long stop waits for requests in flight.
const shutdownTimeout = 5 * time.Second

// Start runs serve (srv.Serve or srv.ServeTLS on a listener) in the background and
// returns stop, which shuts srv down and returns once serve has returned (and so its
// listener is closed). ctx ending stops it too. onError, when not nil, gets an error
// serve returned other than http.ErrServerClosed.
func Start(ctx context.Context, srv *http.Server, serve func() error, onError func(error)) (stop func()) {
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) && onError != nil {
			onError(err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			_ = srv.Shutdown(shutdown)
			<-served
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-served:
		}
	}()
	return stop
}
