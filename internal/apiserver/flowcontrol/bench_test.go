package flowcontrol

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"mizzen/internal/registry"
)

// BenchmarkClassifiedRequest is what the filter costs a request: the admin's (exempt,
// the first schema; most of the benchmarks' requests) and a kubelet's pod status
// write (the sixth schema).
func BenchmarkClassifiedRequest(b *testing.B) {
	c := upstreamDefaults(&testing.T{}, Options{})
	for _, bc := range []struct {
		name string
		req  Request
	}{
		{"exempt", Request{User: registry.User{Name: "system:admin", Groups: []string{"system:masters", "system:authenticated"}},
			ResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "default"}},
		{"node", Request{User: registry.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}},
			ResourceRequest: true, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), func(_ *http.Request, req *Request) bool {
				*req = bc.req
				return true
			}, func(http.ResponseWriter, *http.Request, int) {})
			r := httptest.NewRequest("GET", "/api/v1/namespaces/default/pods/p", nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := httptest.NewRecorder()
				for pb.Next() {
					h.ServeHTTP(w, r)
				}
			})
		})
	}
}

// BenchmarkRatioGaugeAdd is one change of a read-vs-write series, as each request
// makes two: from goroutines in parallel, with the clock the server gives it.
func BenchmarkRatioGaugeAdd(b *testing.B) {
	v := newTimedRatioVec(time.Now, "ratio", "a ratio", []float64{0.5, 1}, nil, "l")
	g := newRatioGauge(v.with("x"), time.Now)
	g.SetDenominator(600)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g.Add(1)
			g.Add(-1)
		}
	})
}
