// Package proxy relays the requests the apiserver hands on once they are authorized:
// pods/proxy and services/proxy to a pod or a ready endpoint of a service, and
// pods/log, pods/exec, pods/attach, pods/portforward and nodes/proxy to the node's
// kubelet with the apiserver's kubelet client certificate. It reads the objects it
// needs through Objects and answers errors through Responder, so it knows nothing of
// storage or routing.
package proxy

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Objects reads what the proxies resolve a request against; errors are API errors
// (NotFound for a missing object).
type Objects interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Service(ctx context.Context, namespace, name string) (*corev1.Service, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
	// EndpointSlices are those labelled with the service's name, read consistently so
	// that a slice written just before the request counts.
	EndpointSlices(ctx context.Context, namespace, service string) ([]*discoveryv1.EndpointSlice, error)
}

// Responder writes an error, or a Status a backend produced, as the apiserver answers.
type Responder interface {
	WriteError(w http.ResponseWriter, r *http.Request, err error)
	WriteStatus(w http.ResponseWriter, status metav1.Status)
}

// Request names what a proxied subresource request is for.
type Request struct {
	Namespace string
	// Name is the object's name, for pods/proxy, services/proxy and nodes/proxy in
	// the form "[scheme:]name[:port]".
	Name string
	// Rest is the path after the "proxy" subresource.
	Rest string
}

// Proxy relays requests to pods, service endpoints and kubelets.
type Proxy struct {
	objects Objects
	resp    Responder
	log     *slog.Logger
	// kubelet reaches kubelets; nil without kubelet client credentials.
	kubelet *http.Transport
	// backend reaches pods and service endpoints.
	backend *http.Transport
}

// New returns a proxy. kubeletTLS is the client certificate and trusted CAs for
// kubelets; without it the kubelet subresources answer 503.
func New(objects Objects, resp Responder, kubeletTLS *tls.Config, log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.Default()
	}
	return &Proxy{objects: objects, resp: resp, log: log, kubelet: newKubeletTransport(kubeletTLS), backend: newBackendTransport()}
}
