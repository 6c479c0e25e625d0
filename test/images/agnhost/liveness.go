package main

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// runLiveness serves /healthz on :8080: 200 for the first 10 seconds after start, 500
// after, so a liveness probe on it restarts the container.
func runLiveness(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("liveness", stderr)
	port := fs.Int("port", 8080, "port to serve /healthz on")
	healthyFor := fs.Duration("healthy-for", 10*time.Second, "how long /healthz answers 200")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", livenessHandler(time.Now(), *healthyFor, time.Now))
	fmt.Fprintf(stdout, "Serving /healthz on port %d, healthy for %s\n", *port, *healthyFor)
	if err := http.ListenAndServe(fmt.Sprintf(":%d", *port), mux); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// livenessHandler reports healthy until started+healthyFor, then an error with how long
// the server has been up.
func livenessHandler(started time.Time, healthyFor time.Duration, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up := now().Sub(started)
		if up > healthyFor {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "error: %v", up.Seconds())
			return
		}
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "ok")
	})
}
