package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/pki"
	"mizzen/internal/testing/apiserver"
)

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// wardle is an aggregated API server for wardle.example.com/v1alpha1 that only lets in
// the front proxy, and records who it forwarded.
type wardle struct {
	url     string
	failing atomic.Bool
	mu      sync.Mutex
	seen    []http.Header // the forwarded requests' headers, discovery checks aside
}

func startWardle(t *testing.T, ip net.IP, serving tls.Certificate, frontProxyCA *x509.CertPool) *wardle {
	t.Helper()
	w := &wardle{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/wardle.example.com/v1alpha1", func(rw http.ResponseWriter, r *http.Request) {
		if w.failing.Load() {
			http.Error(rw, "broken", http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(&metav1.APIResourceList{
			TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "wardle.example.com/v1alpha1",
			APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get", "list"}}},
		})
	})
	mux.HandleFunc("GET /apis/wardle.example.com/v1alpha1/namespaces/{ns}/flunders", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.seen = append(w.seen, r.Header.Clone())
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"kind":"FlunderList","apiVersion":"wardle.example.com/v1alpha1","metadata":{},"items":[],"namespace":%q}`, r.PathValue("ns"))
	})
	hs := httptest.NewUnstartedServer(mux)
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	hs.Listener = l
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: frontProxyCA,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if cn := chains[0][0].Subject.CommonName; cn != "front-proxy-client" {
				return fmt.Errorf("client %q is not the front proxy", cn)
			}
			return nil
		}}
	// The wrong-CA step makes the apiserver refuse this server's certificate: expected.
	hs.Config.ErrorLog = log.New(io.Discard, "", 0)
	hs.StartTLS()
	t.Cleanup(hs.Close)
	w.url = hs.URL
	return w
}

func routableIPv4(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP
		}
	}
	t.Skip("no routable IPv4 address: EndpointSlices refuse loopback ones")
	return nil
}

// TestAggregation registers an APIService for a server of the test and walks its
// Available condition through upstream's reasons as the Service and its endpoints come,
// then proxies a request to it and lists it in discovery.
func TestAggregation(t *testing.T) {
	ip := routableIPv4(t)
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	dyn := dynamic.NewForConfigOrDie(srv.AdminConfig)

	// What aggregated servers learn from the apiserver.
	auth, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if auth.Data["requestheader-allowed-names"] != `["front-proxy-client"]` || auth.Data["requestheader-username-headers"] != `["X-Remote-User"]` ||
		auth.Data["requestheader-group-headers"] != `["X-Remote-Group"]` || auth.Data["requestheader-extra-headers-prefix"] != `["X-Remote-Extra-"]` ||
		!strings.Contains(auth.Data["client-ca-file"], "BEGIN CERTIFICATE") {
		t.Errorf("extension-apiserver-authentication: %v", auth.Data)
	}
	frontProxyCA := x509.NewCertPool()
	if !frontProxyCA.AppendCertsFromPEM([]byte(auth.Data["requestheader-client-ca-file"])) {
		t.Fatal("no requestheader-client-ca-file")
	}

	servingCA, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "wardle-ca")
	if err != nil {
		t.Fatal(err)
	}
	issued, err := servingCA.IssueServing("api.wardle.svc", []string{"api.wardle.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := issued.TLS()
	if err != nil {
		t.Fatal(err)
	}
	backend := startWardle(t, ip, serving, frontProxyCA)
	backend.failing.Store(true)
	_, portText, _ := net.SplitHostPort(strings.TrimPrefix(backend.url, "https://"))
	var backendPort int32
	fmt.Sscanf(portText, "%d", &backendPort)

	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha1.wardle.example.com"},
		"spec": map[string]any{
			"group": "wardle.example.com", "version": "v1alpha1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service":  map[string]any{"namespace": "wardle", "name": "api"},
			"caBundle": base64.StdEncoding.EncodeToString(servingCA.CertPEM),
		},
	}}
	if _, err := dyn.Resource(apiServicesGVR).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitAvailable := func(wantStatus, wantReason, wantMessage string) {
		t.Helper()
		var status, reason, message string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
			obj, err := dyn.Resource(apiServicesGVR).Get(ctx, "v1alpha1.wardle.example.com", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, c := range conditions {
				m := c.(map[string]any)
				if m["type"] == "Available" {
					status, reason, message = fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
				}
			}
			return status == wantStatus && reason == wantReason && strings.Contains(message, wantMessage), nil
		})
		if err != nil {
			t.Fatalf("Available %s %s %q, want %s %s containing %q", status, reason, message, wantStatus, wantReason, wantMessage)
		}
	}

	waitAvailable("False", "ServiceNotFound", `service/api in "wardle" is not present`)

	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wardle"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services("wardle").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "wardle"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAvailable("False", "ServicePortError", `service/api in "wardle" is not listening on port 443`)

	svc.Spec.Ports[0].Port = 443
	if _, err := client.CoreV1().Services("wardle").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable("False", "EndpointsNotFound", `cannot find endpointslices for service/api in "wardle"`)

	portName, notReady := "https", false
	slice, err := client.DiscoveryV1().EndpointSlices("wardle").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "api", Namespace: "wardle", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &backendPort}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAvailable("False", "MissingEndpoints", `endpointslices for service/api in "wardle" have no addresses with port name "https"`)

	ready := true
	slice.Endpoints[0].Conditions.Ready = &ready
	if _, err := client.DiscoveryV1().EndpointSlices("wardle").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable("False", "FailedDiscoveryCheck", "bad status from "+backend.url+"/apis/wardle.example.com/v1alpha1: 500")
	// Requests to an unavailable APIService are refused.
	if _, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/x/flunders").DoRaw(ctx); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("a request while unavailable: %v", err)
	}

	backend.failing.Store(false)
	waitAvailable("True", "Passed", "all checks passed")

	// A request goes through as the caller, whatever front-proxy headers it sent.
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/shop/flunders").
		SetHeader("X-Remote-User", "mallory").SetHeader("X-Remote-Group", "system:masters").DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), `"namespace":"shop"`) {
		t.Fatalf("proxied request: %v %s", err, body)
	}
	backend.mu.Lock()
	seen := backend.seen[len(backend.seen)-1]
	backend.mu.Unlock()
	if got := seen.Values("X-Remote-User"); !slices.Equal(got, []string{"system:admin"}) {
		t.Errorf("X-Remote-User %v, want [system:admin]", got)
	}
	if got := seen.Values("X-Remote-Group"); !slices.Equal(got, []string{"system:masters", "system:authenticated"}) {
		t.Errorf("X-Remote-Group %v, want [system:masters system:authenticated]", got)
	}
	if seen.Get("Authorization") != "" {
		t.Error("the caller's credentials reached the backend")
	}

	// Discovery lists the group, legacy and aggregated.
	groups, err := client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool {
		return g.Name == "wardle.example.com" && g.PreferredVersion.GroupVersion == "wardle.example.com/v1alpha1"
	}) {
		t.Errorf("discovery lacks wardle.example.com: %+v", groups.Groups)
	}
	group, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com").DoRaw(ctx)
	if err != nil || !strings.Contains(string(group), `"kind":"APIGroup"`) {
		t.Errorf("/apis/wardle.example.com: %v %s", err, group)
	}
	_, lists, err := client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lists, func(l *metav1.APIResourceList) bool {
		return l.GroupVersion == "wardle.example.com/v1alpha1" && len(l.APIResources) == 1 && l.APIResources[0].Kind == "Flunder"
	}) {
		t.Error("aggregated discovery lacks wardle.example.com/v1alpha1 flunders")
	}

	// A CA bundle that does not sign the backend's certificate fails the check.
	otherCA, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	current, err := dyn.Resource(apiServicesGVR).Get(ctx, "v1alpha1.wardle.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(current.Object, base64.StdEncoding.EncodeToString(otherCA.CertPEM), "spec", "caBundle")
	if _, err := dyn.Resource(apiServicesGVR).Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable("False", "FailedDiscoveryCheck", "certificate")

	// Gone: no longer routed nor listed.
	if err := dyn.Resource(apiServicesGVR).Delete(ctx, "v1alpha1.wardle.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		groups, err := client.Discovery().ServerGroups()
		return err == nil && !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == "wardle.example.com" }), nil
	})
	if err != nil {
		t.Error("wardle.example.com still in discovery after its APIService was deleted")
	}
	if _, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/x/flunders").DoRaw(ctx); !apierrors.IsNotFound(err) {
		t.Errorf("a request after the APIService was deleted: %v", err)
	}
}
