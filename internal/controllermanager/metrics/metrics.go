// Package metrics holds the controller-manager's Prometheus registry: client-go work
// queue metrics per controller queue and the leader-election status, under the names
// upstream's kube-controller-manager exposes, plus the Go runtime and process
// collectors.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/util/workqueue"
)

// Metrics is one controller-manager's registry. It is a workqueue.MetricsProvider:
// every queue made while it is the provider reports under its queue name.
type Metrics struct {
	registry *prometheus.Registry

	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
	leader         *prometheus.GaugeVec
}

var _ workqueue.MetricsProvider = (*Metrics)(nil)

// New registers every collector on a fresh registry.
func New() *Metrics {
	// Upstream's buckets: 1ns to 1000s, a decade apart.
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	queue := []string{"name"}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of workqueue"}, queue),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by workqueue"}, queue),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "How long in seconds an item stays in workqueue before being requested.", Buckets: buckets}, queue),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "How long in seconds processing an item from workqueue takes.", Buckets: buckets}, queue),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work in progress has not yet been observed by work_duration; large values mean stuck workers."}, queue),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds the longest running worker of the queue has been running."}, queue),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of retries handled by workqueue"}, queue),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "leader_election_master_status",
			Help: "1 while this replica holds the named lease, 0 while it stands by."}, []string{"name"}),
	}
	m.registry.MustRegister(m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries, m.leader,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// SetLeader records whether this replica holds the lease called name.
func (m *Metrics) SetLeader(name string, leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.WithLabelValues(name).Set(v)
}

func (m *Metrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}

func (m *Metrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}

func (m *Metrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}

func (m *Metrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}

func (m *Metrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

func (m *Metrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunning.WithLabelValues(name)
}

func (m *Metrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
