package metrics

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	corelisters "k8s.io/client-go/listers/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"mizzen/internal/delegatedauth"
)

// GroupVersion is the API this server serves.
var GroupVersion = metricsv1beta1.SchemeGroupVersion

var (
	nodeMetricsResource = GroupVersion.WithResource("nodemetrics").GroupResource()
	podMetricsResource  = GroupVersion.WithResource("podmetrics").GroupResource()
)

// APIHandler serves metrics.k8s.io/v1beta1 from a store, naming only nodes and pods
// the apiserver knows (the listers) so that a label selector applies to their labels.
type APIHandler struct {
	Store *Store
	Nodes corelisters.NodeLister
	Pods  corelisters.PodLister
	Auth  *delegatedauth.CertAuthenticator
	Log   *slog.Logger

	codecs serializer.CodecFactory
	mux    *http.ServeMux
}

// NewAPIHandler builds the handler.
func NewAPIHandler(store *Store, nodes corelisters.NodeLister, pods corelisters.PodLister, auth *delegatedauth.CertAuthenticator, log *slog.Logger) (*APIHandler, error) {
	if log == nil {
		log = slog.Default()
	}
	scheme := runtime.NewScheme()
	if err := metricsv1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	h := &APIHandler{Store: store, Nodes: nodes, Pods: pods, Auth: auth, Log: log, codecs: serializer.NewCodecFactory(scheme), mux: http.NewServeMux()}
	prefix := "/apis/" + GroupVersion.String()
	h.mux.HandleFunc("GET /apis", h.serveGroupList)
	h.mux.HandleFunc("GET /apis/"+GroupVersion.Group, h.serveGroup)
	h.mux.HandleFunc("GET "+prefix, h.serveResourceList)
	h.mux.HandleFunc("GET "+prefix+"/nodes", h.listNodes)
	h.mux.HandleFunc("GET "+prefix+"/nodes/{name}", h.getNode)
	h.mux.HandleFunc("GET "+prefix+"/pods", h.listPods)
	h.mux.HandleFunc("GET "+prefix+"/namespaces/{namespace}/pods", h.listPods)
	h.mux.HandleFunc("GET "+prefix+"/namespaces/{namespace}/pods/{name}", h.getPod)
	for _, p := range []string{"/nodes", "/nodes/{name}", "/pods", "/namespaces/{namespace}/pods", "/namespaces/{namespace}/pods/{name}"} {
		h.mux.HandleFunc(prefix+p, h.methodNotAllowed)
	}
	return h, nil
}

// ServeHTTP answers health checks to anyone and everything else to an authenticated
// caller.
func (h *APIHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz", "/livez", "/readyz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
		return
	}
	if _, ok := h.Auth.Authenticate(r); !ok {
		h.writeError(w, r, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	// A path without a route gets a Status, as from the apiserver.
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusNotFound, strings.ToLower(r.Method), schema.GroupResource{}, "", "", 0, false))
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *APIHandler) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, r, apierrors.NewMethodNotSupported(nodeOrPodResource(r.URL.Path), strings.ToLower(r.Method)))
}

func nodeOrPodResource(path string) schema.GroupResource {
	if strings.Contains(path, "/pods") {
		return podMetricsResource
	}
	return nodeMetricsResource
}

// Discovery documents. They never change, and the apiserver reads them as JSON.

func (h *APIHandler) groupDiscovery() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: GroupVersion.String(), Version: GroupVersion.Version}
	return metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: GroupVersion.Group,
		Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

func (h *APIHandler) serveGroupList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{h.groupDiscovery()}})
}

func (h *APIHandler) serveGroup(w http.ResponseWriter, _ *http.Request) {
	g := h.groupDiscovery()
	writeJSON(w, &g)
}

// ResourceList is the metrics API's discovery document.
func ResourceList() *metav1.APIResourceList {
	verbs := metav1.Verbs{"get", "list"}
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: GroupVersion.String(),
		APIResources: []metav1.APIResource{
			{Name: "nodes", SingularName: "", Namespaced: false, Kind: "NodeMetrics", Verbs: verbs},
			{Name: "pods", SingularName: "", Namespaced: true, Kind: "PodMetrics", Verbs: verbs},
		},
	}
}

func (h *APIHandler) serveResourceList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, ResourceList())
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// Resources.

func (h *APIHandler) selector(r *http.Request) (labels.Selector, error) {
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	return sel, nil
}

func (h *APIHandler) nodeMetrics(node *corev1.Node) (*metricsv1beta1.NodeMetrics, bool) {
	u, ok := h.Store.Node(node.Name)
	if !ok {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, CreationTimestamp: metav1.NewTime(time.Now())},
		Timestamp:  metav1.NewTime(u.Timestamp), Window: metav1.Duration{Duration: u.Window},
		Usage: usageList(u),
	}, true
}

func usageList(u Usage) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(u.NanoCores), resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(int64(u.WorkingSet), resource.BinarySI),
	}
}

func (h *APIHandler) listNodes(w http.ResponseWriter, r *http.Request) {
	sel, err := h.selector(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	nodes, err := h.Nodes.List(sel)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	list := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{}}
	for _, n := range nodes {
		if m, ok := h.nodeMetrics(n); ok {
			list.Items = append(list.Items, *m)
		}
	}
	h.writeObject(w, r, list)
}

func (h *APIHandler) getNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	node, err := h.Nodes.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		h.writeError(w, r, err)
		return
	}
	if node != nil {
		if m, ok := h.nodeMetrics(node); ok {
			h.writeObject(w, r, m)
			return
		}
	}
	h.writeError(w, r, apierrors.NewNotFound(nodeMetricsResource, name))
}

func (h *APIHandler) podMetrics(pod *corev1.Pod) (*metricsv1beta1.PodMetrics, bool) {
	containers, ok := h.Store.Pod(pod.Namespace, pod.Name)
	if !ok {
		return nil, false
	}
	m := &metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, CreationTimestamp: metav1.NewTime(time.Now())},
		Containers: []metricsv1beta1.ContainerMetrics{},
	}
	for _, c := range containers {
		// The pod's window is its first container's; the latest sample dates it.
		if m.Window.Duration == 0 {
			m.Window = metav1.Duration{Duration: c.Window}
		}
		if c.Timestamp.After(m.Timestamp.Time) {
			m.Timestamp = metav1.NewTime(c.Timestamp)
		}
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: usageList(c.Usage)})
	}
	return m, true
}

func (h *APIHandler) listPods(w http.ResponseWriter, r *http.Request) {
	sel, err := h.selector(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var pods []*corev1.Pod
	if ns := r.PathValue("namespace"); ns != "" {
		pods, err = h.Pods.Pods(ns).List(sel)
	} else {
		pods, err = h.Pods.List(sel)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	list := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{}}
	for _, p := range pods {
		if m, ok := h.podMetrics(p); ok {
			list.Items = append(list.Items, *m)
		}
	}
	h.writeObject(w, r, list)
}

func (h *APIHandler) getPod(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	pod, err := h.Pods.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		h.writeError(w, r, err)
		return
	}
	if pod != nil {
		if m, ok := h.podMetrics(pod); ok {
			h.writeObject(w, r, m)
			return
		}
	}
	h.writeError(w, r, apierrors.NewNotFound(podMetricsResource, name))
}

// Encoding: JSON, or protobuf for a client that asks for it (kubectl top does).

// negotiate picks the serializer for the request's Accept header; false when the
// client accepts nothing this server writes.
func (h *APIHandler) negotiate(r *http.Request) (runtime.SerializerInfo, bool) {
	accept := r.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		accept = runtime.ContentTypeJSON
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil || params["as"] != "" {
			// A Table or another transformed form this server does not produce.
			continue
		}
		switch mt {
		case "*/*", "application/*":
			mt = runtime.ContentTypeJSON
		}
		if info, ok := runtime.SerializerInfoForMediaType(h.codecs.SupportedMediaTypes(), mt); ok {
			return info, true
		}
	}
	return runtime.SerializerInfo{}, false
}

func (h *APIHandler) writeObject(w http.ResponseWriter, r *http.Request, obj runtime.Object) {
	h.write(w, r, http.StatusOK, obj)
}

func (h *APIHandler) write(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	info, ok := h.negotiate(r)
	if !ok {
		if _, isStatus := obj.(*metav1.Status); isStatus {
			info, _ = runtime.SerializerInfoForMediaType(h.codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
		} else {
			h.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", schema.GroupResource{}, "",
				"only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf", 0, false))
			return
		}
	}
	enc := h.codecs.EncoderForVersion(info.Serializer, GroupVersion)
	w.Header().Set("Content-Type", info.MediaType)
	w.WriteHeader(code)
	if err := enc.Encode(obj, w); err != nil {
		h.Log.Debug("writing a response", "path", r.URL.Path, "err", err)
	}
}

func (h *APIHandler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var st metav1.Status
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	} else {
		st = apierrors.NewInternalError(err).Status()
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	h.write(w, r, code, &st)
}
