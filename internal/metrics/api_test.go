package metrics

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"mizzen/internal/delegatedauth"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/pki"
)

// testCAs are the cluster CA and the front-proxy CA of a test.
type testCAs struct {
	cluster, frontProxy *pki.CA
}

func newTestCAs(t *testing.T) testCAs {
	t.Helper()
	dir := t.TempDir()
	cluster, err := pki.LoadOrCreateCA(filepath.Join(dir, "cluster"), "ca", "cluster-ca")
	if err != nil {
		t.Fatal(err)
	}
	front, err := pki.LoadOrCreateCA(filepath.Join(dir, "front"), "ca", "front-proxy-ca")
	if err != nil {
		t.Fatal(err)
	}
	return testCAs{cluster: cluster, frontProxy: front}
}

func (c testCAs) authenticator() *delegatedauth.CertAuthenticator {
	return &delegatedauth.CertAuthenticator{ClientCAs: c.cluster.Pool(), RequestHeader: &delegatedauth.RequestHeaderConfig{
		CAs: c.frontProxy.Pool(), AllowedNames: []string{"front-proxy-client"},
		UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraPrefixes: []string{"X-Remote-Extra-"},
	}}
}

func clientCert(t *testing.T, ca *pki.CA, user string, groups []string) tls.Certificate {
	t.Helper()
	issued, err := ca.IssueClient(user, groups)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := issued.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// apiFixture is a metrics handler over HTTPS with two nodes and three pods, every one
// of them sampled twice except node-b.
type apiFixture struct {
	url     string
	clients map[string]*http.Client
	codecs  serializer.CodecFactory
}

func newAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	cas := newTestCAs(t)
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"zone": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{"zone": "b"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-c", Labels: map[string]string{"zone": "a"}}},
	} {
		_ = nodes.Add(n)
	}
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", Labels: map[string]string{"app": "db"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Labels: map[string]string{"app": "web"}}},
	} {
		_ = pods.Add(p)
	}
	podSummary := func(ns, name string, at time.Duration, cpu uint64) nodeserver.PodStats {
		c, m := cpuMem(reading{at: at, cpu: cpu, ws: 64 << 20})
		return nodeserver.PodStats{PodRef: nodeserver.PodReference{Namespace: ns, Name: name},
			Containers: []nodeserver.ContainerStats{{Name: "main", CPU: c, Memory: m}}}
	}
	scrape := func(at time.Duration, cpu uint64) map[string]*nodeserver.Summary {
		a := summary(reading{at: at, cpu: cpu, ws: 1 << 30}, nil)
		a.Pods = []nodeserver.PodStats{podSummary("default", "web", at, cpu/10), podSummary("default", "db", at, cpu/20), podSummary("shop", "web", at, cpu/40)}
		c := summary(reading{at: at, cpu: cpu * 2, ws: 2 << 30}, nil)
		return map[string]*nodeserver.Summary{"node-a": a, "node-c": c}
	}
	store := NewStore()
	store.Update(scrape(0, 0))
	store.Update(scrape(10*time.Second, 20e9))

	h, err := NewAPIHandler(store, corelisters.NewNodeLister(nodes), corelisters.NewPodLister(pods), cas.authenticator(), nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := cas.cluster.IssueServing("metrics-server", []string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	servingPair, err := serving.TLS()
	if err != nil {
		t.Fatal(err)
	}
	trusted := cas.cluster.Pool()
	trusted.AddCert(cas.frontProxy.Cert)
	hs := httptest.NewUnstartedServer(h)
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{servingPair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: trusted}
	hs.StartTLS()
	t.Cleanup(hs.Close)

	client := func(cert *tls.Certificate, forwardAs string) *http.Client {
		cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a test server
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		var rt http.RoundTripper = &http.Transport{TLSClientConfig: cfg}
		if forwardAs != "" {
			rt = headerTransport{next: rt, user: forwardAs}
		}
		return &http.Client{Transport: rt}
	}
	scheme := runtime.NewScheme()
	_ = metricsv1beta1.AddToScheme(scheme)
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return &apiFixture{url: hs.URL, codecs: serializer.NewCodecFactory(scheme), clients: map[string]*http.Client{
		"anonymous":   client(nil, ""),
		"front-proxy": client(new(clientCert(t, cas.frontProxy, "front-proxy-client", nil)), "alice"),
		"admin":       client(new(clientCert(t, cas.cluster, "admin", []string{"system:masters"})), ""),
	}}
}

type headerTransport struct {
	next http.RoundTripper
	user string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Remote-User", h.user)
	return h.next.RoundTrip(r)
}

func (f *apiFixture) do(t *testing.T, who, method, path, accept string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, f.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := f.clients[who].Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

func TestAPI(t *testing.T) {
	f := newAPIFixture(t)
	names := func(t *testing.T, body []byte) []string {
		var list struct {
			Kind  string `json:"kind"`
			Items []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		out := []string{}
		for _, it := range list.Items {
			n := it.Metadata.Name
			if it.Metadata.Namespace != "" {
				n = it.Metadata.Namespace + "/" + n
			}
			out = append(out, n)
		}
		return out
	}
	for _, tc := range []struct {
		name, who, method, path string
		wantCode                int
		wantNames               []string // for lists
		wantBody                string   // a substring
	}{
		{"anonymous callers are refused", "anonymous", "GET", "/apis/metrics.k8s.io/v1beta1/nodes", 401, nil, `"reason":"Unauthorized"`},
		{"health needs no credentials", "anonymous", "GET", "/healthz", 200, nil, "ok"},
		{"nodes sampled twice are listed", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes", 200, []string{"node-a", "node-c"}, `"kind":"NodeMetricsList"`},
		{"a label selector applies to the nodes' labels", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=zone%3Da", 200, []string{"node-a", "node-c"}, ""},
		{"a selector no node matches", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=zone%3Db", 200, []string{}, ""},
		{"a bad selector", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=zone%3D%3D%3Da", 400, nil, `"reason":"BadRequest"`},
		{"one node: 2 cores and 1Gi", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes/node-a", 200, nil, `"usage":{"cpu":"2","memory":"1Gi"}`},
		{"a node without two samples", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes/node-b", 404, nil, `nodemetrics.metrics.k8s.io \"node-b\" not found`},
		{"a node that does not exist", "admin", "GET", "/apis/metrics.k8s.io/v1beta1/nodes/nope", 404, nil, `"reason":"NotFound"`},
		{"pods of every namespace", "admin", "GET", "/apis/metrics.k8s.io/v1beta1/pods", 200, []string{"default/db", "default/web", "shop/web"}, `"kind":"PodMetricsList"`},
		{"pods of a namespace", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", 200, []string{"default/db", "default/web"}, ""},
		{"pods by label across namespaces", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/pods?labelSelector=app%3Dweb", 200, []string{"default/web", "shop/web"}, ""},
		{"one pod: 200m", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web", 200, nil, `"containers":[{"name":"main","usage":{"cpu":"200m","memory":"64Mi"}}]`},
		{"a pod of another namespace", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/db", 404, nil, `podmetrics.metrics.k8s.io \"db\" not found`},
		{"writes are not supported", "front-proxy", "DELETE", "/apis/metrics.k8s.io/v1beta1/nodes/node-a", 405, nil, `"reason":"MethodNotAllowed"`},
		{"discovery of the version", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1", 200, nil, `{"name":"nodes","singularName":"","namespaced":false,"kind":"NodeMetrics","verbs":["get","list"]}`},
		{"discovery of the group", "front-proxy", "GET", "/apis/metrics.k8s.io", 200, nil, `"preferredVersion":{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}`},
		{"an unknown path", "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/services", 404, nil, `"reason":"NotFound"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := f.do(t, tc.who, tc.method, tc.path, "")
			if code != tc.wantCode || !strings.Contains(string(body), tc.wantBody) {
				t.Fatalf("%d %s, want %d containing %s", code, body, tc.wantCode, tc.wantBody)
			}
			if tc.wantNames != nil {
				if got := names(t, body); !reflect.DeepEqual(got, tc.wantNames) {
					t.Errorf("items %v, want %v", got, tc.wantNames)
				}
			}
		})
	}
}

func TestAPIProtobuf(t *testing.T) {
	f := newAPIFixture(t)
	// kubectl top asks for protobuf only.
	code, contentType, body := f.do(t, "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "application/vnd.kubernetes.protobuf")
	if code != 200 || contentType != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("%d %s", code, contentType)
	}
	info, ok := runtime.SerializerInfoForMediaType(f.codecs.SupportedMediaTypes(), contentType)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	obj, _, err := f.codecs.DecoderToVersion(info.Serializer, metricsv1beta1.SchemeGroupVersion).Decode(body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, ok := obj.(*metricsv1beta1.PodMetricsList)
	if !ok || len(list.Items) != 2 {
		t.Fatalf("decoded %#v", obj)
	}
	web := list.Items[1]
	if web.Name != "web" || web.Window.Duration != 10*time.Second || web.Containers[0].Usage.Cpu().MilliValue() != 200 {
		t.Errorf("web: %+v", web)
	}

	// An error for a protobuf client is still a Status it can read.
	code, contentType, body = f.do(t, "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes/node-b", "application/vnd.kubernetes.protobuf")
	if code != 404 {
		t.Fatalf("%d %s", code, body)
	}
	info, _ = runtime.SerializerInfoForMediaType(f.codecs.SupportedMediaTypes(), contentType)
	obj, _, err = f.codecs.UniversalDeserializer().Decode(body, nil, nil)
	if status, ok := obj.(*metav1.Status); err != nil || !ok || status.Reason != metav1.StatusReasonNotFound {
		t.Errorf("error body (%s): %#v, %v", info.MediaType, obj, err)
	}

	// A client that accepts only a Table gets 406.
	code, _, body = f.do(t, "front-proxy", "GET", "/apis/metrics.k8s.io/v1beta1/nodes", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if code != http.StatusNotAcceptable {
		t.Errorf("Table only: %d %s", code, body)
	}
}

// fakeSource answers summaries from a function of the node and the scrape number.
type fakeSource struct {
	scrape int
	answer func(node string, scrape int) (*nodeserver.Summary, error)
}

func (f *fakeSource) Summary(_ context.Context, node *corev1.Node) (*nodeserver.Summary, error) {
	return f.answer(node.Name, f.scrape)
}

type nodeList []*corev1.Node

func (l nodeList) List(labels.Selector) ([]*corev1.Node, error) { return l, nil }

func TestScraper(t *testing.T) {
	nodes := nodeList{{ObjectMeta: metav1.ObjectMeta{Name: "good"}}, {ObjectMeta: metav1.ObjectMeta{Name: "flaky"}}, {ObjectMeta: metav1.ObjectMeta{Name: "down"}}}
	src := &fakeSource{answer: func(node string, scrape int) (*nodeserver.Summary, error) {
		switch {
		case node == "down", node == "flaky" && scrape == 2:
			return nil, errors.New("connection refused")
		}
		at := time.Duration(scrape) * 10 * time.Second
		return summary(reading{at: at, cpu: uint64(scrape) * 10e9, ws: 1}, nil), nil
	}}
	store := NewStore()
	s := &Scraper{Nodes: nodes, Source: src, Store: store, Resolution: time.Minute}
	has := func() []string {
		var out []string
		for _, n := range nodes {
			if _, ok := store.Node(n.Name); ok {
				out = append(out, n.Name)
			}
		}
		return out
	}
	for scrape, want := range [][]string{nil, {"good", "flaky"}, {"good"}} {
		src.scrape = scrape
		s.ScrapeOnce(context.Background())
		if got := has(); !reflect.DeepEqual(got, want) {
			t.Errorf("after scrape %d: nodes with metrics %v, want %v", scrape+1, got, want)
		}
	}
	if u, _ := store.Node("good"); u.NanoCores != 1e9 {
		t.Errorf("good: %+v, want 1 core", u)
	}
}
