package proxy

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// The subresources that reach a kubelet: pods/log, pods/exec, pods/attach,
// pods/portforward and nodes/proxy. The apiserver checks the request against the pod,
// finds the node's kubelet, and proxies the request there with its own kubelet client
// certificate; upgraded connections (SPDY, WebSocket) pass through unchanged, and the
// kubelet translates protocols its runtime does not speak.

// defaultKubeletPort is used when a node does not advertise its kubelet endpoint.
const defaultKubeletPort = 10250

// newKubeletTransport is the transport to kubelets; nil without kubelet client
// credentials.
func newKubeletTransport(clientTLS *tls.Config) *http.Transport {
	if clientTLS == nil {
		return nil
	}
	return &http.Transport{
		TLSClientConfig:     clientTLS.Clone(),
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 10,
		IdleConnTimeout:     90 * time.Second,
	}
}

// podContainerNames are the pod's containers in upstream's order: init containers,
// containers, ephemeral containers.
func podContainerNames(pod *corev1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	return names
}

// podContainer resolves the container a request names: the only one when the pod has
// one and none is named, with upstream's messages otherwise.
func podContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, podContainerNames(pod)))
	}
	for _, n := range podContainerNames(pod) {
		if n == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is not valid", name, pod.Name))
}

// kubeletLocation is the base URL of a node's kubelet: its InternalIP (else its
// Hostname address) and its advertised kubelet port.
func (p *Proxy) kubeletLocation(r *http.Request, nodeName string) (*url.URL, error) {
	node, err := p.objects.Node(r.Context(), nodeName)
	if err != nil {
		return nil, err
	}
	var host string
	for _, want := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == want && host == "" {
				host = a.Address
			}
		}
	}
	if host == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no preferred addresses found; known addresses: %v", node.Status.Addresses))
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultKubeletPort
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port))}, nil
}

// proxyToKubelet proxies r to loc on a kubelet; upgradeRequired refuses a request that
// does not ask to upgrade its connection.
func (p *Proxy) proxyToKubelet(w http.ResponseWriter, r *http.Request, loc *url.URL, upgradeRequired bool) {
	if p.kubelet == nil {
		p.resp.WriteError(w, r, apierrors.NewServiceUnavailable("the apiserver has no kubelet client credentials"))
		return
	}
	h := proxy.NewUpgradeAwareHandler(loc, p.kubelet, false, upgradeRequired, kubeletErrorResponder{p})
	// Followed logs and proxied streams must reach the client as they come.
	h.FlushInterval = -1
	h.ServeHTTP(w, r)
}

type kubeletErrorResponder struct{ p *Proxy }

func (e kubeletErrorResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	e.p.log.Debug("proxying to a kubelet", "path", r.URL.Path, "err", err)
	if se, ok := err.(apierrors.APIStatus); ok {
		e.p.resp.WriteStatus(w, se.Status())
		return
	}
	e.p.resp.WriteError(w, r, apierrors.NewInternalError(fmt.Errorf("error trying to reach the kubelet: %w", err)))
}

// ServePodLog serves GET pods/{name}/log with PodLogOptions from the query.
func (p *Proxy) ServePodLog(w http.ResponseWriter, r *http.Request, req Request) {
	opts, err := podLogOptions(r.URL.Query())
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	if err := validatePodLogOptions(opts); err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	pod, err := p.objects.Pod(r.Context(), req.Namespace, req.Name)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	container, err := podContainer(pod, opts.Container)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	if pod.Spec.NodeName == "" {
		// Upstream answers an unscheduled pod's log with an empty body.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		return
	}
	loc, err := p.kubeletLocation(r, pod.Spec.NodeName)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	loc.Path = path.Join("/containerLogs", pod.Namespace, pod.Name, container)
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	if opts.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*opts.LimitBytes, 10))
	}
	if opts.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*opts.SinceSeconds, 10))
	}
	if opts.SinceTime != nil {
		q.Set("sinceTime", opts.SinceTime.UTC().Format(time.RFC3339))
	}
	loc.RawQuery = q.Encode()
	p.streamKubeletLog(w, r, loc)
}

// streamKubeletLog copies a kubelet's log response to the client, flushing as it
// comes; a kubelet's refusal is relayed as the Status it sent.
func (p *Proxy) streamKubeletLog(w http.ResponseWriter, r *http.Request, loc *url.URL) {
	if p.kubelet == nil {
		p.resp.WriteError(w, r, apierrors.NewServiceUnavailable("the apiserver has no kubelet client credentials"))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, loc.String(), nil)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	resp, err := p.kubelet.RoundTrip(req)
	if err != nil {
		p.resp.WriteError(w, r, apierrors.NewInternalError(fmt.Errorf("error trying to reach the kubelet: %w", err)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
			p.resp.WriteStatus(w, st)
			return
		}
		p.resp.WriteError(w, r, apierrors.NewGenericServerResponse(resp.StatusCode, "get", corev1.Resource("pods/log"), "", strings.TrimSpace(string(body)), 0, false))
		return
	}
	if wsstream.IsWebSocketRequest(r) {
		// A websocket client (binary.k8s.io or base64.binary.k8s.io) gets the log as
		// messages, as upstream's log handler sends it.
		_ = wsstream.NewReader(&dataBeforeEOF{r: resp.Body}, true, wsstream.NewDefaultReaderProtocols()).Copy(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// dataBeforeEOF hands out a read's data and its error in separate reads: wsstream drops
// the data of a read that also reports io.EOF, which an HTTP body with a known length
// (a short, unfollowed log) returns with its last bytes.
type dataBeforeEOF struct {
	r   io.Reader
	err error
}

func (d *dataBeforeEOF) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n, err := d.r.Read(p)
	if n > 0 && err != nil {
		d.err = err
		return n, nil
	}
	return n, err
}

// podLogOptions reads PodLogOptions from a query, as upstream's parameter conversion
// does (k8s.io/api has the types but not the query conversion).
func podLogOptions(q url.Values) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{Container: q.Get("container")}
	var errs []string
	boolean := func(name string) bool {
		v := q.Get(name)
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
		}
		return b
	}
	integer := func(name string) *int64 {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			return nil
		}
		return &n
	}
	o.Follow, o.Previous, o.Timestamps = boolean("follow"), boolean("previous"), boolean("timestamps")
	o.InsecureSkipTLSVerifyBackend = boolean("insecureSkipTLSVerifyBackend")
	o.SinceSeconds, o.TailLines, o.LimitBytes = integer("sinceSeconds"), integer("tailLines"), integer("limitBytes")
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("sinceTime: %v", err))
		} else {
			mt := metav1.NewTime(t)
			o.SinceTime = &mt
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewBadRequest(strings.Join(errs, ", "))
	}
	return o, nil
}

// validatePodLogOptions checks the options as upstream's validation does.
func validatePodLogOptions(o *corev1.PodLogOptions) error {
	var msgs []string
	if o.TailLines != nil && *o.TailLines < 0 {
		msgs = append(msgs, fmt.Sprintf("tailLines: Invalid value: %d: must be greater than or equal to 0", *o.TailLines))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		msgs = append(msgs, fmt.Sprintf("limitBytes: Invalid value: %d: must be greater than 0", *o.LimitBytes))
	}
	if o.SinceSeconds != nil && o.SinceTime != nil {
		msgs = append(msgs, "sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
	}
	if o.SinceSeconds != nil && *o.SinceSeconds < 1 {
		msgs = append(msgs, fmt.Sprintf("sinceSeconds: Invalid value: %d: must be greater than 0", *o.SinceSeconds))
	}
	if len(msgs) == 0 {
		return nil
	}
	return apierrors.NewBadRequest(strings.Join(msgs, ", "))
}

// ServePodStream serves pods/exec and pods/attach (subresource says which) for pod:
// GET or POST with an upgrade, admitted by the caller.
func (p *Proxy) ServePodStream(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, subresource string) {
	container, err := podContainer(pod, r.URL.Query().Get("container"))
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	if phase := pod.Status.Phase; phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		verb := "exec into"
		if subresource == "attach" {
			verb = "attach to"
		}
		p.resp.WriteError(w, r, apierrors.NewBadRequest(fmt.Sprintf("cannot %s a container in a completed pod; current phase is %s", verb, phase)))
		return
	}
	p.proxyPodStream(w, r, pod, path.Join("/"+subresource, pod.Namespace, pod.Name, container))
}

// ServePodPortForward serves pods/portforward for pod: GET or POST with an upgrade,
// admitted by the caller.
func (p *Proxy) ServePodPortForward(w http.ResponseWriter, r *http.Request, pod *corev1.Pod) {
	p.proxyPodStream(w, r, pod, path.Join("/portForward", pod.Namespace, pod.Name))
}

// proxyPodStream hands an upgrade request on to the kubelet path of the pod's node.
func (p *Proxy) proxyPodStream(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, kubeletPath string) {
	if pod.Spec.NodeName == "" {
		p.resp.WriteError(w, r, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	loc, err := p.kubeletLocation(r, pod.Spec.NodeName)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	loc.Path = kubeletPath
	loc.RawQuery = r.URL.RawQuery
	p.proxyToKubelet(w, r, loc, true)
}

// ServeNodeProxy serves nodes/{name}/proxy/{path}: any method, to the kubelet's path.
func (p *Proxy) ServeNodeProxy(w http.ResponseWriter, r *http.Request, req Request) {
	// The name may carry a scheme and a port, [scheme:]node[:port], as upstream's: the
	// kubelet's own port goes through the kubelet client, another through the plain proxy.
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(req.Name)
	if !ok {
		p.resp.WriteError(w, r, apierrors.NewBadRequest(fmt.Sprintf("invalid node request %q", req.Name)))
		return
	}
	loc, err := p.kubeletLocation(r, name)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	if host, kubeletPort, _ := net.SplitHostPort(loc.Host); port != "" && port != kubeletPort {
		if scheme == "" {
			scheme = "http"
		}
		loc.Scheme, loc.Host = scheme, net.JoinHostPort(host, port)
		loc.Path = "/" + req.Rest
		loc.RawQuery = r.URL.RawQuery
		p.proxyToBackend(w, r, loc)
		return
	}
	loc.Path = "/" + req.Rest
	if strings.HasSuffix(r.URL.Path, "/") && req.Rest != "" {
		loc.Path += "/"
	}
	loc.RawQuery = r.URL.RawQuery
	p.proxyToKubelet(w, r, loc, false)
}
