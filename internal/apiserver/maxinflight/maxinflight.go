// Package maxinflight limits how many requests the apiserver serves at once when API
// Priority and Fairness is off, as upstream's --max-requests-inflight and
// --max-mutating-requests-inflight do then: one pool of slots for reads (get, list)
// and one for everything else, and a request that finds its pool full is turned away
// at once (429, Retry-After 1) rather than queued. Long-running requests (watches,
// streams) take no slot, and system:masters is served beyond the limits, as upstream
// serves it: a super-user or the server's own loopback client always gets an answer.
// As upstream's, it shows each kind's slots in use on /metrics twice: as
// apiserver_current_inflight_requests, and over its limit in priority and fairness's
// apiserver_flowcontrol_read_vs_write_current_requests (phase "executing").
package maxinflight

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"mizzen/internal/apiserver/flowcontrol"
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
	readOnly, mutating pool
	current            *prometheus.GaugeVec
	// readVsWrite is priority and fairness's
	// apiserver_flowcontrol_read_vs_write_current_requests, which upstream's
	// max-in-flight filter feeds too: its executing phase, each kind's slots in use
	// over its limit.
	readVsWrite *flowcontrol.ReadVsWrite
}

// pool is one request kind's slots and the series that show them in use.
type pool struct {
	slots   chan struct{} // nil: no limit
	current prometheus.Gauge
	ratio   *flowcontrol.RatioGauge
}

// New returns a limiter of readOnly reads and mutating writes at once; a limit of 0
// is none. It returns nil when both are 0: nothing to limit. clock times
// read_vs_write_current_requests (time.Now if nil).
func New(readOnly, mutating int, clock func() time.Time) *Limiter {
	if readOnly <= 0 && mutating <= 0 {
		return nil
	}
	if clock == nil {
		clock = time.Now
	}
	l := &Limiter{current: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apiserver_current_inflight_requests",
		Help: "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
	}, []string{"request_kind"}), readVsWrite: flowcontrol.NewReadVsWrite(clock)}
	l.readOnly.init(l, flowcontrol.ReadOnly, readOnly)
	l.mutating.init(l, flowcontrol.Mutating, mutating)
	return l
}

// init makes the pool of the kind and its series: both kinds' are served, as
// upstream's, even when one has no limit (its ratio then stays at 0 over 1).
func (p *pool) init(l *Limiter, kind string, limit int) {
	p.current = l.current.WithLabelValues(kind)
	p.ratio = l.readVsWrite.Series(flowcontrol.Executing, kind)
	if limit > 0 {
		p.slots = make(chan struct{}, limit)
		p.ratio.SetDenominator(float64(limit))
	}
}

// inUse shows a change of the slots in use.
func (p *pool) inUse(delta int) {
	p.current.Add(float64(delta))
	p.ratio.Add(delta)
}

// Collectors are the limiter's metrics, for the server's registry.
func (l *Limiter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{l.current, l.readVsWrite.Collector()}
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
		p := &l.readOnly
		if req.Mutating {
			p = &l.mutating
		}
		if p.slots == nil {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case p.slots <- struct{}{}:
			p.inUse(1)
			defer func() {
				<-p.slots
				p.inUse(-1)
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
