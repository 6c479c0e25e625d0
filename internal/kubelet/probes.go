package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	mizzenversion "mizzen/internal/version"
)

type probeType int

const (
	liveness probeType = iota
	readiness
	startup
)

func (t probeType) String() string {
	return [...]string{"Liveness", "Readiness", "Startup"}[t]
}

type probeKey struct {
	container string
	typ       probeType
}

// probeWorker probes one container instance periodically until stopped.
type probeWorker struct {
	containerID string
	cancel      context.CancelFunc
	// now asks the worker to probe at once rather than at its next period.
	now chan struct{}
}

func (p *probeWorker) stop() { p.cancel() }

// syncProbes starts probe workers for running containers that have probes and stops
// workers whose container instance is gone.
func (kl *Kubelet) syncProbes(w *podWorker, pod *v1.Pod, rt *podRuntime) {
	st := w.state
	st.mu.Lock()
	defer st.mu.Unlock()
	want := map[probeKey]string{}
	live := map[string]bool{}
	for _, c := range probedContainers(pod) {
		cur := rt.latest(c.Name)
		if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		live[cur.Id] = true
		if _, ok := st.results[cur.Id]; !ok {
			put(&st.results, cur.Id, &containerProbeResults{ready: c.ReadinessProbe == nil, started: c.StartupProbe == nil})
		}
		for typ, probe := range map[probeType]*v1.Probe{liveness: c.LivenessProbe, readiness: c.ReadinessProbe, startup: c.StartupProbe} {
			if probe != nil {
				want[probeKey{c.Name, typ}] = cur.Id
			}
		}
	}
	for k, p := range st.probes {
		if want[k] != p.containerID {
			p.stop()
			delete(st.probes, k)
		}
	}
	for id := range st.results {
		if !live[id] {
			delete(st.results, id)
		}
	}
	for k, id := range want {
		if _, ok := st.probes[k]; ok {
			continue
		}
		c := containerSpec(pod, k.container)
		cur := rt.latest(k.container)
		ctx, cancel := context.WithCancel(w.ctx())
		pw := &probeWorker{containerID: id, cancel: cancel, now: make(chan struct{}, 1)}
		put(&st.probes, k, pw)
		go kl.runProbeWorker(ctx, w, pod.DeepCopy(), c.DeepCopy(), k.typ, id, time.Unix(0, cur.StartedAt), kl.podIPs(pod, rt.readySandbox()), pw.now)
	}
}

// probedContainers are the containers whose probes run: the main ones and the sidecars.
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if isSidecar(pod, &pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func probeOf(c *v1.Container, typ probeType) *v1.Probe {
	switch typ {
	case liveness:
		return c.LivenessProbe
	case readiness:
		return c.ReadinessProbe
	default:
		return c.StartupProbe
	}
}

// runProbeWorker probes every periodSeconds after initialDelaySeconds, applying the
// success and failure thresholds, and reports changes to the pod worker; a signal on
// now probes at once.
func (kl *Kubelet) runProbeWorker(ctx context.Context, w *podWorker, pod *v1.Pod, c *v1.Container, typ probeType, containerID string, started time.Time, podIPs []string, now <-chan struct{}) {
	probe := probeOf(c, typ)
	period := time.Duration(max(probe.PeriodSeconds, 1)) * time.Second
	successThreshold := max(probe.SuccessThreshold, 1)
	failureThreshold := max(probe.FailureThreshold, 1)
	if delay := started.Add(time.Duration(probe.InitialDelaySeconds) * time.Second).Sub(kl.clock.Now()); delay > 0 {
		select {
		case <-ctx.Done():
			return
		case <-kl.clock.After(delay):
		}
	}
	var successes, failures int32
	ticker := kl.clock.NewTicker(period)
	defer ticker.Stop()
	for {
		// Liveness and readiness wait for the startup probe to pass.
		if typ == startup || kl.startedOK(w, containerID) {
			warning, err := kl.runProbe(ctx, pod, c, probe, containerID, podIPs)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				successes, failures = successes+1, 0
				if warning != "" {
					kl.recorder.Eventf(containerRef(pod, c.Name), v1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", typ, warning)
				}
			} else {
				successes, failures = 0, failures+1
				kl.recorder.Eventf(containerRef(pod, c.Name), v1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", typ, err)
			}
			switch {
			case successes >= successThreshold:
				kl.setProbeResult(w, typ, containerID, true)
				if typ == startup {
					return // a passed startup probe is never run again
				}
			case failures >= failureThreshold:
				kl.setProbeResult(w, typ, containerID, false)
				if typ != readiness {
					grace := gracePeriod(pod)
					if probe.TerminationGracePeriodSeconds != nil {
						grace = *probe.TerminationGracePeriodSeconds
					}
					w.state.requestKill(containerID, killRequest{
						reason: fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, strings.ToLower(typ.String())),
						grace:  grace,
					})
					kl.workers.poke(w.uid)
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-now:
		}
	}
}

func (kl *Kubelet) startedOK(w *podWorker, containerID string) bool {
	r, ok := w.state.probeResults(containerID)
	return ok && r.started
}

// setProbeResult records a result and pokes the pod worker when it changed the status.
func (kl *Kubelet) setProbeResult(w *podWorker, typ probeType, containerID string, ok bool) {
	st := w.state
	st.mu.Lock()
	r, exists := st.results[containerID]
	changed := false
	if exists {
		switch typ {
		case readiness:
			changed, r.ready = r.ready != ok, ok
		case startup:
			changed, r.started = r.started != ok, ok
		}
	}
	if changed && typ == startup && ok {
		// Started: its readiness probe runs now, not at its next period, so that it is
		// ready as soon as it says so, as upstream's prober triggers it.
		for k, p := range st.probes {
			if k.typ == readiness && p.containerID == containerID {
				select {
				case p.now <- struct{}{}:
				default:
				}
			}
		}
	}
	st.mu.Unlock()
	if !changed {
		return
	}
	if typ == readiness {
		select {
		case st.readinessChanged <- struct{}{}:
		default:
		}
	}
	kl.workers.poke(w.uid)
}

// runProbe runs one probe; nil means success, with a warning to report if not "".
func (kl *Kubelet) runProbe(ctx context.Context, pod *v1.Pod, c *v1.Container, p *v1.Probe, containerID string, podIPs []string) (warning string, err error) {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := ""
	if len(podIPs) > 0 {
		host = podIPs[0]
	}
	switch {
	case p.Exec != nil:
		// A command still running at the timeout fails, as upstream's ExecProbeTimeout.
		stdout, stderr, err := kl.runtime.ExecSync(ctx, containerID, p.Exec.Command, timeout)
		if exit := utilexec.ExitError(nil); errors.As(err, &exit) {
			// A command that ran and failed: what it printed is the failure, as
			// upstream reports it ("Liveness probe failed: <output>").
			out := append(stdout, stderr...)
			return "", errors.New(string(out[:min(len(out), maxProbeBody)]))
		}
		return "", err
	case p.HTTPGet != nil:
		// The HTTP client's own timeout, not the context's: its error says so as
		// upstream's does ("(Client.Timeout exceeded while awaiting headers)").
		return httpProbe(parent, timeout, p.HTTPGet, c, host)
	case p.TCPSocket != nil:
		h := p.TCPSocket.Host
		if h == "" {
			h = host
		}
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return "", err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(h, strconv.Itoa(port)))
		if err != nil {
			return "", err
		}
		return "", conn.Close()
	case p.GRPC != nil:
		return "", grpcCheck(ctx, host, p.GRPC)
	}
	return "", errors.New("probe has no handler")
}

// resolvePort turns a numeric or named port into a number.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container %s", port.StrVal, c.Name)
}

// maxProbeBody is how much of an HTTP probe's response body is read, as upstream's.
const maxProbeBody = 10 << 10

// maxProbeRedirects is how many same-host redirects an HTTP probe follows.
const maxProbeRedirects = 10

// httpProbe runs an HTTP probe with upstream's rules: a redirect to the same host is
// followed (up to maxProbeRedirects), one to another host is not; a 2xx answer is
// success, a 3xx one (a redirect not followed) success with a warning carrying the
// response body, anything else a failure.
func httpProbe(ctx context.Context, timeout time.Duration, g *v1.HTTPGetAction, c *v1.Container, podIP string) (warning string, err error) {
	req, err := newHTTPGetRequest(ctx, g, c, podIP, "probe")
	if err != nil {
		return "", err
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, // probes do not verify, as upstream
			ForceAttemptHTTP2:  true,
			DisableKeepAlives:  true,
			DisableCompression: true, // no Accept-Encoding
		},
		CheckRedirect: sameHostRedirects,
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return "", err
	}
	switch {
	case resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest:
		// Never the body: it may hold what the user should not see in an event.
		return "", fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	case resp.StatusCode >= http.StatusMultipleChoices:
		return "Probe terminated redirects, Response body: " + string(body), nil
	}
	return "", nil
}

// sameHostRedirects is the redirect rule of probes and hooks: a redirect to the same
// host is followed, up to maxProbeRedirects; one to another host is not (the redirect
// is the answer).
func sameHostRedirects(next *http.Request, via []*http.Request) error {
	if next.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxProbeRedirects {
		return fmt.Errorf("stopped after %d redirects", maxProbeRedirects)
	}
	return nil
}

// hookHTTPGet runs a lifecycle hook's HTTP GET as upstream's kubelet does: only a
// request that gets no answer fails, whatever the status code; redirects are followed
// as a probe's. An HTTPS hook answered in plain HTTP is tried again over HTTP, without
// the user's Authorization header; fellBackAt is then the host:port it asked.
func hookHTTPGet(ctx context.Context, g *v1.HTTPGetAction, c *v1.Container, podIP string) (fellBackAt string, err error) {
	req, err := newHTTPGetRequest(ctx, g, c, podIP, "lifecycle")
	if err != nil {
		return "", err
	}
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
		},
		CheckRedirect: sameHostRedirects,
	}
	get := func(req *http.Request) error {
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
			resp.Body.Close()
		}
		return err
	}
	err = get(req)
	if err == nil || req.URL.Scheme != "https" || !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return "", err
	}
	plain := req.Clone(ctx)
	plain.URL.Scheme = "http"
	plain.Header.Del("Authorization")
	if get(plain) != nil {
		return "", err // the first error says what went wrong
	}
	return req.URL.Host, nil
}

// newHTTPGetRequest builds the request of an httpGet action as upstream's kubelet does:
// the host is the pod's IP unless given; the path may carry a query; the user's headers
// are sent as given, a Host header becoming the request's host; User-Agent is
// kube-<purpose>/<major>.<minor> and Accept */* unless the user set them (an empty
// Accept is not sent).
func newHTTPGetRequest(ctx context.Context, g *v1.HTTPGetAction, c *v1.Container, podIP, purpose string) (*http.Request, error) {
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return nil, err
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path} // passed on as it is, as upstream does
	}
	u.Scheme, u.Host = scheme, net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	for _, h := range g.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		v := mizzenversion.Get()
		headers.Set("User-Agent", fmt.Sprintf("kube-%s/%s.%s", purpose, v.Major, v.Minor))
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// grpcCheck calls the standard gRPC health service.
func grpcCheck(ctx context.Context, host string, g *v1.GRPCAction) error {
	conn, err := grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(int(g.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.Status)
	}
	return nil
}

// runHook runs a postStart or preStop handler and returns a failure message in upstream's
// words, or "". podIP is the sandbox's, which an httpGet without a host targets (the pod's
// status may not carry it yet when postStart runs). timeout 0 means no limit beyond ctx.
func (kl *Kubelet) runHook(ctx context.Context, pod *v1.Pod, containerID, podIP string, c *v1.Container, h *v1.LifecycleHandler, timeout time.Duration) string {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	podName := formatPod(pod)
	switch {
	case h.Exec != nil:
		stdout, stderr, err := kl.runtime.ExecSync(ctx, containerID, h.Exec.Command, timeout)
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, c.Name, podName, err, string(stdout)+string(stderr))
		}
	case h.HTTPGet != nil:
		fellBackAt, err := hookHTTPGet(ctx, h.HTTPGet, c, podIP)
		if err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, podName, err)
		}
		if fellBackAt != "" {
			kl.recorder.Eventf(containerRef(pod, ""), v1.EventTypeWarning, "LifecycleHTTPFallback",
				"request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", fellBackAt)
		}
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: container terminated before sleep hook finished",
				h.Sleep.Seconds, c.Name, podName)
		case <-kl.clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
	}
	return ""
}
