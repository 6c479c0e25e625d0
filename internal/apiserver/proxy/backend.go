package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// pods/proxy and services/proxy: the apiserver itself connects to a pod's IP, or to a
// ready endpoint of a service, and relays the request there with the path that follows
// "proxy". As upstream, the transport wraps the request with X-Forwarded-* headers and
// rewrites links in HTML answers so that they point back through the proxy; upgraded
// connections (WebSocket, SPDY) pass through.

// newBackendTransport is the transport to pods and service endpoints. Like upstream it
// does not verify a pod's serving certificate: pods have no identity the apiserver
// could check it against.
func newBackendTransport() *http.Transport {
	return &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: pods have no verifiable identity
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 10,
		IdleConnTimeout:     90 * time.Second,
	}
}

// ServePodProxy serves pods/{name}/proxy/{rest}: name is "[scheme:]name[:port]".
func (p *Proxy) ServePodProxy(w http.ResponseWriter, r *http.Request, req Request) {
	loc, err := p.podProxyLocation(r.Context(), req.Namespace, req.Name)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	loc.Path = proxySubpath(r, req.Rest)
	p.proxyToBackend(w, r, loc)
}

// ServeServiceProxy serves services/{name}/proxy/{rest}: name is
// "[scheme:]name[:port]", the port a service port's name or number.
func (p *Proxy) ServeServiceProxy(w http.ResponseWriter, r *http.Request, req Request) {
	loc, err := p.serviceProxyLocation(r.Context(), req.Namespace, req.Name)
	if err != nil {
		p.resp.WriteError(w, r, err)
		return
	}
	loc.Path = proxySubpath(r, req.Rest)
	p.proxyToBackend(w, r, loc)
}

// proxySubpath is the backend path: what follows "proxy" with a leading slash, and the
// request's trailing slash kept, as upstream computes it.
func proxySubpath(r *http.Request, rest string) string {
	p := rest
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if strings.HasSuffix(r.URL.Path, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// proxyToBackend relays r to loc. An empty loc.Path answers GET and HEAD with a
// redirect to the same URL with a trailing slash (upstream's behaviour, so that
// relative links in the backend's pages resolve under .../proxy/).
func (p *Proxy) proxyToBackend(w http.ResponseWriter, r *http.Request, loc *url.URL) {
	h := proxy.NewUpgradeAwareHandler(loc, p.backend, true, false, proxyErrorResponder{p})
	h.FlushInterval = -1
	h.ServeHTTP(w, r)
}

type proxyErrorResponder struct{ p *Proxy }

// Error relays a Status the proxy produced (503 "error trying to reach service" from
// the wrapping transport) and reports anything else as upstream does: code 500 with the
// error's text.
func (e proxyErrorResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	e.p.log.Debug("proxying to a pod or service", "path", r.URL.Path, "err", err)
	if se, ok := err.(apierrors.APIStatus); ok {
		e.p.resp.WriteStatus(w, se.Status())
		return
	}
	e.p.resp.WriteStatus(w, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Reason: metav1.StatusReasonUnknown, Message: err.Error()})
}

// podProxyLocation resolves "[scheme:]name[:port]" to the pod's IP and port: the port
// given, else the first port the pod's containers declare, else none (the scheme's
// default). Only global unicast pod IPs are allowed, so the proxy cannot be pointed at
// the apiserver's own loopback or link-local addresses.
func (p *Proxy) podProxyLocation(ctx context.Context, namespace, id string) (*url.URL, error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid pod request %q", id))
	}
	pod, err := p.objects.Pod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if port == "" {
		port = firstContainerPort(pod)
	}
	podIP := pod.Status.PodIP
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	if ip := net.ParseIP(podIP); ip == nil || !ip.IsGlobalUnicast() {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	loc := &url.URL{Scheme: scheme, Host: podIP}
	switch {
	case port != "":
		loc.Host = net.JoinHostPort(podIP, port)
	case strings.Contains(podIP, ":"):
		loc.Host = "[" + podIP + "]"
	}
	return loc, nil
}

// firstContainerPort is the first port declared by the pod's containers, in order, or
// "" when none declares one.
func firstContainerPort(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			return strconv.Itoa(int(c.Ports[0].ContainerPort))
		}
	}
	return ""
}

// serviceProxyLocation resolves "[scheme:]name[:port]" to a ready endpoint of the
// service, chosen at random among those serving the port. A port number is first
// translated to the name of the service port that declares it; endpoints are only used
// when they belong to a pod of the namespace that has the endpoint's address, so a
// hand-written EndpointSlice cannot turn the apiserver into a proxy to anywhere.
func (p *Proxy) serviceProxyLocation(ctx context.Context, namespace, id string) (*url.URL, error) {
	scheme, name, portName, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid service request %q", id))
	}
	svc, err := p.objects.Service(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	host, err := p.ServiceEndpoint(ctx, svc, portName, id, true)
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: scheme, Host: host}, nil
}

// ServiceEndpoint picks a ready endpoint (host:port) of svc serving the service port
// portName, at random. A port number is first translated to the name of the service
// port that declares it; id names the request in errors. With onlyPods, an endpoint is
// only used when it is an address of a pod of the service's namespace (services/proxy,
// which anyone able to write an EndpointSlice could otherwise aim anywhere); the
// aggregator trusts the endpoints of the Service an APIService names, as upstream.
func (p *Proxy) ServiceEndpoint(ctx context.Context, svc *corev1.Service, portName, id string, onlyPods bool) (string, error) {
	namespace, name := svc.Namespace, svc.Name
	if num, err := strconv.ParseInt(portName, 10, 32); err == nil {
		found := false
		for _, p := range svc.Spec.Ports {
			if int64(p.Port) == num {
				portName, found = p.Name, true
				break
			}
		}
		if !found {
			return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", num, name))
		}
	}
	slices, err := p.objects.EndpointSlices(ctx, namespace, name)
	if err != nil {
		return "", err
	}
	type candidate struct {
		addr string
		port int
		pod  *corev1.ObjectReference
	}
	var candidates []candidate
	for _, slice := range slices {
		port := slicePort(slice, portName)
		if port == 0 {
			continue
		}
		for _, ep := range slice.Endpoints {
			// An unset condition means ready: the consumer must assume so.
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				candidates = append(candidates, candidate{addr: addr, port: port, pod: ep.TargetRef})
			}
		}
	}
	// Try them in a random order and take the first that may be used.
	rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	for _, c := range candidates {
		if !onlyPods || p.addressBelongsToPod(ctx, namespace, c.addr, c.pod) {
			return net.JoinHostPort(c.addr, strconv.Itoa(c.port)), nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", id))
}

// slicePort is the port number the slice serves under the service port's name, 0 when
// it serves none under that name.
func slicePort(slice *discoveryv1.EndpointSlice, name string) int {
	for _, p := range slice.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn == name && p.Port != nil {
			return int(*p.Port)
		}
	}
	return 0
}

// addressBelongsToPod reports whether addr is an IP of the pod ref names, in the namespace.
func (p *Proxy) addressBelongsToPod(ctx context.Context, namespace, addr string, ref *corev1.ObjectReference) bool {
	if ref == nil || ref.Kind != "Pod" || ref.Namespace != namespace {
		return false
	}
	pod, err := p.objects.Pod(ctx, namespace, ref.Name)
	if err != nil {
		p.log.Debug("service proxy: skipping an endpoint", "address", addr, "pod", ref.Name, "err", err)
		return false
	}
	if pod.Status.PodIP == addr {
		return true
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP == addr {
			return true
		}
	}
	return false
}
