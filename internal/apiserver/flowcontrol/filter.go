package flowcontrol

import (
	"net/http"

	"mizzen/internal/apiserver/requestmetrics"
)

// The headers' canonical keys, so that a response's header map is written directly:
// Header.Set canonicalizes the key and allocates the value's slice on every request.
var (
	flowSchemaKey    = http.CanonicalHeaderKey(HeaderFlowSchemaUID)
	priorityLevelKey = http.CanonicalHeaderKey(HeaderPriorityLevelUID)
)

// Handler admits each request under its priority level before next serves it.
// describe says what a request is (false: served without classification); reject
// answers a request turned away (429, with the Retry-After seconds given: its level's,
// which grows while the level keeps refusing, as upstream's).
func (c *Controller) Handler(next http.Handler, describe func(*http.Request, *Request) bool, reject func(w http.ResponseWriter, r *http.Request, retryAfterSeconds int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if !describe(r, &req) {
			next.ServeHTTP(w, r)
			return
		}
		watch := req.ResourceRequest && req.Verb == "watch"
		if req.LongRunning && !watch {
			// exec, attach, port-forward, proxies, logs: as upstream's, neither
			// classified (no headers) nor limited.
			next.ServeHTTP(w, r)
			return
		}
		s, flow := c.classify(&req)
		if s == nil {
			next.ServeHTTP(w, r) // no configuration yet (the server starting)
			return
		}
		// The schema's values, shared by its responses' headers: nothing appends to them.
		h := w.Header()
		h[flowSchemaKey] = s.uidHeader
		h[priorityLevelKey] = s.levelUIDHeader
		rq := &request{info: req, schema: s.name, distinguisher: distinguisher(s.method, &req), flow: flow,
			metrics: s.metrics}
		final, latency := c.finalWork(s, &req)
		rq.setWork(s.level.seatsFor(req.Seats), final, latency)
		// What it waits for in its queue: the level may cap its final seats as it
		// starts, but it counts in the queue as it came.
		seats := float64(rq.seats)
		s.metrics.estimatedSeats.get().Observe(seats)
		kind := c.metrics.kind(req.Verb)
		queued := false
		waited, reason := s.level.acquire(r.Context(), rq, c.opts.WaitLimit, func() {
			queued = true
			s.metrics.inQueue.get().Inc()
			s.metrics.inQueueSeats.get().Add(seats)
			kind.waiting.Add(1)
		})
		if queued {
			s.metrics.inQueue.get().Dec()
			s.metrics.inQueueSeats.get().Sub(seats)
			kind.waiting.Add(-1)
		}
		if reason != "" {
			s.metrics.waitedRejected.get().Observe(waited.Seconds())
			s.metrics.rejectedByReason(reason).Inc()
			if s.level.reapable() {
				c.reap()
			}
			reject(w, r, s.level.retry.refused(c.opts.Clock()))
			return
		}
		s.metrics.waitedExecuted.get().Observe(waited.Seconds())
		s.metrics.dispatched.get().Inc()
		s.metrics.executing.get().Inc()
		kind.executing.Add(1)
		if waited > 0 {
			// Upstream's latency SLI leaves out the time spent waiting for a seat.
			requestmetrics.ExcludeFromSLI(r.Context(), waited)
		}
		if watch {
			c.serveWatch(w, r, next, s, rq)
			return
		}
		defer c.finish(s, rq)
		next.ServeHTTP(w, r)
	})
}

// finish frees the seats of a request that is done (a watch: initialized), and shows
// how long it executed.
func (c *Controller) finish(s *compiledSchema, rq *request) {
	s.metrics.executing.get().Dec()
	c.metrics.kind(rq.info.Verb).executing.Add(-1)
	reap := s.level.release(rq)
	executed := &s.metrics.executedRegular
	if rq.info.ResourceRequest && rq.info.Verb == "watch" {
		executed = &s.metrics.executedWatch
	}
	executed.get().Observe(rq.ran.Seconds())
	if reap {
		c.reap()
	}
}

// serveWatch serves a watch that holds its seat until it has sent its initial events
// (watchinit.go), at the latest until its handler returns.
func (c *Controller) serveWatch(w http.ResponseWriter, r *http.Request, next http.Handler, s *compiledSchema, rq *request) {
	forget := c.watches.register(&rq.info)
	defer forget()
	init := &watchInit{release: func() { c.finish(s, rq) }}
	defer init.signal()
	next.ServeHTTP(w, r.WithContext(withWatchInit(r.Context(), init)))
}
