package apiserver

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// serveProfile answers /debug/pprof/ and below with Go's profiles, as kube-apiserver's
// --profiling does; the request has passed authentication and authorization by path.
func serveProfile(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof") {
	case "", "/":
		if r.URL.Path == "/debug/pprof" {
			http.Redirect(w, r, "/debug/pprof/", http.StatusMovedPermanently)
			return
		}
		pprof.Index(w, r)
	case "/cmdline":
		pprof.Cmdline(w, r)
	case "/profile":
		pprof.Profile(w, r)
	case "/symbol":
		pprof.Symbol(w, r)
	case "/trace":
		pprof.Trace(w, r)
	default:
		// Named profiles: heap, allocs, goroutine, block, mutex, threadcreate.
		pprof.Index(w, r)
	}
}
