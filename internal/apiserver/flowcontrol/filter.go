package flowcontrol

import (
	"net/http"

	"mizzen/internal/apiserver/requestmetrics"
)

// Handler admits each request under its priority level before next serves it.
// describe says what a request is (nil: served without classification); reject
// answers a request turned away (429, with the Retry-After seconds given).
func (c *Controller) Handler(next http.Handler, describe func(*http.Request) *Request, reject func(w http.ResponseWriter, r *http.Request, retryAfterSeconds int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := describe(r)
		if req == nil {
			next.ServeHTTP(w, r)
			return
		}
		s, flow := c.classify(req)
		if s == nil {
			next.ServeHTTP(w, r) // no configuration yet (the server starting)
			return
		}
		w.Header().Set(HeaderFlowSchemaUID, string(s.uid))
		w.Header().Set(HeaderPriorityLevelUID, string(s.levelUID))
		if req.LongRunning {
			next.ServeHTTP(w, r)
			return
		}
		queued := false
		waited, reason := s.level.acquire(r.Context(), flow, c.opts.WaitLimit, func() {
			queued = true
			s.metrics.inQueue.Inc()
		})
		if queued {
			s.metrics.inQueue.Dec()
		}
		if reason != "" {
			s.metrics.waitedRejected.Observe(waited.Seconds())
			s.metrics.rejectedByReason(reason).Inc()
			reject(w, r, 1)
			return
		}
		s.metrics.waitedExecuted.Observe(waited.Seconds())
		s.metrics.dispatched.Inc()
		s.metrics.executing.Inc()
		defer func() {
			s.metrics.executing.Dec()
			s.level.release()
		}()
		if waited > 0 {
			// Upstream's latency SLI leaves out the time spent waiting for a seat.
			requestmetrics.ExcludeFromSLI(r.Context(), waited)
		}
		next.ServeHTTP(w, r)
	})
}
