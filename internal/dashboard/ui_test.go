package dashboard

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recordingTransport stands in for the apiserver's in-process transport: it records
// the paths asked for and answers as the apiserver would for a user RBAC refuses.
type recordingTransport struct {
	mu    sync.Mutex
	paths []string
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.paths = append(rt.paths, r.URL.Path)
	rt.mu.Unlock()
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden for this user","reason":"Forbidden","code":403}`
	return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestNewUI checks the dashboard as the apiserver mounts it at /ui/: its pages and
// assets under /ui/, and its helpers reaching the API only through the transport the
// apiserver passes (the request's user), relaying that user's refusals.
func TestNewUI(t *testing.T) {
	serve, err := NewUI(10256, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rt := &recordingTransport{}
	get := func(path string, asUser http.RoundTripper) (*http.Response, string) {
		w := httptest.NewRecorder()
		serve(w, httptest.NewRequest("GET", path, nil), asUser)
		return w.Result(), w.Body.String()
	}
	resp, body := get("/ui/", rt)
	if resp.StatusCode != 200 || !strings.Contains(body, `src="static/app.js"`) || resp.Header.Get("X-Frame-Options") != "DENY" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("GET /ui/: %d %v", resp.StatusCode, resp.Header)
	}
	for _, p := range []string{"/ui/static/app.js", "/ui/static/vendor/xterm/xterm.js"} {
		if resp, body := get(p, rt); resp.StatusCode != 200 || body == "" {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
	if resp, body := get("/ui/settings", rt); resp.StatusCode != 200 || !strings.Contains(body, `"proxyHealthzPort":10256`) {
		t.Errorf("GET /ui/settings: %d %s", resp.StatusCode, body)
	}
	if resp, body := get("/ui/proxyhealth/n1", rt); resp.StatusCode != 200 || !strings.Contains(body, "forbidden for this user") || !strings.Contains(body, `"reachable":false`) {
		t.Errorf("GET /ui/proxyhealth/n1: %d %s", resp.StatusCode, body)
	}
	if resp, body := get("/ui/journey/pods/default/p", rt); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "forbidden for this user") {
		t.Errorf("GET /ui/journey/pods/default/p: %d %s, want the user's 403", resp.StatusCode, body)
	}
	want := []string{"/api/v1/nodes/n1:10256/proxy/healthz", "/api/v1/namespaces/default/pods/p"}
	if strings.Join(rt.paths, " ") != strings.Join(want, " ") {
		t.Errorf("asked the apiserver for %v, want %v", rt.paths, want)
	}
	// Without the apiserver's transport there is no user to act as.
	if resp, _ := get("/ui/journey/pods/default/p", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a transport: %d, want 401", resp.StatusCode)
	}
	// The login and the proxy of the dashboard's own port are not there.
	for _, p := range []string{"/ui/login", "/ui/k8s/api/v1/pods"} {
		if resp, _ := get(p, rt); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
}
