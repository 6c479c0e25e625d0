// Package metrics defines the scheduler's Prometheus metrics, named as upstream's, on a
// registry owned by one scheduler instance.
package metrics

import (
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Attempt results, as upstream's result label.
const (
	Scheduled     = "scheduled"
	Unschedulable = "unschedulable"
	Error         = "error"
)

// Metrics holds the scheduler's collectors.
type Metrics struct {
	registry           *prometheus.Registry
	scheduleAttempts   *prometheus.CounterVec
	attemptDuration    *prometheus.HistogramVec
	e2eDuration        *prometheus.HistogramVec
	preemptionAttempts prometheus.Counter
	preemptionVictims  prometheus.Histogram
}

// New registers the collectors; pending is read at scrape time for scheduler_pending_pods.
func New(pending func() map[string]int) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		scheduleAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "scheduler", Name: "schedule_attempts_total",
			Help: "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
		}, []string{"result", "profile"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "scheduling_attempt_duration_seconds",
			Help:    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", "profile"}),
		e2eDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "pod_scheduling_sli_duration_seconds",
			Help:    "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
		}, []string{"attempts"}),
		preemptionAttempts: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "scheduler", Name: "preemption_attempts_total", Help: "Total preemption attempts in the cluster till now",
		}),
		preemptionVictims: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "preemption_victims", Help: "Number of selected preemption victims",
			Buckets: prometheus.ExponentialBuckets(1, 2, 7),
		}),
	}
	m.registry.MustRegister(m.scheduleAttempts, m.attemptDuration, m.e2eDuration, m.preemptionAttempts, m.preemptionVictims,
		&pendingCollector{pending: pending, desc: prometheus.NewDesc("scheduler_pending_pods",
			"Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
			[]string{"queue"}, nil)},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Registry exposes the registry (for tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// ObserveAttempt records one scheduling attempt.
func (m *Metrics) ObserveAttempt(result, profile string, d time.Duration) {
	m.scheduleAttempts.WithLabelValues(result, profile).Inc()
	m.attemptDuration.WithLabelValues(result, profile).Observe(d.Seconds())
}

// ObserveScheduled records the end-to-end latency of a pod that was bound.
func (m *Metrics) ObserveScheduled(attempts int, since time.Duration) {
	label := "1"
	switch {
	case attempts >= 5:
		label = "5+"
	case attempts > 1:
		label = string(rune('0' + attempts))
	}
	m.e2eDuration.WithLabelValues(label).Observe(since.Seconds())
}

// ObservePreemption records a preemption attempt and its victims.
func (m *Metrics) ObservePreemption(victims int) {
	m.preemptionAttempts.Inc()
	m.preemptionVictims.Observe(float64(victims))
}

type pendingCollector struct {
	pending func() map[string]int
	desc    *prometheus.Desc
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.pending()
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, q := range names {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[q]), q)
	}
}
