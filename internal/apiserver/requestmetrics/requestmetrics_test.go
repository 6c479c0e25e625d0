package requestmetrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		req         Request
		verb, scope string
	}{
		{Request{Verb: "get", Resource: "pods", Namespace: "ns", Name: "p"}, "GET", "resource"},
		{Request{Verb: "list", Resource: "pods", Namespace: "ns"}, "LIST", "namespace"},
		{Request{Verb: "list", Resource: "pods"}, "LIST", "cluster"},
		{Request{Verb: "watch", Resource: "nodes"}, "WATCH", "cluster"},
		// A create names no object in its path, and still counts as one object's call.
		{Request{Verb: "create", Resource: "pods", Namespace: "ns"}, "POST", "resource"},
		{Request{Verb: "create", Resource: "pods", Namespace: "ns", Name: "p", Subresource: "binding"}, "POST", "resource"},
		{Request{Verb: "update", Resource: "pods", Namespace: "ns", Name: "p", Subresource: "status"}, "PUT", "resource"},
		{Request{Verb: "patch", Resource: "nodes", Name: "n"}, "PATCH", "resource"},
		{Request{Verb: "patch", Resource: "nodes", Name: "n", Apply: true}, "APPLY", "resource"},
		{Request{Verb: "delete", Resource: "pods", Namespace: "ns", Name: "p"}, "DELETE", "resource"},
		{Request{Verb: "deletecollection", Resource: "pods", Namespace: "ns"}, "DELETECOLLECTION", "namespace"},
		{Request{Verb: "create", Resource: "pods", Namespace: "ns", Name: "p", Subresource: "exec"}, "CONNECT", "resource"},
	} {
		if got := tc.req.ReportedVerb(); got != tc.verb {
			t.Errorf("%+v: verb %q, want %q", tc.req, got, tc.verb)
		}
		if got := tc.req.Scope(); got != tc.scope {
			t.Errorf("%+v: scope %q, want %q", tc.req, got, tc.scope)
		}
	}
}

// TestInstrument serves requests through Instrument and reads them back from /metrics
// as a scraper would: the histogram and the counter with the code each answered.
func TestInstrument(t *testing.T) {
	m := New()
	h := m.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
		case http.MethodGet:
			_, _ = w.Write([]byte("{}")) // no WriteHeader: 200
		}
	}), func(r *http.Request) *Request {
		switch r.Method {
		case http.MethodPost:
			return &Request{Verb: "create", Version: "v1", Resource: "pods", Namespace: "default"}
		case http.MethodGet:
			return &Request{Verb: "list", Group: "apps", Version: "v1", Resource: "deployments"}
		}
		return nil // not a resource request: not recorded
	})
	for _, method := range []string{http.MethodPost, http.MethodPost, http.MethodGet, http.MethodPut} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, "/x", nil))
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2`,
		`apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="60"} 2`,
		`apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2`,
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="cluster",subresource="",verb="LIST",version="v1"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, `verb="PUT"`) {
		t.Errorf("a request describe returned nil for was recorded:\n%s", text)
	}
}

// The SLI histogram leaves out what the request spent waiting on others (a seat, a
// webhook); the duration histogram keeps it.
func TestSLILeavesOutWaits(t *testing.T) {
	m := New()
	h := m.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		ExcludeFromSLI(r.Context(), 250*time.Millisecond)
	}), func(*http.Request) *Request {
		return &Request{Verb: "update", Version: "v1", Resource: "pods", Subresource: "status", Namespace: "ns", Name: "p"}
	})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/x", nil))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	// Over 0.2 s in all, under 0.1 s without the wait.
	for _, want := range []string{
		`apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PUT",version="v1",le="0.2"} 0`,
		`apiserver_request_sli_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="status",verb="PUT",version="v1",le="0.1"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
