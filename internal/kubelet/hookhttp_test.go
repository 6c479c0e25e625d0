package kubelet

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A lifecycle hook's HTTP GET fails only when it gets no answer, as upstream's: a 500
// is a hook that ran; a same-host redirect is followed; an HTTPS hook answered in plain
// HTTP is tried again over HTTP without the user's Authorization header.
func TestHookHTTPGet(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Clone(context.Background()))
		mu.Unlock()
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/broken", http.StatusFound)
			return
		}
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	c := &v1.Container{Name: "app"}
	get := func(scheme v1.URIScheme, path string) (string, error) {
		return hookHTTPGet(context.Background(), &v1.HTTPGetAction{Path: path, Port: intstr.FromInt(port), Scheme: scheme,
			HTTPHeaders: []v1.HTTPHeader{{Name: "Authorization", Value: "Bearer secret"}}}, c, u.Hostname())
	}
	requests := func() []*http.Request {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}

	if at, err := get(v1.URISchemeHTTP, "/broken"); err != nil || at != "" {
		t.Errorf("a hook answered 500: %q, %v; want success", at, err)
	}
	requests()
	if _, err := get(v1.URISchemeHTTP, "/moved"); err != nil {
		t.Errorf("a redirected hook: %v", err)
	}
	if rs := requests(); len(rs) != 2 || rs[1].URL.Path != "/broken" {
		t.Errorf("the same-host redirect was not followed: %d requests", len(rs))
	}
	at, err := get(v1.URISchemeHTTPS, "/broken")
	if err != nil || at != net.JoinHostPort(u.Hostname(), u.Port()) {
		t.Errorf("an HTTPS hook on an HTTP server: fell back at %q, %v; want %s", at, err, u.Host)
	}
	if rs := requests(); len(rs) != 1 {
		t.Errorf("the plain HTTP retry: %d requests, want one", len(rs))
	} else if auth := rs[0].Header.Get("Authorization"); auth != "" {
		t.Errorf("the plain HTTP retry carried Authorization %q", auth)
	}
	srv.Close()
	if _, err := get(v1.URISchemeHTTP, "/broken"); err == nil {
		t.Error("a hook that got no answer succeeded")
	}
}
