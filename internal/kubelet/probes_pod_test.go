package kubelet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/cri/fake"
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

// upstream's e2e 'should not be ready with an exec readiness probe timeout': an exec
// probe still running at timeoutSeconds fails (ExecProbeTimeout).
func TestExecReadinessProbeTimeoutFails(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{ExecHangs: true})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/bin/sh", "-c", "sleep 10"}}},
		TimeoutSeconds:   1,
		PeriodSeconds:    10,
		FailureThreshold: 1,
	}
	h.createPod(pod)
	msg := h.waitEvent("p", "Unhealthy")
	if want := `Readiness probe failed: command timed out: "/bin/sh -c sleep 10" timed out after 1s`; msg != want {
		t.Errorf("Unhealthy event %q, want %q", msg, want)
	}
	p := h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if conditionTrue(p, v1.PodReady) || containerStatus(p, "app").Ready {
		t.Errorf("pod is ready although its readiness probe times out: %+v", p.Status.Conditions)
	}
}

// upstream's e2e 'should mark readiness on pods to false and disable liveness probes
// while pod is in progress of terminating': once the pod is being deleted its readiness
// probe keeps running and a failure shows as Ready False while the container still
// runs (its preStop hook sleeps), but its liveness probe no longer runs: its failure
// does not restart the container.
func TestTerminatingPodReadinessAndLiveness(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("p", "app", "drain")
	app := &pod.Spec.Containers[0]
	app.ReadinessProbe = &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
		PeriodSeconds:    2,
		FailureThreshold: 1,
	}
	app.LivenessProbe = &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/liveness"}}},
		PeriodSeconds:    1,
		FailureThreshold: 1,
	}
	app.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 20}}}
	// drain's preStop exec tells the test the termination has begun.
	pod.Spec.Containers[1].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	h.createPod(pod)
	p := h.waitPod("p", "Running and Ready", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && conditionTrue(p, v1.PodReady)
	})

	// The clock stands still from here until the termination has begun, so no probe runs meanwhile.
	execs := h.rt.Calls("ExecSync")
	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp = &now
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReal("drain's preStop hook", func() bool { return h.rt.Calls("ExecSync") > execs })
	// What the e2e's container does on SIGTERM: both probes fail from now on.
	h.rt.SetContainerBehavior("app", fake.Behavior{ExecExitCode: 1})

	h.waitPod("p", "Ready False while app still runs", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return !conditionTrue(p, v1.PodReady) && cs != nil && cs.State.Running != nil && !cs.Ready
	})
	h.eventually("pod object removed", func() bool {
		_, err := h.getPod("p")
		return isNotFound(err)
	})
	evs, err := h.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "failed liveness probe") || strings.HasPrefix(e.Message, "Liveness probe failed") {
			t.Errorf("liveness probe ran while the pod terminated: %s %q", e.Reason, e.Message)
		}
	}
	if n := h.rt.Calls("StartContainer"); n != 2 {
		t.Errorf("%d container starts, want 2 (no restart)", n)
	}
}

// An exec probe whose command fails reports what the command printed, as upstream's
// prober does ("Readiness probe failed: <output>"), not the runtime's error.
func TestExecProbeFailureReportsOutput(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{ExecExitCode: 1, ExecStdout: "cat: /tmp/ready: No such file or directory\n"})
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
		TimeoutSeconds:   1,
		PeriodSeconds:    10,
		FailureThreshold: 1,
	}
	h.createPod(pod)
	if msg, want := h.waitEvent("p", "Unhealthy"), "Readiness probe failed: cat: /tmp/ready: No such file or directory\n"; msg != want {
		t.Errorf("Unhealthy event %q, want %q", msg, want)
	}
}

// Once a container's startup probe passes, its readiness probe runs at once rather than
// at its next period, so the pod is Ready as soon as it can be (upstream's e2e 'should be
// ready immediately after startupProbe succeeds').
func TestReadinessProbedAsSoonAsStarted(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("p", "app")
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"started"}}},
		InitialDelaySeconds: 5, TimeoutSeconds: 1, PeriodSeconds: 5, FailureThreshold: 10}
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"ready"}}},
		TimeoutSeconds: 1, PeriodSeconds: 30, FailureThreshold: 1}
	h.createPod(pod)
	h.waitPodReal("p", "running", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Running != nil
	})
	h.clock.Step(6 * time.Second) // the startup probe's initial delay
	h.waitPodReal("p", "Ready before the readiness probe's period", func(p *v1.Pod) bool { return conditionTrue(p, v1.PodReady) })
}

// A container killed for a failed liveness probe gets the probe's
// terminationGracePeriodSeconds, not the pod's (upstream's e2e 'should override
// timeoutGracePeriodSeconds when LivenessProbe field is set'): 5 s, not 500.
func TestProbeKillUsesTheProbesGracePeriod(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("app", fake.Behavior{ExecExitCode: 1})
	rt := &recordingRuntime{RuntimeService: h.rt.Client(), configs: map[string]*runtimeapi.ContainerConfig{}}
	opts := h.options()
	opts.Runtime = rt
	h.startWith(opts)
	pod := newPod("p", "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](500)
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
		TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: 1, TerminationGracePeriodSeconds: ptr.To[int64](5)}
	h.createPod(pod)
	h.waitEvent("p", "Killing")
	h.eventually("the container stopped", func() bool { return len(rt.stopTimeouts()) > 0 })
	if got := rt.stopTimeouts()[0]; got != 5 {
		t.Errorf("the probe's kill stopped the container with a %d s grace period, want 5", got)
	}
}
