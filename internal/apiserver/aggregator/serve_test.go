package aggregator

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/registry"
)

// fakeHost is a server with one Service whose single endpoint is backend.
type fakeHost struct {
	mu          sync.Mutex
	apiServices []*apiregistrationv1.APIService
	service     *corev1.Service
	backend     string // host:port; "" for no endpoint
	ready       chan struct{}
	// statusWritten, when set, is called with each APIService whose status was written.
	statusWritten func(*apiregistrationv1.APIService)
}

func (h *fakeHost) Ready() <-chan struct{} { return h.ready }

func (h *fakeHost) APIServices() ([]*apiregistrationv1.APIService, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*apiregistrationv1.APIService
	for _, s := range h.apiServices {
		out = append(out, s.DeepCopy())
	}
	return out, nil
}

func (h *fakeHost) ServesGroup(group string) bool { return group == "apps" }

func (h *fakeHost) ServiceRevisions(string, string) (int64, []int64) { return 1, nil }

func (h *fakeHost) Service(_ context.Context, namespace, name string) (*corev1.Service, error) {
	if h.service == nil || h.service.Namespace != namespace || h.service.Name != name {
		return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
	}
	return h.service, nil
}

func (h *fakeHost) EndpointSlices(context.Context, string, string) ([]*discoveryv1.EndpointSlice, error) {
	if h.backend == "" {
		return nil, nil
	}
	return []*discoveryv1.EndpointSlice{{}}, nil
}

func (h *fakeHost) ServiceEndpoint(context.Context, *corev1.Service, string, string) (string, error) {
	if h.backend == "" {
		return "", apierrors.NewServiceUnavailable("no endpoints available")
	}
	return h.backend, nil
}

func (h *fakeHost) UpdateAPIServiceStatus(_ context.Context, name string, update func(*apiregistrationv1.APIService)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.apiServices {
		if s.Name == name {
			update(s)
			if h.statusWritten != nil {
				h.statusWritten(s)
			}
			return nil
		}
	}
	return apierrors.NewNotFound(apiregistrationv1.SchemeGroupVersion.WithResource("apiservices").GroupResource(), name)
}

func (h *fakeHost) LocalDiscovery() ([]byte, []byte) {
	return []byte(`{"kind":"APIGroupList","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}}]}`),
		[]byte(`{"kind":"APIGroupDiscoveryList","items":[]}`)
}

func (h *fakeHost) WriteError(w http.ResponseWriter, _ *http.Request, err error) {
	st := apierrors.NewInternalError(err).Status()
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	}
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

func (h *fakeHost) condition(name string) *apiregistrationv1.APIServiceCondition {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.apiServices {
		if s.Name != name {
			continue
		}
		for i := range s.Status.Conditions {
			if s.Status.Conditions[i].Type == apiregistrationv1.Available {
				c := s.Status.Conditions[i]
				return &c
			}
		}
	}
	return nil
}

// wardle serves discovery for wardle.example.com/v1 and echoes everything else with the
// front-proxy headers it received.
func wardle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/apis/wardle.example.com/v1" {
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{GroupVersion: "wardle.example.com/v1",
			APIResources: []metav1.APIResource{{Name: "flunders", Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get", "list"}}}})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "user": r.Header.Get(RemoteUserHeader), "groups": r.Header.Values(RemoteGroupHeader)})
}

func wardleAPIService() *apiregistrationv1.APIService {
	port := int32(443)
	return &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.wardle.example.com"}, Spec: apiregistrationv1.APIServiceSpec{
		Group: "wardle.example.com", Version: "v1", GroupPriorityMinimum: 2000, VersionPriority: 100, InsecureSkipTLSVerify: true,
		Service: &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "api", Port: &port}}}
}

func get(t *testing.T, a *Aggregator, path string, user registry.User) (handled bool, code int, body string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(RemoteUserHeader, "forged")
	r = r.WithContext(registry.WithUser(r.Context(), user))
	w := httptest.NewRecorder()
	handled = a.Serve(w, r, nil)
	return handled, w.Code, w.Body.String()
}

func TestAvailableAPIServiceIsProxied(t *testing.T) {
	a, host := proxiedWardle(t, wardle)
	if c := host.condition("v1.wardle.example.com"); c.Reason != "Passed" {
		t.Fatalf("Available condition %+v, want True/Passed", c)
	}
	handled, code, body := get(t, a, "/apis/wardle.example.com/v1/namespaces/x/flunders", registry.User{Name: "alice", Groups: []string{"devs"}})
	if !handled || code != 200 {
		t.Fatalf("proxied request: handled=%v code=%d body=%s", handled, code, body)
	}
	var seen struct {
		Path, User string
		Groups     []string
	}
	_ = json.Unmarshal([]byte(body), &seen)
	if seen.Path != "/apis/wardle.example.com/v1/namespaces/x/flunders" || seen.User != "alice" || strings.Join(seen.Groups, ",") != "devs" {
		t.Errorf("backend saw %+v, want alice in devs (the forged header replaced)", seen)
	}
	// /apis/<group> is answered from what was learnt; the merged /apis lists the
	// aggregated group after the local ones.
	if handled, code, body := get(t, a, "/apis/wardle.example.com", registry.User{Name: "alice"}); !handled || code != 200 || !strings.Contains(body, `"preferredVersion":{"groupVersion":"wardle.example.com/v1"`) {
		t.Errorf("/apis/wardle.example.com: handled=%v %d %s", handled, code, body)
	}
	var groups metav1.APIGroupList
	if err := json.Unmarshal(a.DiscoveryRoot(false), &groups); err != nil || len(groups.Groups) != 2 || groups.Groups[0].Name != "apps" || groups.Groups[1].Name != "wardle.example.com" {
		t.Errorf("merged /apis: %+v %v", groups, err)
	}
	// Groups this server serves, and unknown ones, are not the aggregator's.
	if handled, _, _ := get(t, a, "/apis/other.example.com/v1/things", registry.User{Name: "alice"}); handled {
		t.Error("a group nobody registered was handled")
	}
}

func TestUnavailableAPIService(t *testing.T) {
	host := &fakeHost{apiServices: []*apiregistrationv1.APIService{wardleAPIService()}, ready: make(chan struct{})}
	a := New(host, nil, time.Hour, nil)
	services, _ := a.listAPIServices()
	a.reconcile(context.Background(), services)
	c := host.condition("v1.wardle.example.com")
	if c == nil || c.Status != apiregistrationv1.ConditionFalse || c.Reason != "ServiceNotFound" || c.Message != `service/api in "wardle" is not present` {
		t.Fatalf("Available condition %+v, want False/ServiceNotFound", c)
	}
	handled, code, body := get(t, a, "/apis/wardle.example.com/v1/flunders", registry.User{Name: "alice"})
	if !handled || code != http.StatusServiceUnavailable || !strings.Contains(body, "service unavailable") {
		t.Errorf("request to an unavailable APIService: handled=%v %d %s", handled, code, body)
	}

	// The Service appears without the port: ServicePortError; with it but no endpoint:
	// EndpointsNotFound.
	host.service = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "api"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8443}}}}
	services, _ = a.listAPIServices()
	a.reconcile(context.Background(), services)
	if c := host.condition("v1.wardle.example.com"); c == nil || c.Reason != "ServicePortError" {
		t.Errorf("without the port: %+v", c)
	}
	host.service.Spec.Ports[0].Port = 443
	services, _ = a.listAPIServices()
	a.reconcile(context.Background(), services)
	if c := host.condition("v1.wardle.example.com"); c == nil || c.Reason != "EndpointsNotFound" {
		t.Errorf("without endpoints: %+v", c)
	}
}

// proxiedWardle is an aggregator that has found wardle's APIService available, with
// wardle's backend answering through handler, and the host it runs in.
func proxiedWardle(t *testing.T, handler http.HandlerFunc) (*Aggregator, *fakeHost) {
	t.Helper()
	hs := httptest.NewTLSServer(handler)
	t.Cleanup(hs.Close)
	u, _ := url.Parse(hs.URL)
	host := &fakeHost{apiServices: []*apiregistrationv1.APIService{wardleAPIService()}, backend: u.Host, ready: make(chan struct{}),
		service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "api"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}}
	a := New(host, nil, time.Hour, nil)
	services, _ := a.listAPIServices()
	a.reconcile(context.Background(), services)
	if c := host.condition("v1.wardle.example.com"); c == nil || c.Status != apiregistrationv1.ConditionTrue {
		t.Fatalf("Available condition %+v, want True", c)
	}
	return a, host
}

// wardleDiscovery answers wardle's discovery, which the availability check reads.
func wardleDiscovery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/apis/wardle.example.com/v1" {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(metav1.APIResourceList{GroupVersion: "wardle.example.com/v1"})
	return true
}

// The aggregated server is told the front server's audit ID, whatever the client sent,
// so that its audit log can be joined with the front's.
func TestProxiedRequestCarriesTheAuditID(t *testing.T) {
	a, _ := proxiedWardle(t, func(w http.ResponseWriter, r *http.Request) {
		if !wardleDiscovery(w, r) {
			_, _ = w.Write([]byte(r.Header.Get("Audit-ID")))
		}
	})
	r := httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1/flunders", nil)
	r.Header.Set("Audit-ID", "sent-by-the-client")
	r = r.WithContext(registry.WithUser(r.Context(), registry.User{Name: "alice"}))
	w := httptest.NewRecorder()
	w.Header().Set("Audit-Id", "the-front-servers") // as the front's chain sets it
	if !a.Serve(w, r, nil) || w.Code != http.StatusOK {
		t.Fatalf("proxied request: %d %s", w.Code, w.Body)
	}
	if got := w.Body.String(); got != "the-front-servers" {
		t.Errorf("the backend saw Audit-ID %q, want the front server's", got)
	}
}

// A redirect from the aggregated server is refused rather than handed to the client,
// which would follow it with its credentials.
func TestBackendRedirectIsRefused(t *testing.T) {
	a, _ := proxiedWardle(t, func(w http.ResponseWriter, r *http.Request) {
		if !wardleDiscovery(w, r) {
			http.Redirect(w, r, "https://elsewhere.example.com/steal", http.StatusFound)
		}
	})
	handled, code, body := get(t, a, "/apis/wardle.example.com/v1/flunders", registry.User{Name: "alice"})
	if !handled || code != http.StatusBadGateway || !strings.Contains(body, "not permitted") {
		t.Errorf("a backend's redirect: handled=%v %d %q, want 502", handled, code, body)
	}
}

// Discovery of an aggregated group version gives up after discoveryTimeout; other
// requests (a watch, a long list) are not bounded by it.
func TestAggregatedDiscoveryTimesOut(t *testing.T) {
	defer func(d time.Duration) { discoveryTimeout = d }(discoveryTimeout)
	discoveryTimeout = 200 * time.Millisecond
	var slow atomic.Bool
	a, _ := proxiedWardle(t, func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
		}
		if !wardleDiscovery(w, r) {
			_, _ = w.Write([]byte("done"))
		}
	})
	slow.Store(true)
	if handled, code, body := get(t, a, "/apis/wardle.example.com/v1", registry.User{Name: "alice"}); !handled || code != http.StatusServiceUnavailable {
		t.Errorf("slow discovery: handled=%v %d %q, want 503", handled, code, body)
	}
	if handled, code, body := get(t, a, "/apis/wardle.example.com/v1/flunders", registry.User{Name: "alice"}); !handled || code != http.StatusOK || body != "done" {
		t.Errorf("a slow list: handled=%v %d %q, want 200 done", handled, code, body)
	}
}

// A client that reads Available=True finds its requests proxied: the condition is
// written once the aggregator serves the new state, not before.
func TestAvailableIsWrittenOnceServed(t *testing.T) {
	hs := httptest.NewTLSServer(http.HandlerFunc(wardle))
	t.Cleanup(hs.Close)
	u, _ := url.Parse(hs.URL)
	host := &fakeHost{apiServices: []*apiregistrationv1.APIService{wardleAPIService()}, backend: u.Host, ready: make(chan struct{}),
		service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "api"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}}
	a := New(host, nil, time.Hour, nil)
	written := 0
	host.statusWritten = func(svc *apiregistrationv1.APIService) {
		written++
		handled, code, body := get(t, a, "/apis/wardle.example.com/v1/namespaces/x/flunders", registry.User{Name: "alice"})
		if !handled || code != http.StatusOK {
			t.Errorf("a request as Available=True was written: handled=%v %d %s", handled, code, body)
		}
	}
	services, _ := a.listAPIServices()
	a.reconcile(context.Background(), services)
	if written != 1 {
		t.Fatalf("%d status writes, want 1", written)
	}
}
