// Package requestmetrics is the apiserver's /metrics: the latency and count of every
// resource request under upstream kube-apiserver's names and labels
// (apiserver_request_duration_seconds, apiserver_request_total), and the latency
// upstream's scalability SLOs (API call latency per resource, verb and scope) are
// measured from, apiserver_request_sli_duration_seconds: the same without the time
// spent waiting for a priority level's seat or for admission webhooks. Plus the Go
// runtime and process collectors, and what other parts of the server register.
package requestmetrics

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Buckets are upstream's for apiserver_request_duration_seconds (5 ms to 60 s), so
// that the SLO thresholds (1 s, 5 s, 30 s) are bucket bounds on both servers.
var Buckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// SLIBuckets are upstream's for apiserver_request_sli_duration_seconds.
var SLIBuckets = []float64{0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// Request is what the metrics say of one request, as the apiserver parsed its path.
type Request struct {
	// Verb is the request info's verb: get, list, watch, create, update, patch,
	// delete, deletecollection, or a connect subresource's method.
	Verb                                        string
	Group, Version, Resource, Subresource, Name string
	Namespace                                   string
	// Apply is a PATCH of type application/apply-patch+yaml (server-side apply).
	Apply  bool
	DryRun bool
}

// connectSubresources are served as upstream's CONNECT verb (streams, proxies).
var connectSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true, "proxy": true}

// ReportedVerb is the verb label upstream gives a request: the HTTP method, with
// LIST, WATCH, APPLY, DELETECOLLECTION and CONNECT told apart.
func (r Request) ReportedVerb() string {
	if connectSubresources[r.Subresource] {
		return "CONNECT"
	}
	switch r.Verb {
	case "get":
		return "GET"
	case "list":
		return "LIST"
	case "watch":
		return "WATCH"
	case "create":
		return "POST"
	case "update":
		return "PUT"
	case "patch":
		if r.Apply {
			return "APPLY"
		}
		return "PATCH"
	case "delete":
		return "DELETE"
	case "deletecollection":
		return "DELETECOLLECTION"
	}
	return strings.ToUpper(r.Verb)
}

// Scope is upstream's scope label: "resource" for a request naming one object (a
// create counts as one), "namespace" for a collection in a namespace, "cluster" for
// one across the cluster.
func (r Request) Scope() string {
	switch {
	case r.Name != "" || r.Verb == "create":
		return "resource"
	case r.Namespace != "":
		return "namespace"
	}
	return "cluster"
}

// Metrics is one apiserver's registry.
type Metrics struct {
	registry *prometheus.Registry
	duration *prometheus.HistogramVec
	sli      *prometheus.HistogramVec
	total    *prometheus.CounterVec
}

// New registers every collector on a fresh registry.
func New() *Metrics {
	labels := []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: Buckets}, labels),
		sli: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_request_sli_duration_seconds",
			Help:    "Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
			Buckets: SLIBuckets}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code."},
			[]string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}),
	}
	m.registry.MustRegister(m.duration, m.sli, m.total,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register adds collectors to the registry served.
func (m *Metrics) Register(cs ...prometheus.Collector) {
	m.registry.MustRegister(cs...)
}

// Observe records one finished request that answered code after d, of which excluded
// (waits for a seat, webhooks) does not count toward the SLI latency.
func (m *Metrics) Observe(r Request, code int, d, excluded time.Duration) {
	dryRun := ""
	if r.DryRun {
		dryRun = "All"
	}
	verb, scope := r.ReportedVerb(), r.Scope()
	m.duration.WithLabelValues(verb, dryRun, r.Group, r.Version, r.Resource, r.Subresource, scope, "apiserver").Observe(d.Seconds())
	if !r.DryRun {
		m.sli.WithLabelValues(verb, r.Group, r.Version, r.Resource, r.Subresource, scope, "apiserver").Observe((d - excluded).Seconds())
	}
	m.total.WithLabelValues(verb, dryRun, r.Group, r.Version, r.Resource, r.Subresource, scope, "apiserver", strconv.Itoa(code)).Inc()
}

// excludedKey holds the request's *codeWriter, whose excluded is the nanoseconds that
// do not count toward its SLI latency.
type excludedKey struct{}

// ExcludeFromSLI adds d to what the request's SLI latency leaves out (a wait for a
// seat, a webhook's call). Safe from several goroutines (webhooks called in parallel);
// a no-op for a request the metrics do not record.
func ExcludeFromSLI(ctx context.Context, d time.Duration) {
	if cw, ok := ctx.Value(excludedKey{}).(*codeWriter); ok {
		cw.excluded.Add(int64(d))
	}
}

// Handler serves the registry in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Instrument runs next and records the request describe returns for it (nil: not a
// resource request, not recorded).
func (m *Metrics) Instrument(next http.Handler, describe func(*http.Request) *Request) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := describe(r)
		if req == nil {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		cw := &codeWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), excludedKey{}, cw)))
		code := cw.code
		if code == 0 {
			code = http.StatusOK // nothing written: net/http answers 200
		}
		m.Observe(*req, code, time.Since(start), time.Duration(cw.excluded.Load()))
	})
}

// codeWriter remembers the status code written, and passes on flushing (watches) and
// hijacking (exec, attach, port-forward upgrades) to the writer it wraps.
type codeWriter struct {
	http.ResponseWriter
	code int
	// excluded is what ExcludeFromSLI added, in nanoseconds.
	excluded atomic.Int64
}

func (w *codeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *codeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *codeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response writer does not support hijacking")
	}
	if w.code == 0 {
		w.code = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
