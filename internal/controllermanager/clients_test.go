package controllermanager

import (
	"net/http"
	"testing"
	"time"
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
