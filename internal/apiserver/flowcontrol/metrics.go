package flowcontrol

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are upstream's apiserver_flowcontrol_* series that say where requests went
// and what waited or was turned away.
type metrics struct {
	dispatched *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	executing  *prometheus.GaugeVec
	// executingSeats are the seats held by requests executing, or holding their
	// final seats after their handler returned.
	executingSeats *prometheus.GaugeVec
	inQueue        *prometheus.GaugeVec
	// inQueueSeats are the seats the requests waiting in queues would take.
	inQueueSeats *prometheus.GaugeVec
	waitDuration *prometheus.HistogramVec
	// executionSeconds is how long requests executed (a watch until it was
	// initialized), by type "regular" or "watch".
	executionSeconds *prometheus.HistogramVec
	// queueLength is the length of the queue each request of a queuing level joined,
	// itself included (1 for one that started at once, as upstream's queues every
	// request before dispatching it).
	queueLength *prometheus.HistogramVec
	// estimatedSeats is labelled priority_level, flow_schema, in upstream's order.
	estimatedSeats *prometheus.HistogramVec
	nominalLimit   *prometheus.GaugeVec
	lowerLimit     *prometheus.GaugeVec
	upperLimit     *prometheus.GaugeVec
	currentLimit   *prometheus.GaugeVec
	// demandSeats is, by level, how long its seat demand (the seats its requests
	// executing and waiting could use) stood at each ratio to its current limit: a
	// timing histogram, whose observations are nanoseconds, as upstream's
	// TimingRatioHistogram.
	demandSeats *timedRatioVec
	// seatUtilization and requestUtilization are, by level, timing histograms of
	// its seats in use and its requests executing over its concurrency denominator,
	// and of its requests waiting over what its queues hold (levelSeries).
	seatUtilization    *timedRatioVec
	requestUtilization *timedRatioVec
	// readVsWrite is the timing histogram of the requests executing and waiting,
	// read-only and mutating, over the server's seats and its queues' capacity.
	readVsWrite        *ReadVsWrite
	readOnly, mutating requestKindSeries
	// noAccommodation counts the dispatches that found the seats the request at the
	// head of the queue chosen asked for taken (while some were free), by its schema.
	noAccommodation *prometheus.CounterVec
	// watchCount is the watchers each mutation's estimate counted.
	watchCount *prometheus.HistogramVec
	// epochAdvances counts the times a level's virtual time was shifted back,
	// by whether every queue's and request's virtual times stayed in range.
	epochAdvances *prometheus.CounterVec
	// The fair queuing's virtual times by level, in seat-seconds, as upstream's
	// queueset shows them: R as of the level's last change; and, set by each dispatch
	// from a queue, R then, the S (next dispatch R) of the queue dispatched from, the
	// least and greatest S of the queues with a request waiting, and the same less
	// each queue's estimated work in progress (by "bound", min or max).
	currentR, dispatchR, latestS       *prometheus.GaugeVec
	nextSBounds, nextDiscountedSBounds *prometheus.GaugeVec
	// The borrowing adjustment's inputs and result, by level: its demand's high
	// watermark, time-weighted average and deviation over the last period, their
	// smoothed envelope, and the target it was shared seats by; and the fair fraction.
	demandHighWatermark *prometheus.GaugeVec
	demandAverage       *prometheus.GaugeVec
	demandStdDev        *prometheus.GaugeVec
	demandSmoothed      *prometheus.GaugeVec
	targetSeats         *prometheus.GaugeVec
	fairFrac            prometheus.Gauge
}

// schemaMetrics are one schema's series, resolved once per configuration rather than
// per request, but each made by its first use: as upstream's, a schema's series
// appear once a request has changed them (a schema no request matched has none), not
// when the configuration names it.
type schemaMetrics struct {
	dispatched       onUse[prometheus.Counter]
	executing        onUse[prometheus.Gauge]
	executingSeats   onUse[prometheus.Gauge]
	inQueue          onUse[prometheus.Gauge]
	inQueueSeats     onUse[prometheus.Gauge]
	waitedExecuted   onUse[prometheus.Observer]
	executedRegular  onUse[prometheus.Observer]
	executedWatch    onUse[prometheus.Observer]
	queueLength      onUse[prometheus.Observer]
	waitedRejected   onUse[prometheus.Observer]
	estimatedSeats   onUse[prometheus.Observer]
	noAccommodation  onUse[prometheus.Counter]
	watchCount       onUse[prometheus.Observer]
	rejectedByReason func(reason string) prometheus.Counter
}

// onUse is a series of a vector, made by its first use. Concurrent first uses both
// ask the vector, which gives them the same series; later ones only load it.
type onUse[T any] struct {
	series atomic.Pointer[T]
	make   func() T
}

// onFirstUse is the series of the label values in with's vector, made by its first use.
func onFirstUse[T any](with func(...string) T, labels ...string) onUse[T] {
	return onUse[T]{make: func() T { return with(labels...) }}
}

func (o *onUse[T]) get() T {
	if s := o.series.Load(); s != nil {
		return *s
	}
	s := o.make()
	o.series.Store(&s)
	return s
}

// Upstream's buckets of request_wait_duration_seconds and request_execution_seconds,
// and of request_queue_length_after_enqueue.
var (
	requestDurationBuckets = []float64{0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30}
	queueLengthBuckets     = []float64{0, 10, 25, 50, 100, 250, 500, 1000}
)

// newMetrics makes the series; clock times the timing histograms.
func newMetrics(clock func() time.Time) *metrics {
	labels := []string{"flow_schema", "priority_level"}
	m := &metrics{
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_flowcontrol_dispatched_requests_total",
			Help: "Number of requests executed by API Priority and Fairness subsystem"}, labels),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_flowcontrol_rejected_requests_total",
			Help: "Number of requests rejected by API Priority and Fairness subsystem"}, append(labels, "reason")),
		executing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_executing_requests",
			Help: "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem"}, labels),
		executingSeats: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_executing_seats",
			Help: "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem"}, labels),
		inQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_inqueue_requests",
			Help: "Number of requests currently pending in queues of the API Priority and Fairness subsystem"}, labels),
		inQueueSeats: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_inqueue_seats",
			Help: "Number of seats currently pending in queues of the API Priority and Fairness subsystem"}, []string{"priority_level", "flow_schema"}),
		waitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_flowcontrol_request_wait_duration_seconds",
			Help:    "Length of time a request spent waiting in its queue",
			Buckets: requestDurationBuckets}, append(labels, "execute")),
		executionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_flowcontrol_request_execution_seconds",
			Help:    "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request execution in the API Priority and Fairness subsystem",
			Buckets: requestDurationBuckets}, []string{"priority_level", "flow_schema", "type"}),
		queueLength: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_flowcontrol_request_queue_length_after_enqueue",
			Help:    "Length of queue in the API Priority and Fairness subsystem, as seen by each request after it is enqueued",
			Buckets: queueLengthBuckets}, []string{"priority_level", "flow_schema"}),
		estimatedSeats: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_flowcontrol_work_estimated_seats",
			Help:    "Number of estimated seats (maximum of initial and final seats) associated with requests in API Priority and Fairness",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100}}, []string{"priority_level", "flow_schema"}),
		nominalLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_nominal_limit_seats",
			Help: "Nominal number of execution seats configured for each priority level"}, []string{"priority_level"}),
		lowerLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_lower_limit_seats",
			Help: "Configured lower bound on number of execution seats available to each priority level"}, []string{"priority_level"}),
		upperLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_upper_limit_seats",
			Help: "Configured upper bound on number of execution seats available to each priority level"}, []string{"priority_level"}),
		currentLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_limit_seats",
			Help: "current derived number of execution seats available to each priority level"}, []string{"priority_level"}),
		demandSeats: newTimedRatioVec(clock, "apiserver_flowcontrol_demand_seats",
			"Observations, at the end of every nanosecond, of (the number of seats each priority level could use) / (nominal number of seats for that level)",
			// Upstream's buckets: even below 1, closer above it.
			[]float64{0.2, 0.4, 0.6, 0.8, 1, 1.2, 1.4, 1.7, 2, 2.8, 4, 6}, nil, "priority_level"),
		seatUtilization: newTimedRatioVec(clock, "apiserver_flowcontrol_priority_level_seat_utilization",
			"Observations, at the end of every nanosecond, of utilization of seats for any stage of execution (but only initial stage for WATCHes)",
			// Upstream's: 0.99 and 1 both, so that a quantile shows saturation.
			[]float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1},
			prometheus.Labels{"phase": "executing"}, "priority_level"),
		requestUtilization: newTimedRatioVec(clock, "apiserver_flowcontrol_priority_level_request_utilization",
			"Observations, at the end of every nanosecond, of number of requests (as a fraction of the relevant limit) waiting or in any stage of execution (but only initial stage for WATCHes)",
			[]float64{0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.25, 0.5, 0.75, 1}, nil, "phase", "priority_level"),
		readVsWrite: NewReadVsWrite(clock),
		demandHighWatermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_demand_seats_high_watermark",
			Help: "High watermark, over last adjustment period, of demand_seats"}, []string{"priority_level"}),
		demandAverage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_demand_seats_average",
			Help: "Time-weighted average, over last adjustment period, of demand_seats"}, []string{"priority_level"}),
		demandStdDev: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_demand_seats_stdev",
			Help: "Time-weighted standard deviation, over last adjustment period, of demand_seats"}, []string{"priority_level"}),
		demandSmoothed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_demand_seats_smoothed",
			Help: "Smoothed seat demands"}, []string{"priority_level"}),
		targetSeats: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_target_seats",
			Help: "Seat allocation targets"}, []string{"priority_level"}),
		fairFrac: prometheus.NewGauge(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_seat_fair_frac",
			Help: "Fair fraction of server's concurrency to allocate to each priority level that can use it"}),
		noAccommodation: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_flowcontrol_request_dispatch_no_accommodation_total",
			Help: "Number of times a dispatch attempt resulted in a non accommodation due to lack of available seats"}, []string{"priority_level", "flow_schema"}),
		watchCount: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_flowcontrol_watch_count_samples",
			Help:    "count of watchers for mutating requests in API Priority and Fairness",
			Buckets: []float64{0, 1, 10, 100, 1000, 10000}}, []string{"priority_level", "flow_schema"}),
		epochAdvances: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_flowcontrol_epoch_advance_total",
			Help: "Number of times the queueset's progress meter jumped backward"}, []string{"priority_level", "success"}),
		currentR: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_current_r",
			Help: "R(time of last change)"}, []string{"priority_level"}),
		dispatchR: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_dispatch_r",
			Help: "R(time of last dispatch)"}, []string{"priority_level"}),
		latestS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_latest_s",
			Help: "S(most recently dispatched request)"}, []string{"priority_level"}),
		nextSBounds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_next_s_bounds",
			Help: "min and max, over queues, of S(oldest waiting request in queue)"}, []string{"priority_level", "bound"}),
		nextDiscountedSBounds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_flowcontrol_next_discounted_s_bounds",
			Help: "min and max, over queues, of S(oldest waiting request in queue) - estimated work in progress"}, []string{"priority_level", "bound"}),
	}
	for kind, ks := range map[string]*requestKindSeries{ReadOnly: &m.readOnly, Mutating: &m.mutating} {
		ks.waiting = m.readVsWrite.Series(Waiting, kind)
		ks.executing = m.readVsWrite.Series(Executing, kind)
	}
	return m
}

// requestKindSeries are read_vs_write_current_requests' series of one request kind.
type requestKindSeries struct {
	waiting, executing *RatioGauge
}

// kind is the series of requests of the verb (as authorization sees it, or a
// non-resource request's method in lower case): as upstream's, get, list and watch
// read, anything else mutates.
func (m *metrics) kind(verb string) *requestKindSeries {
	switch verb {
	case "get", "list", "watch":
		return &m.readOnly
	}
	return &m.mutating
}

// setServerCapacity sets read_vs_write_current_requests' denominators: the seats of
// all the levels, and what all their queues hold (at least 1).
func (m *metrics) setServerCapacity(seats, queued int) {
	for _, ks := range []*requestKindSeries{&m.readOnly, &m.mutating} {
		ks.executing.SetDenominator(float64(max(seats, 1)))
		ks.waiting.SetDenominator(float64(max(queued, 1)))
	}
}

// forLevel are the series of a level, made with it.
func (m *metrics) forLevel(level string) *levelSeries {
	return &levelSeries{
		demand:    m.demandSeats.with(level),
		seats:     m.seatUtilization.with(level),
		executing: m.requestUtilization.with("executing", level),
		waiting:   m.requestUtilization.with("waiting", level),
		currentR:  m.currentR.WithLabelValues(level),
		dispatch: onUse[*dispatchSeries]{make: func() *dispatchSeries {
			return &dispatchSeries{r: m.dispatchR.WithLabelValues(level), s: m.latestS.WithLabelValues(level),
				sMin: m.nextSBounds.WithLabelValues(level, "min"), sMax: m.nextSBounds.WithLabelValues(level, "max"),
				discountedMin: m.nextDiscountedSBounds.WithLabelValues(level, "min"),
				discountedMax: m.nextDiscountedSBounds.WithLabelValues(level, "max")}
		}},
		epochAdvanced: func(success bool) {
			m.epochAdvances.WithLabelValues(level, strconv.FormatBool(success)).Inc()
		},
	}
}

// dispatchSeries are a level's series of its last dispatch from a queue (levelSeries).
type dispatchSeries struct {
	r, s, sMin, sMax, discountedMin, discountedMax prometheus.Gauge
}

// noteDemand shows what a borrowing adjustment took of a level's demand, and the
// target it shared seats by.
func (m *metrics) noteDemand(level string, s demandStats, target float64) {
	m.demandHighWatermark.WithLabelValues(level).Set(float64(s.highWatermark))
	m.demandAverage.WithLabelValues(level).Set(s.avg)
	m.demandStdDev.WithLabelValues(level).Set(s.stdDev)
	m.demandSmoothed.WithLabelValues(level).Set(s.smoothed)
	m.targetSeats.WithLabelValues(level).Set(target)
}

// setBounds shows a level's configured seats: nominal, and the least and most it may
// run with lending and borrowing.
func (m *metrics) setBounds(level string, nominal, lower, upper int) {
	m.nominalLimit.WithLabelValues(level).Set(float64(nominal))
	m.lowerLimit.WithLabelValues(level).Set(float64(lower))
	m.upperLimit.WithLabelValues(level).Set(float64(upper))
}

// forSchema are the series of a schema of the level. An exempt level's requests never
// wait and, as upstream's, are left out of request_wait_duration_seconds; only a
// level with queues (queuing) shows request_queue_length_after_enqueue.
func (m *metrics) forSchema(schema, level string, exempt, queuing bool) *schemaMetrics {
	none := func(...string) prometheus.Observer { return noObserver{} }
	sm := &schemaMetrics{
		dispatched:      onFirstUse(m.dispatched.WithLabelValues, schema, level),
		executing:       onFirstUse(m.executing.WithLabelValues, schema, level),
		executingSeats:  onFirstUse(m.executingSeats.WithLabelValues, schema, level),
		inQueue:         onFirstUse(m.inQueue.WithLabelValues, schema, level),
		inQueueSeats:    onFirstUse(m.inQueueSeats.WithLabelValues, level, schema),
		waitedExecuted:  onFirstUse(none),
		waitedRejected:  onFirstUse(none),
		executedRegular: onFirstUse(m.executionSeconds.WithLabelValues, level, schema, "regular"),
		executedWatch:   onFirstUse(m.executionSeconds.WithLabelValues, level, schema, "watch"),
		queueLength:     onFirstUse(none),
		estimatedSeats:  onFirstUse(m.estimatedSeats.WithLabelValues, level, schema),
		noAccommodation: onFirstUse(m.noAccommodation.WithLabelValues, level, schema),
		watchCount:      onFirstUse(m.watchCount.WithLabelValues, level, schema),
		rejectedByReason: func(reason string) prometheus.Counter {
			return m.rejected.WithLabelValues(schema, level, reason)
		},
	}
	if !exempt {
		sm.waitedExecuted = onFirstUse(m.waitDuration.WithLabelValues, schema, level, "true")
		sm.waitedRejected = onFirstUse(m.waitDuration.WithLabelValues, schema, level, "false")
	}
	if queuing {
		sm.queueLength = onFirstUse(m.queueLength.WithLabelValues, level, schema)
	}
	return sm
}

// Collectors are the series to serve on the apiserver's /metrics.
func (c *Controller) Collectors() []prometheus.Collector {
	m := c.metrics
	return []prometheus.Collector{m.dispatched, m.rejected, m.executing, m.executingSeats, m.inQueue, m.inQueueSeats, m.waitDuration,
		m.executionSeconds, m.queueLength, m.estimatedSeats, m.nominalLimit,
		m.lowerLimit, m.upperLimit, m.currentLimit, m.demandHighWatermark, m.demandAverage, m.demandStdDev, m.demandSmoothed,
		m.targetSeats, m.fairFrac, m.demandSeats, m.seatUtilization, m.requestUtilization, m.readVsWrite.Collector(),
		m.noAccommodation, m.watchCount, m.epochAdvances, m.currentR, m.dispatchR, m.latestS, m.nextSBounds,
		m.nextDiscountedSBounds}
}

// noObserver observes nothing.
type noObserver struct{}

func (noObserver) Observe(float64) {}
