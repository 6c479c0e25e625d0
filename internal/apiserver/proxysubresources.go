package apiserver

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/proxy"
	"mizzen/internal/storage"
)

// The subresources package proxy serves: pods/proxy and services/proxy to a pod or a
// service endpoint; pods/log, exec, attach, portforward and nodes/proxy to a kubelet.
// The server routes them there after checking the method and running connect admission.

var (
	endpointSlicesGVR = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	nodesGVR          = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// serveKubeletSubresource serves the subresources proxied to a kubelet; it reports
// whether info named one.
func (s *Server) serveKubeletSubresource(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) bool {
	gvr := h.GroupVersionResource()
	req := proxy.Request{Namespace: info.Namespace, Name: info.Name, Rest: info.Rest}
	switch {
	case gvr == podsGVR && info.Subresource == "log":
		if info.Verb != "get" {
			s.writeError(w, r, methodNotAllowed(r, h))
			return true
		}
		s.proxy.ServePodLog(w, r, req)
	case gvr == podsGVR && (info.Subresource == "exec" || info.Subresource == "attach"):
		pod, err := s.streamingPod(r, info, h)
		if err != nil {
			s.writeError(w, r, err)
			return true
		}
		s.proxy.ServePodStream(w, r, pod, info.Subresource)
	case gvr == podsGVR && info.Subresource == "portforward":
		pod, err := s.streamingPod(r, info, h)
		if err != nil {
			s.writeError(w, r, err)
			return true
		}
		s.proxy.ServePodPortForward(w, r, pod)
	case gvr == nodesGVR && info.Subresource == "proxy":
		s.proxy.ServeNodeProxy(w, r, req)
	default:
		return false
	}
	return true
}

// serveProxySubresource serves pods/proxy and services/proxy; it reports whether info
// named one of them.
func (s *Server) serveProxySubresource(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) bool {
	if info.Subresource != "proxy" {
		return false
	}
	req := proxy.Request{Namespace: info.Namespace, Name: info.Name, Rest: info.Rest}
	switch h.GroupVersionResource() {
	case podsGVR:
		s.proxy.ServePodProxy(w, r, req)
	case servicesGVR:
		s.proxy.ServeServiceProxy(w, r, req)
	default:
		return false
	}
	return true
}

// streamingPod checks the method of an exec, attach or port-forward request and returns
// its pod, admitted.
func (s *Server) streamingPod(r *http.Request, info *requestInfo, h *resourceHandler) (*corev1.Pod, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r, h)
	}
	pod, err := proxyObjects{s}.Pod(r.Context(), info.Namespace, info.Name)
	if err != nil {
		return nil, err
	}
	return pod, s.admitConnect(r, info, h)
}

// serviceEndpoint picks a ready endpoint (host:port) of svc serving the service port
// portName (see proxy.Proxy.ServiceEndpoint).
func (s *Server) serviceEndpoint(ctx context.Context, svc *corev1.Service, portName, id string, onlyPods bool) (string, error) {
	return s.proxy.ServiceEndpoint(ctx, svc, portName, id, onlyPods)
}

// proxyObjects reads what the proxies resolve requests against.
type proxyObjects struct{ s *Server }

func (o proxyObjects) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return getTyped[*corev1.Pod](ctx, o.s, podsGVR, namespace, name)
}

func (o proxyObjects) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	return getTyped[*corev1.Service](ctx, o.s, servicesGVR, namespace, name)
}

func (o proxyObjects) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return getTyped[*corev1.Node](ctx, o.s, nodesGVR, "", name)
}

func (o proxyObjects) EndpointSlices(ctx context.Context, namespace, service string) ([]*discoveryv1.EndpointSlice, error) {
	return o.s.serviceEndpointSlices(ctx, namespace, service)
}

// getTyped reads one object of a served resource; NotFound when the server does not
// serve the resource (a server built with some resources only).
func getTyped[T any](ctx context.Context, s *Server, gvr schema.GroupVersionResource, namespace, name string) (T, error) {
	var zero T
	h := s.handlers[gvr]
	if h == nil {
		return zero, notFound()
	}
	obj, err := s.getObject(ctx, h, namespace, name, "")
	if err != nil {
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("%s: unexpected object %T", gvr.Resource, obj)
	}
	return t, nil
}

// proxyResponder answers proxy errors as the server answers any.
type proxyResponder struct{ s *Server }

func (p proxyResponder) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	p.s.writeError(w, r, err)
}

func (p proxyResponder) WriteStatus(w http.ResponseWriter, status metav1.Status) {
	p.s.writeStatus(w, status)
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
	entries, _, err := s.cache.List(eh.segment, eh.listPrefix(namespace), func(e *storage.Entry) bool {
		return e.Labels.Get(discoveryv1.LabelServiceName) == service
	})
	if err != nil {
		return nil, err
	}
	var slices []*discoveryv1.EndpointSlice
	for _, e := range entries {
		obj, err := eh.presentEntry(e)
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
