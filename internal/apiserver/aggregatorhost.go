package apiserver

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/apiserver/aggregator"
	"mizzen/internal/storage"
)

// FrontProxyConfig is how the server authenticates to aggregated API servers (see
// package aggregator).
type FrontProxyConfig = aggregator.FrontProxyConfig

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// serveAggregated hands a request for an aggregated group version to the aggregator,
// once authorized; it reports whether it was one.
func (s *Server) serveAggregated(w http.ResponseWriter, r *http.Request, info *requestInfo) bool {
	if info == nil {
		return s.aggregator.Serve(w, r, nil)
	}
	return s.aggregator.Serve(w, r, &schema.GroupVersion{Group: info.Group, Version: info.Version})
}

// servesGroup reports whether this server serves a version of the group itself.
func (s *Server) servesGroup(group string) bool {
	for _, g := range s.groups {
		if g.name == group {
			return true
		}
	}
	return false
}

// aggregatorHost is what the aggregator reads and writes of the server.
type aggregatorHost struct{ s *Server }

var _ aggregator.Host = aggregatorHost{}

func (h aggregatorHost) Ready() <-chan struct{} { return h.s.cache.Ready() }

func (h aggregatorHost) APIServices() ([]*apiregistrationv1.APIService, error) {
	rh := h.s.handlerForKind(apiregistrationv1.SchemeGroupVersion.Group, apiregistrationv1.SchemeGroupVersion.Version, "APIService")
	if rh == nil {
		return nil, nil
	}
	entries, _, err := h.s.cache.List(rh.segment, rh.listPrefix(""), nil)
	if err != nil {
		return nil, err
	}
	var out []*apiregistrationv1.APIService
	for _, e := range entries {
		obj, err := rh.presentEntry(e)
		if err != nil {
			return nil, err
		}
		if svc, ok := obj.(*apiregistrationv1.APIService); ok {
			out = append(out, svc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (h aggregatorHost) ServesGroup(group string) bool { return h.s.servesGroup(group) }

func (h aggregatorHost) ServiceRevisions(namespace, name string) (int64, []int64) {
	var service int64
	var slices []int64
	if sh := h.s.handlers[servicesGVR]; sh != nil {
		if e, _, err := h.s.cache.Get(sh.segment, sh.key(namespace, name)); err == nil && e != nil {
			service = e.RV
		}
	}
	if eh := h.s.handlers[endpointSlicesGVR]; eh != nil {
		entries, _, _ := h.s.cache.List(eh.segment, eh.listPrefix(namespace), func(e *storage.Entry) bool {
			return e.Labels.Get(discoveryv1.LabelServiceName) == name
		})
		for _, e := range entries {
			slices = append(slices, e.RV)
		}
	}
	return service, slices
}

func (h aggregatorHost) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	return proxyObjects{h.s}.Service(ctx, namespace, name)
}

func (h aggregatorHost) EndpointSlices(ctx context.Context, namespace, service string) ([]*discoveryv1.EndpointSlice, error) {
	return h.s.serviceEndpointSlices(ctx, namespace, service)
}

// ServiceEndpoint trusts the endpoints of the Service an APIService names, as upstream.
func (h aggregatorHost) ServiceEndpoint(ctx context.Context, svc *corev1.Service, port, id string) (string, error) {
	return h.s.serviceEndpoint(ctx, svc, port, id, false)
}

func (h aggregatorHost) UpdateAPIServiceStatus(ctx context.Context, name string, update func(*apiregistrationv1.APIService)) error {
	rh := h.s.handlerForKind(apiregistrationv1.SchemeGroupVersion.Group, apiregistrationv1.SchemeGroupVersion.Version, "APIService")
	if rh == nil {
		return apierrors.NewNotFound(apiregistrationv1.SchemeGroupVersion.WithResource("apiservices").GroupResource(), name)
	}
	_, err := h.s.updateObject(ctx, rh, "", name, updateStatus, false, nil, func(current runtime.Object) (runtime.Object, error) {
		cur := current.(*apiregistrationv1.APIService)
		update(cur)
		return cur, nil
	})
	return err
}

func (h aggregatorHost) LocalDiscovery() ([]byte, []byte) {
	d := h.s.discovery.Load()
	return d.groupList, d.aggGroups
}

func (h aggregatorHost) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	h.s.writeError(w, r, err)
}

// publishAuthenticationInfo writes kube-system/extension-apiserver-authentication, the
// ConfigMap from which aggregated servers learn which CAs and names to trust, as
// upstream's apiserver keeps it.
func (s *Server) publishAuthenticationInfo(ctx context.Context) error {
	h := s.handlers[configMapsGVR]
	if h == nil || (s.cfg.FrontProxy == nil && len(s.cfg.ClientCAPEM) == 0) {
		return nil
	}
	data := map[string]string{}
	if len(s.cfg.ClientCAPEM) > 0 {
		data["client-ca-file"] = string(s.cfg.ClientCAPEM)
	}
	if fp := s.cfg.FrontProxy; fp != nil {
		jsonList := func(v []string) string {
			if v == nil {
				v = []string{}
			}
			b, _ := json.Marshal(v)
			return string(b)
		}
		data["requestheader-client-ca-file"] = string(fp.CAPEM)
		data["requestheader-allowed-names"] = jsonList(fp.AllowedNames)
		data["requestheader-username-headers"] = jsonList([]string{aggregator.RemoteUserHeader})
		data["requestheader-group-headers"] = jsonList([]string{aggregator.RemoteGroupHeader})
		data["requestheader-extra-headers-prefix"] = jsonList([]string{aggregator.RemoteExtraPrefix})
	}
	const namespace, name = "kube-system", "extension-apiserver-authentication"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: data}
	existing, err := s.getObject(ctx, h, namespace, name, "")
	switch {
	case apierrors.IsNotFound(err):
		_, err = s.createObject(ctx, h, namespace, cm, false, nil)
		return err
	case err != nil:
		return err
	case maps.Equal(existing.(*corev1.ConfigMap).Data, data):
		return nil
	}
	_, err = s.updateObject(ctx, h, namespace, name, updateMain, false, nil, func(current runtime.Object) (runtime.Object, error) {
		cur := current.(*corev1.ConfigMap)
		cur.Data = data
		return cur, nil
	})
	return err
}
