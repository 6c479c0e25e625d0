package controllermanager

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"mizzen/internal/ticklimit"
)

type recordingTransport struct{ got *http.Request }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// The token goes on a copy of the request: the caller's request and its headers are
// left as they were, as a RoundTripper must.
func TestBearerTransportSetsTokenOnACopy(t *testing.T) {
	src := &accountToken{name: "deployment-controller", token: "t0", header: []string{"Bearer t0"}, refreshAt: time.Now().Add(time.Hour)}
	next := &recordingTransport{}
	rt := &bearerTransport{src: src, next: next}
	req, _ := http.NewRequest(http.MethodGet, "https://apiserver/api/v1/pods", nil)
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
	req.Header.Set("Authorization", "Bearer stale")
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if next.got == req {
		t.Fatal("the request itself was sent on, not a copy")
	}
	if got := next.got.Header.Get("Authorization"); got != "Bearer t0" {
		t.Errorf("sent Authorization %q, want %q", got, "Bearer t0")
	}
	if got := next.got.Header.Get("Accept"); got != "application/vnd.kubernetes.protobuf" {
		t.Errorf("sent Accept %q, want the caller's", got)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer stale" {
		t.Errorf("the caller's Authorization became %q", got)
	}
	if next.got.URL.String() != req.URL.String() || next.got.Context() != req.Context() {
		t.Errorf("the copy's URL or context differ from the request's")
	}
}

// A 401 drops the token it was sent with, so that the next request asks for a new one.
func TestBearerTransportDropsARefusedToken(t *testing.T) {
	src := &accountToken{name: "x", token: "t0", header: []string{"Bearer t0"}, refreshAt: time.Now().Add(time.Hour)}
	rt := &bearerTransport{src: src, next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusUnauthorized, Body: http.NoBody, Request: req}, nil
	})}
	req, _ := http.NewRequest(http.MethodGet, "https://apiserver/api", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if src.token != "" {
		t.Errorf("token %q kept after a 401", src.token)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Each controller's config gets a limiter of its own, of the manager's qps and burst,
// that releases held-back requests on a tick (package ticklimit): one limiter shared
// by every controller would pace them all as one client.
func TestEachControllerGetsItsOwnTickLimiter(t *testing.T) {
	b := &clientBuilder{root: &rest.Config{Host: "https://apiserver", QPS: 1000, Burst: 2000}}
	var limiters []flowcontrol.RateLimiter
	for _, name := range []string{"replicaset-controller", "deployment-controller"} {
		cfg, err := b.config(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := cfg.RateLimiter.(*ticklimit.Limiter)
		if !ok {
			t.Fatalf("%s's rate limiter is %T, want a *ticklimit.Limiter", name, cfg.RateLimiter)
		}
		if l.QPS() != 1000 {
			t.Errorf("%s's limiter allows %v qps, want the manager's 1000", name, l.QPS())
		}
		limiters = append(limiters, l)
	}
	if limiters[0] == limiters[1] {
		t.Error("two controllers share one limiter")
	}
	if b.root.RateLimiter != nil {
		t.Error("the manager's own config was given a limiter")
	}
}
