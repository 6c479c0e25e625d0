package flowcontrol

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Upstream's phases and request kinds, as apiserver_flowcontrol_read_vs_write_current_requests
// and apiserver_current_inflight_requests label them: get, list and watch read,
// anything else mutates.
const (
	Executing = "executing"
	Waiting   = "waiting"
	ReadOnly  = "readOnly"
	Mutating  = "mutating"
)

// ReadVsWrite is upstream's apiserver_flowcontrol_read_vs_write_current_requests: by
// phase and request kind, how long the requests stood at each ratio to their limit.
// It is exported because upstream's max-in-flight filter, which serves when priority
// and fairness is off, feeds it too (its executing phase only: it queues nothing),
// and the two must be the same series.
type ReadVsWrite struct {
	vec   *timedRatioVec
	clock func() time.Time
}

// NewReadVsWrite makes the histogram, without series; clock times it.
func NewReadVsWrite(clock func() time.Time) *ReadVsWrite {
	return &ReadVsWrite{clock: clock, vec: newTimedRatioVec(clock, "apiserver_flowcontrol_read_vs_write_current_requests",
		"Observations, at the end of every nanosecond, of the number of requests (as a fraction of the relevant limit) waiting or in regular stage of execution",
		[]float64{0, 0.001, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1}, nil, "phase", "request_kind")}
}

// Collector serves the series made so far.
func (rw *ReadVsWrite) Collector() prometheus.Collector { return rw.vec }

// Series makes the series of the phase and request kind, served from now on at 0
// over 1. It is to be asked for once: each RatioGauge keeps its own count.
func (rw *ReadVsWrite) Series(phase, kind string) *RatioGauge {
	return newRatioGauge(rw.vec.with(phase, kind), rw.clock)
}

// RatioGauge shows a count over a denominator in a timing histogram series. The
// count and the denominator are guarded by the series' own lock, so that a change
// takes one lock rather than one for the count and another for the histogram: every
// request changes two of these.
type RatioGauge struct {
	s     *timedRatio
	clock func() time.Time
	// n and denominator are guarded by s.mu.
	n           int
	denominator float64
}

func newRatioGauge(s *timedRatio, clock func() time.Time) *RatioGauge {
	return &RatioGauge{s: s, clock: clock, denominator: 1}
}

// Add changes the count by delta.
func (g *RatioGauge) Add(delta int) {
	g.s.mu.Lock()
	g.n += delta
	g.s.setLocked(g.clock(), float64(g.n)/g.denominator)
	g.s.mu.Unlock()
}

// SetDenominator sets what the count is shown over.
func (g *RatioGauge) SetDenominator(d float64) {
	g.s.mu.Lock()
	g.denominator = d
	g.s.setLocked(g.clock(), float64(g.n)/d)
	g.s.mu.Unlock()
}
