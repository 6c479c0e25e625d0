// Package maxinflight limits how many requests the apiserver serves at once when API
// Priority and Fairness is off, as upstream's --max-requests-inflight and
// --max-mutating-requests-inflight do then: one pool of slots for reads (get, list)
// and one for everything else, and a request that finds its pool full is turned away
// at once (429, Retry-After 1) rather than queued. Long-running requests (watches,
// streams) take no slot, and system:masters is served beyond the limits, as upstream
// serves it: a super-user or the server's own loopback client always gets an answer.
package maxinflight

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Request is what the limiter needs to know about a request.
type Request struct {
	// Mutating is anything but get, list and watch (for a non-resource path, any
	// method but GET).
	Mutating    bool
	LongRunning bool
	// Privileged is a member of system:masters.
	Privileged bool
}

// Limiter holds the two pools.
type Limiter struct {
	readOnly, mutating chan struct{} // nil: no limit
	current            *prometheus.GaugeVec
	readOnlyCurrent    prometheus.Gauge
	mutatingCurrent    prometheus.Gauge
}

// New returns a limiter of readOnly reads and mutating writes at once; a limit of 0
// is none. It returns nil when both are 0: nothing to limit.
func New(readOnly, mutating int) *Limiter {
	if readOnly <= 0 && mutating <= 0 {
		return nil
	}
	l := &Limiter{current: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apiserver_current_inflight_requests",
		Help: "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
	}, []string{"request_kind"})}
	l.readOnlyCurrent = l.current.WithLabelValues("readOnly")
	l.mutatingCurrent = l.current.WithLabelValues("mutating")
	if readOnly > 0 {
		l.readOnly = make(chan struct{}, readOnly)
	}
	if mutating > 0 {
		l.mutating = make(chan struct{}, mutating)
	}
	return l
}

// Collectors are the limiter's metrics, for the server's registry.
func (l *Limiter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{l.current}
}

// Handler serves next within the limits. describe says what a request is (false:
// not a request the limiter knows, served unlimited); reject answers one turned away.
func (l *Limiter) Handler(next http.Handler, describe func(*http.Request, *Request) bool, reject func(w http.ResponseWriter, r *http.Request, retryAfterSeconds int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if !describe(r, &req) || req.LongRunning {
			next.ServeHTTP(w, r)
			return
		}
		pool, inUse := l.readOnly, l.readOnlyCurrent
		if req.Mutating {
			pool, inUse = l.mutating, l.mutatingCurrent
		}
		if pool == nil {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case pool <- struct{}{}:
			inUse.Inc()
			defer func() {
				<-pool
				inUse.Dec()
			}()
			next.ServeHTTP(w, r)
		default:
			if req.Privileged {
				next.ServeHTTP(w, r)
				return
			}
			reject(w, r, 1)
		}
	})
}
