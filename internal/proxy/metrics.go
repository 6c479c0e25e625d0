package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// ProxyMode is what /proxyMode answers: the only mode this proxy has.
const ProxyMode = "nftables"

// ipFamily is the ip_family label of the metrics upstream splits by family: this proxy
// writes IPv4 rules only.
const ipFamily = "IPv4"

// triggerTimeAnnotation is where the EndpointSlice controller records when the change
// behind a slice's latest content happened (the pod or service change it follows).
const triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// metrics are the proxy's Prometheus metrics, under upstream kube-proxy's names, on a
// registry of their own, with the Go runtime and process collectors.
type metrics struct {
	registry *prometheus.Registry

	syncDuration       *prometheus.HistogramVec
	fullSyncDuration   *prometheus.HistogramVec
	networkProgramming *prometheus.HistogramVec
	lastSynced         *prometheus.GaugeVec
	lastQueued         *prometheus.GaugeVec
	syncFailures       *prometheus.CounterVec
	endpointChanges    prometheus.Counter
	serviceChanges     prometheus.Counter
	endpointPending    prometheus.Gauge
	servicePending     prometheus.Gauge
	healthzAnswers     *prometheus.CounterVec
	livezAnswers       *prometheus.CounterVec

	// started is when the proxy began: slices changed before it say nothing about how
	// long this proxy takes to program the network.
	started time.Time

	mu sync.Mutex
	// pendingServices and pendingEndpoints are the services with changes (to
	// themselves, to their slices) the next sync takes; triggers holds, per service,
	// the earliest change behind a slice change still to be written.
	pendingServices, pendingEndpoints map[string]bool
	triggers                          map[string]time.Time
}

func newMetrics(now time.Time) *metrics {
	family := []string{"ip_family"}
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	// Upstream's network programming buckets: 0.25s and 0.5s, every second to a
	// minute, every 5s to two minutes, every 30s to five.
	programmingBuckets := []float64{0, 0.25, 0.5}
	programmingBuckets = append(programmingBuckets, prometheus.LinearBuckets(1, 1, 59)...)
	programmingBuckets = append(programmingBuckets, prometheus.LinearBuckets(60, 5, 12)...)
	programmingBuckets = append(programmingBuckets, prometheus.LinearBuckets(120, 30, 7)...)
	const sub = "kubeproxy"
	m := &metrics{
		registry: prometheus.NewRegistry(),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: "sync_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets}, family),
		fullSyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: "sync_full_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets}, family),
		networkProgramming: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: "network_programming_duration_seconds",
			Help: "In Cluster Network Programming Latency in seconds", Buckets: programmingBuckets}, family),
		lastSynced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time proxy rules were successfully synced"}, family),
		lastQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "sync_proxy_rules_last_queued_timestamp_seconds",
			Help: "The last time a sync of proxy rules was queued"}, family),
		syncFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: "sync_proxy_rules_nftables_sync_failures_total",
			Help: "Cumulative proxy nftables sync failures"}, family),
		endpointChanges: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: sub, Name: "sync_proxy_rules_endpoint_changes_total",
			Help: "Cumulative proxy rules Endpoint changes"}),
		serviceChanges: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: sub, Name: "sync_proxy_rules_service_changes_total",
			Help: "Cumulative proxy rules Service changes"}),
		endpointPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: sub, Name: "sync_proxy_rules_endpoint_changes_pending",
			Help: "Pending proxy rules Endpoint changes"}),
		servicePending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: sub, Name: "sync_proxy_rules_service_changes_pending",
			Help: "Pending proxy rules Service changes"}),
		healthzAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: "proxy_healthz_total",
			Help: "Cumulative proxy healthz HTTP status"}, []string{"code"}),
		livezAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: "proxy_livez_total",
			Help: "Cumulative proxy livez HTTP status"}, []string{"code"}),
		started:          now,
		pendingServices:  map[string]bool{},
		pendingEndpoints: map[string]bool{},
		triggers:         map[string]time.Time{},
	}
	m.registry.MustRegister(m.syncDuration, m.fullSyncDuration, m.networkProgramming, m.lastSynced, m.lastQueued, m.syncFailures,
		m.endpointChanges, m.serviceChanges, m.endpointPending, m.servicePending, m.healthzAnswers, m.livezAnswers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// queued records that a sync was asked for at t.
func (m *metrics) queued(t time.Time) {
	m.lastQueued.WithLabelValues(ipFamily).Set(float64(t.UnixNano()) / 1e9)
}

// serviceChanged counts an added, updated or deleted Service.
func (m *metrics) serviceChanged(obj any) {
	svc, ok := untombstone(obj).(*v1.Service)
	if !ok {
		return
	}
	m.serviceChanges.Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pendingServices[svc.Namespace+"/"+svc.Name] = true
	m.servicePending.Set(float64(len(m.pendingServices)))
}

// endpointsChanged counts an added, updated or deleted EndpointSlice, and remembers
// when the change it carries began, for the network programming latency.
func (m *metrics) endpointsChanged(obj any) {
	slice, ok := untombstone(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	m.endpointChanges.Inc()
	key := slice.Namespace + "/" + slice.Labels[discoveryv1.LabelServiceName]
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pendingEndpoints[key] = true
	m.endpointPending.Set(float64(len(m.pendingEndpoints)))
	if t, err := time.Parse(time.RFC3339Nano, slice.Annotations[triggerTimeAnnotation]); err == nil && t.After(m.started) {
		if old, ok := m.triggers[key]; !ok || t.Before(old) {
			m.triggers[key] = t
		}
	}
}

func untombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// take empties the pending changes as a sync begins, and returns the trigger times of
// the slice changes it will write.
func (m *metrics) take() map[string]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.pendingServices)
	clear(m.pendingEndpoints)
	m.servicePending.Set(0)
	m.endpointPending.Set(0)
	triggers := m.triggers
	m.triggers = map[string]time.Time{}
	return triggers
}

// synced records a sync that began at start and ended at end: a success, which
// programmed the network for the changes triggered at triggers, or a failure, after
// which those changes wait for the next sync.
func (m *metrics) synced(start, end time.Time, triggers map[string]time.Time, err error) {
	d := end.Sub(start).Seconds()
	m.syncDuration.WithLabelValues(ipFamily).Observe(d)
	// Every write replaces the whole table: each sync is what upstream calls full.
	m.fullSyncDuration.WithLabelValues(ipFamily).Observe(d)
	if err != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		for key, t := range triggers {
			if old, ok := m.triggers[key]; !ok || t.Before(old) {
				m.triggers[key] = t
			}
		}
		return
	}
	m.lastSynced.WithLabelValues(ipFamily).Set(float64(end.UnixNano()) / 1e9)
	for _, t := range triggers {
		m.networkProgramming.WithLabelValues(ipFamily).Observe(max(end.Sub(t).Seconds(), 0))
	}
}

// counted counts the status codes a health handler answers under c.
func counted(c *prometheus.CounterVec, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		c.WithLabelValues(strconv.Itoa(rec.code)).Inc()
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// mux is the metrics server's: /metrics, /proxyMode, and /healthz and /livez
// answering that the process is up, as upstream's metrics port does.
func (m *metrics) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	text := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			_, _ = w.Write([]byte(body))
		}
	}
	mux.Handle("/proxyMode", text(ProxyMode))
	mux.Handle("/healthz", text("ok"))
	mux.Handle("/livez", text("ok"))
	return mux
}

// healthMux is the health server's: /healthz and /livez from h, counted.
func (m *metrics) healthMux(h *health) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", counted(m.healthzAnswers, h))
	mux.Handle("/livez", counted(m.livezAnswers, h))
	return mux
}

// serveHTTP serves plain HTTP on addr until ctx ends; a port it cannot bind is logged,
// not fatal, so the rules still get written.
func serveHTTP(ctx context.Context, what, addr string, h http.Handler, log *slog.Logger) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("serving the proxy's "+what, "address", addr, "err", err)
		return
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("serving "+what, "address", l.Addr().String())
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serving the proxy's "+what, "err", err)
	}
}

// metricsAddress is where --metrics-bind-address serves: empty, or a port of 0, serves
// nothing, as upstream's "0" or "" disables it.
func metricsAddress(flag string) string {
	if flag == "" || flag == "0" {
		return ""
	}
	if _, port, err := net.SplitHostPort(flag); err == nil && port == "0" {
		return ""
	}
	return flag
}
