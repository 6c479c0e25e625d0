package flowcontrol

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"mizzen/internal/registry"
)

// BenchmarkExemptRequest is what the filter costs a request of the admin's (exempt,
// the first schema), the most common in the benchmarks.
func BenchmarkExemptRequest(b *testing.B) {
	c := upstreamDefaults(&testing.T{}, Options{})
	admin := registry.User{Name: "system:admin", Groups: []string{"system:masters", "system:authenticated"}}
	h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), func(_ *http.Request, req *Request) bool {
		*req = Request{User: admin, ResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "default"}
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
}

// BenchmarkNodeRequest: a kubelet's pod status write, matched by the sixth schema.
func BenchmarkNodeRequest(b *testing.B) {
	c := upstreamDefaults(&testing.T{}, Options{})
	node := registry.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), func(_ *http.Request, req *Request) bool {
		*req = Request{User: node, ResourceRequest: true, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default"}
		return true
	}, func(http.ResponseWriter, *http.Request, int) {})
	r := httptest.NewRequest("PUT", "/api/v1/namespaces/default/pods/p/status", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := httptest.NewRecorder()
		for pb.Next() {
			h.ServeHTTP(w, r)
		}
	})
}
