package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/hostaddr"
)

// fakeObjects serves objects from maps keyed "namespace/name".
type fakeObjects struct {
	pods     map[string]*corev1.Pod
	services map[string]*corev1.Service
	nodes    map[string]*corev1.Node
	slices   []*discoveryv1.EndpointSlice
}

func (f *fakeObjects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if p := f.pods[ns+"/"+name]; p != nil {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (f *fakeObjects) Service(_ context.Context, ns, name string) (*corev1.Service, error) {
	if s := f.services[ns+"/"+name]; s != nil {
		return s, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
}

func (f *fakeObjects) Node(_ context.Context, name string) (*corev1.Node, error) {
	if n := f.nodes[name]; n != nil {
		return n, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

func (f *fakeObjects) EndpointSlices(_ context.Context, ns, service string) ([]*discoveryv1.EndpointSlice, error) {
	var out []*discoveryv1.EndpointSlice
	for _, s := range f.slices {
		if s.Namespace == ns && s.Labels[discoveryv1.LabelServiceName] == service {
			out = append(out, s)
		}
	}
	return out, nil
}

// jsonResponder writes errors as JSON Status bodies.
type jsonResponder struct{}

func (jsonResponder) WriteError(w http.ResponseWriter, _ *http.Request, err error) {
	if se, ok := err.(apierrors.APIStatus); ok {
		jsonResponder{}.WriteStatus(w, se.Status())
		return
	}
	jsonResponder{}.WriteStatus(w, apierrors.NewInternalError(err).Status())
}

func (jsonResponder) WriteStatus(w http.ResponseWriter, st metav1.Status) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// backend answers with the method and URI it was asked for.
func backend(t *testing.T, ip string, tlsOn bool) (port int) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI())
	}))
	hs.Listener.Close()
	hs.Listener = l
	if tlsOn {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(hs.Close)
	return l.Addr().(*net.TCPAddr).Port
}

func routableIP(t *testing.T) string {
	t.Helper()
	ip, err := hostaddr.PrimaryIPv4()
	if err != nil {
		t.Skipf("no routable IPv4 address: %v", err)
	}
	return ip.String()
}

// serve runs one proxy call and returns the response code and body.
func serve(call func(w http.ResponseWriter, r *http.Request), method, target string) (int, string) {
	w := httptest.NewRecorder()
	call(w, httptest.NewRequest(method, target, nil))
	return w.Code, w.Body.String()
}

func statusMessage(t *testing.T, body string) string {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("not a Status: %q", body)
	}
	return st.Message
}

func TestPodProxy(t *testing.T) {
	ip := routableIP(t)
	port := backend(t, ip, false)
	objs := &fakeObjects{pods: map[string]*corev1.Pod{
		"ns/web": {ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: int32(port)}}}}},
			Status: corev1.PodStatus{PodIP: ip}},
		"ns/local": {ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: "ns"}, Status: corev1.PodStatus{PodIP: "127.0.0.1"}},
	}}
	p := New(objs, jsonResponder{}, nil, nil)
	pod := func(name, rest, target string) (int, string) {
		return serve(func(w http.ResponseWriter, r *http.Request) {
			p.ServePodProxy(w, r, Request{Namespace: "ns", Name: name, Rest: rest})
		}, http.MethodGet, target)
	}

	// The first declared container port, and the path after "proxy" with the query.
	if code, body := pod("web", "a/b", "/api/v1/namespaces/ns/pods/web/proxy/a/b?x=1"); code != 200 || body != "GET /a/b?x=1" {
		t.Errorf("pods/proxy: %d %q", code, body)
	}
	if code, body := pod("web:"+strconv.Itoa(port), "", "/api/v1/namespaces/ns/pods/web:1/proxy/"); code != 200 || body != "GET /" {
		t.Errorf("pods/proxy with a port: %d %q", code, body)
	}
	// A pod whose IP is loopback is refused: the proxy must not reach the apiserver itself.
	if code, body := pod("local:80", "", "/x/"); code != 400 || statusMessage(t, body) != "address not allowed" {
		t.Errorf("loopback pod: %d %q", code, body)
	}
	if code, _ := pod("missing", "", "/x/"); code != 404 {
		t.Errorf("missing pod: %d, want 404", code)
	}
	if code, _ := pod("a:b:c:d", "", "/x/"); code != 400 {
		t.Errorf("malformed name: %d, want 400", code)
	}
}

func TestServiceProxy(t *testing.T) {
	ip := routableIP(t)
	port := backend(t, ip, true)
	podRef := &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"}
	objs := &fakeObjects{
		pods: map[string]*corev1.Pod{"ns/web": {ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Status: corev1.PodStatus{PodIP: ip}}},
		services: map[string]*corev1.Service{
			"ns/svc":   {ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
			"ns/rogue": {ObjectMeta: metav1.ObjectMeta{Name: "rogue", Namespace: "ns"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
		},
		slices: []*discoveryv1.EndpointSlice{
			{ObjectMeta: metav1.ObjectMeta{Name: "svc-1", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
				Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, TargetRef: podRef}}},
			// An endpoint naming no pod: not used by services/proxy.
			{ObjectMeta: metav1.ObjectMeta{Name: "rogue-1", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "rogue"}},
				Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}}}},
		},
	}
	p := New(objs, jsonResponder{}, nil, nil)
	svc := func(name string) (int, string) {
		return serve(func(w http.ResponseWriter, r *http.Request) {
			p.ServeServiceProxy(w, r, Request{Namespace: "ns", Name: name, Rest: "healthz"})
		}, http.MethodGet, "/api/v1/namespaces/ns/services/x/proxy/healthz")
	}
	// The port by number is translated to the service port's name.
	for _, name := range []string{"https:svc:https", "https:svc:443"} {
		if code, body := svc(name); code != 200 || body != "GET /healthz" {
			t.Errorf("services/proxy %s: %d %q", name, code, body)
		}
	}
	if code, body := svc("https:svc:8080"); code != 503 || statusMessage(t, body) != `no service port 8080 found for service "svc"` {
		t.Errorf("unknown port: %d %q", code, body)
	}
	if code, body := svc("https:rogue:https"); code != 503 || statusMessage(t, body) != `no endpoints available for service "https:rogue:https"` {
		t.Errorf("endpoint without a pod: %d %q", code, body)
	}
	// Other callers (the aggregator, webhooks) trust a Service's endpoints.
	host, err := p.ServiceEndpoint(context.Background(), objs.services["ns/rogue"], "443", "rogue", false)
	if err != nil || host != net.JoinHostPort(ip, strconv.Itoa(port)) {
		t.Errorf("ServiceEndpoint: %q %v", host, err)
	}
}

// kubeletServer is a TLS server standing in for a kubelet; it answers with the path
// and query it was asked for.
func kubeletServer(t *testing.T) (*httptest.Server, *tls.Config) {
	t.Helper()
	hs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/containerLogs/ns/web/missing" {
			http.Error(w, "container not found", http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, "kubelet "+r.URL.RequestURI())
	}))
	t.Cleanup(hs.Close)
	return hs, hs.Client().Transport.(*http.Transport).TLSClientConfig
}

func kubeletNode(t *testing.T, hs *httptest.Server) *corev1.Node {
	t.Helper()
	u, _ := url.Parse(hs.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	n, _ := strconv.Atoi(port)
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "ignored"}, {Type: corev1.NodeInternalIP, Address: host}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n)}}}}
}

func TestPodLog(t *testing.T) {
	hs, clientTLS := kubeletServer(t)
	objs := &fakeObjects{
		nodes: map[string]*corev1.Node{"n1": kubeletNode(t, hs)},
		pods: map[string]*corev1.Pod{
			"ns/web": {ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
				Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}}},
			"ns/pending": {ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}},
		},
	}
	p := New(objs, jsonResponder{}, clientTLS, nil)
	logs := func(name, query string) (int, string) {
		return serve(func(w http.ResponseWriter, r *http.Request) {
			p.ServePodLog(w, r, Request{Namespace: "ns", Name: name})
		}, http.MethodGet, "/api/v1/namespaces/ns/pods/"+name+"/log?"+query)
	}
	if code, body := logs("web", "container=side&tailLines=5&follow=true"); code != 200 || body != "kubelet /containerLogs/ns/web/side?follow=true&tailLines=5" {
		t.Errorf("log: %d %q", code, body)
	}
	if code, body := logs("web", ""); code != 400 || statusMessage(t, body) != "a container name must be specified for pod web, choose one of: [app side]" {
		t.Errorf("log without a container: %d %q", code, body)
	}
	if code, body := logs("web", "container=app&tailLines=-1"); code != 400 || statusMessage(t, body) != "tailLines: Invalid value: -1: must be greater than or equal to 0" {
		t.Errorf("negative tailLines: %d %q", code, body)
	}
	if code, body := logs("pending", ""); code != 200 || body != "" {
		t.Errorf("unscheduled pod: %d %q, want an empty 200", code, body)
	}
	if code, body := logs("web", "container=missing"); code != 400 || !strings.Contains(statusMessage(t, body), `container "missing" in pod "web" is not valid`) {
		t.Errorf("unknown container: %d %q", code, body)
	}

	// Without kubelet client credentials the kubelet is not reached.
	bare := New(objs, jsonResponder{}, nil, nil)
	code, body := serve(func(w http.ResponseWriter, r *http.Request) {
		bare.ServePodLog(w, r, Request{Namespace: "ns", Name: "web"})
	}, http.MethodGet, "/log?container=app")
	if code != 503 || statusMessage(t, body) != "the apiserver has no kubelet client credentials" {
		t.Errorf("without credentials: %d %q", code, body)
	}
}

func TestNodeProxy(t *testing.T) {
	hs, clientTLS := kubeletServer(t)
	objs := &fakeObjects{nodes: map[string]*corev1.Node{"n1": kubeletNode(t, hs)}}
	p := New(objs, jsonResponder{}, clientTLS, nil)
	node := func(name, rest, target string) (int, string) {
		return serve(func(w http.ResponseWriter, r *http.Request) {
			p.ServeNodeProxy(w, r, Request{Name: name, Rest: rest})
		}, http.MethodGet, target)
	}
	if code, body := node("n1", "stats/summary", "/api/v1/nodes/n1/proxy/stats/summary?only_cpu_and_memory=true"); code != 200 || body != "kubelet /stats/summary?only_cpu_and_memory=true" {
		t.Errorf("nodes/proxy: %d %q", code, body)
	}
	if code, _ := node("gone", "", "/api/v1/nodes/gone/proxy/"); code != 404 {
		t.Errorf("missing node: %d, want 404", code)
	}
	objs.nodes["bare"] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
	if code, body := node("bare", "", "/api/v1/nodes/bare/proxy/"); code != 503 || !strings.HasPrefix(statusMessage(t, body), "no preferred addresses found") {
		t.Errorf("node without addresses: %d %q", code, body)
	}
}

func TestPodStreamRefusals(t *testing.T) {
	p := New(&fakeObjects{}, jsonResponder{}, nil, nil)
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	code, body := serve(func(w http.ResponseWriter, r *http.Request) { p.ServePodStream(w, r, done, "attach") }, http.MethodPost, "/attach")
	if code != 400 || statusMessage(t, body) != "cannot attach to a container in a completed pod; current phase is Succeeded" {
		t.Errorf("attach to a completed pod: %d %q", code, body)
	}
	unscheduled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	code, body = serve(func(w http.ResponseWriter, r *http.Request) { p.ServePodPortForward(w, r, unscheduled) }, http.MethodPost, "/portforward")
	if code != 400 || statusMessage(t, body) != "pod new does not have a host assigned" {
		t.Errorf("port-forward to an unscheduled pod: %d %q", code, body)
	}
}
