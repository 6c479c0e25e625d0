package apiserver

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
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// pods/proxy and services/proxy: the apiserver itself connects to a pod's IP, or to a
// ready endpoint of a service, and relays the request there with the path that follows
// "proxy". As upstream, the transport wraps the request with X-Forwarded-* headers and
// rewrites links in HTML answers so that they point back through the proxy; upgraded
// connections (WebSocket, SPDY) pass through.

var endpointSlicesGVR = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}

// newProxyTransport is the transport to pods and service endpoints. Like upstream it
// does not verify a pod's serving certificate: pods have no identity the apiserver
// could check it against.
func newProxyTransport() *http.Transport {
	return &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: pods have no verifiable identity
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 10,
		IdleConnTimeout:     90 * time.Second,
	}
}

// serveProxySubresource serves pods/proxy and services/proxy; it reports whether info
// named one of them.
func (s *Server) serveProxySubresource(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) bool {
	if info.Subresource != "proxy" {
		return false
	}
	var (
		loc *url.URL
		err error
	)
	switch h.GroupVersionResource() {
	case podsGVR:
		loc, err = s.podProxyLocation(r.Context(), h, info.Namespace, info.Name)
	case servicesGVR:
		loc, err = s.serviceProxyLocation(r.Context(), h, info.Namespace, info.Name)
	default:
		return false
	}
	if err != nil {
		s.writeError(w, r, err)
		return true
	}
	loc.Path = proxySubpath(r, info)
	s.proxyToBackend(w, r, loc)
	return true
}

// proxySubpath is the backend path: what follows "proxy" with a leading slash, and the
// request's trailing slash kept, as upstream computes it.
func proxySubpath(r *http.Request, info *requestInfo) string {
	p := info.Rest
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
func (s *Server) proxyToBackend(w http.ResponseWriter, r *http.Request, loc *url.URL) {
	h := proxy.NewUpgradeAwareHandler(loc, s.proxyTransport, true, false, proxyErrorResponder{s})
	h.FlushInterval = -1
	h.ServeHTTP(w, r)
}

type proxyErrorResponder struct{ s *Server }

// Error relays a Status the proxy produced (503 "error trying to reach service" from
// the wrapping transport) and reports anything else as upstream does: code 500 with the
// error's text.
func (e proxyErrorResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	e.s.log.Debug("proxying to a pod or service", "path", r.URL.Path, "err", err)
	if se, ok := err.(apierrors.APIStatus); ok {
		e.s.writeStatus(w, se.Status())
		return
	}
	e.s.writeStatus(w, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Reason: metav1.StatusReasonUnknown, Message: err.Error()})
}

// podProxyLocation resolves "[scheme:]name[:port]" to the pod's IP and port: the port
// given, else the first port the pod's containers declare, else none (the scheme's
// default). Only global unicast pod IPs are allowed, so the proxy cannot be pointed at
// the apiserver's own loopback or link-local addresses.
func (s *Server) podProxyLocation(ctx context.Context, h *resourceHandler, namespace, id string) (*url.URL, error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid pod request %q", id))
	}
	obj, err := s.getObject(ctx, h, namespace, name, "")
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pods: unexpected object %T", obj)
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
func (s *Server) serviceProxyLocation(ctx context.Context, h *resourceHandler, namespace, id string) (*url.URL, error) {
	scheme, name, portName, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid service request %q", id))
	}
	obj, err := s.getObject(ctx, h, namespace, name, "")
	if err != nil {
		return nil, err
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("services: unexpected object %T", obj)
	}
	host, err := s.serviceEndpoint(ctx, svc, portName, id, true)
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: scheme, Host: host}, nil
}

// serviceEndpoint picks a ready endpoint (host:port) of svc serving the service port
// portName, at random. A port number is first translated to the name of the service
// port that declares it; id names the request in errors. With onlyPods, an endpoint is
// only used when it is an address of a pod of the service's namespace (services/proxy,
// which anyone able to write an EndpointSlice could otherwise aim anywhere); the
// aggregator trusts the endpoints of the Service an APIService names, as upstream.
func (s *Server) serviceEndpoint(ctx context.Context, svc *corev1.Service, portName, id string, onlyPods bool) (string, error) {
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
	slices, err := s.serviceEndpointSlices(ctx, namespace, name)
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
		if !onlyPods || s.addressBelongsToPod(ctx, namespace, c.addr, c.pod) {
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
func (s *Server) addressBelongsToPod(ctx context.Context, namespace, addr string, ref *corev1.ObjectReference) bool {
	ph := s.handlers[podsGVR]
	if ph == nil || ref == nil || ref.Kind != "Pod" || ref.Namespace != namespace {
		return false
	}
	obj, err := s.getObject(ctx, ph, namespace, ref.Name, "")
	if err != nil {
		s.log.Debug("service proxy: skipping an endpoint", "address", addr, "pod", ref.Name, "err", err)
		return false
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
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

// serviceEndpointSlices are the EndpointSlices labelled with the service's name, read
// consistently so that a slice written just before the request counts.
func (s *Server) serviceEndpointSlices(ctx context.Context, namespace, service string) ([]*discoveryv1.EndpointSlice, error) {
	eh := s.handlers[endpointSlicesGVR]
	if eh == nil {
		return nil, nil
	}
	rev, err := s.store.CurrentRevision(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.cache.WaitFresh(ctx, rev, consistentReadTimeout); err != nil {
		return nil, storageError(err, endpointSlicesGVR.GroupResource(), "")
	}
	entries, _, err := s.cache.List(eh.segment, eh.listPrefix(namespace), nil)
	if err != nil {
		return nil, err
	}
	var slices []*discoveryv1.EndpointSlice
	for _, e := range entries {
		obj, err := eh.present(e.Object)
		if err != nil {
			return nil, err
		}
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || slice.Labels[discoveryv1.LabelServiceName] != service {
			continue
		}
		slices = append(slices, slice)
	}
	return slices, nil
}
