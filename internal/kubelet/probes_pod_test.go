package kubelet

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// redirectServer serves /redirect?loc=L (a 302 to L) and /healthz (always 500), as
// agnhost's liveness server does once it has run a while, and records the headers of
// the requests it gets.
type redirectServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func newRedirectServer(t *testing.T) *redirectServer {
	s := &redirectServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("loc"), http.StatusFound)
		default:
			http.Error(w, "unhealthy", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *redirectServer) port() int32 {
	u, _ := url.Parse(s.URL)
	p, _ := strconv.Atoi(u.Port())
	return int32(p)
}

func (s *redirectServer) firstHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.headers) == 0 {
		return nil
	}
	return s.headers[0]
}

func redirectLivenessPod(srv *redirectServer, loc string) *v1.Pod {
	pod := newPod("p", "app")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: "127.0.0.1", Port: intstr.FromInt32(srv.port()), Path: "/redirect?loc=" + url.QueryEscape(loc)}},
		InitialDelaySeconds: 15,
		PeriodSeconds:       10,
		FailureThreshold:    1,
	}
	return pod
}

// upstream's e2e 'should be restarted with a local redirect http liveness probe': a
// redirect to the same host is followed, and the failing target restarts the container.
func TestLivenessHTTPProbeFollowsLocalRedirect(t *testing.T) {
	srv := newRedirectServer(t)
	h := newHarness(t)
	h.start()
	h.createPod(redirectLivenessPod(srv, "/healthz"))
	h.waitPod("p", "a restart after the redirected probe failed", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.RestartCount >= 1
	})
	if msg := h.waitEvent("p", "Unhealthy"); msg != "Liveness probe failed: HTTP probe failed with statuscode: 500" {
		t.Errorf("Unhealthy event %q", msg)
	}
	if msg := h.waitEvent("p", "Killing"); msg != "Container app failed liveness probe, will be restarted" {
		t.Errorf("Killing event %q", msg)
	}
	hd := srv.firstHeader()
	if ua, accept := hd.Get("User-Agent"), hd.Get("Accept"); ua != "kube-probe/1.37" || accept != "*/*" {
		t.Errorf("probe sent User-Agent %q Accept %q, want kube-probe/1.37 and */*", ua, accept)
	}
	if enc := hd.Get("Accept-Encoding"); enc != "" {
		t.Errorf("probe sent Accept-Encoding %q, want none", enc)
	}
}

// upstream's e2e 'should *not* be restarted with a non-local redirect http liveness
// probe': a redirect to another host is not followed; it counts as success and is
// reported as a ProbeWarning event carrying the response body.
func TestLivenessHTTPProbeNonLocalRedirectWarns(t *testing.T) {
	srv := newRedirectServer(t)
	h := newHarness(t)
	h.start()
	h.createPod(redirectLivenessPod(srv, "http://0.0.0.0/"))
	msg := h.waitEvent("p", "ProbeWarning")
	if want := `Liveness probe warning: Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`; !strings.HasPrefix(msg, want) {
		t.Errorf("ProbeWarning event %q, want it to start with %q", msg, want)
	}
	// Several more periods: still no restart.
	for range 60 {
		h.clock.Step(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	p, err := h.getPod("p")
	if err != nil {
		t.Fatal(err)
	}
	if cs := containerStatus(p, "app"); cs == nil || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("container status %+v, want running without restarts", cs)
	}
}
