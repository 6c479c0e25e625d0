package apiserver_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubectlproxy "k8s.io/kubectl/pkg/proxy"
	"k8s.io/utils/ptr"

	"mizzen/internal/hostaddr"
	"mizzen/internal/testing/apiserver"
)

// seenRequest is what a proxied backend received.
type seenRequest struct {
	Backend       string
	Method        string
	URI           string
	Body          string
	Authorization string
	ForwardedFor  string
	ForwardedURI  string
}

// recordingBackend answers every request with a JSON description of it and remembers
// the last one. An "Upgrade: mizzen-echo" request is switched to a line echo.
type recordingBackend struct {
	name string
	mu   sync.Mutex
	last seenRequest
}

func (b *recordingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Upgrade"), "mizzen-echo") {
		b.echo(w)
		return
	}
	if strings.HasSuffix(r.URL.Path, ".html") {
		// A page with a link from the root of the backend's site.
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<html><body><a href="/docs/index.html">docs</a></body></html>`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	seen := seenRequest{Backend: b.name, Method: r.Method, URI: r.URL.RequestURI(), Body: string(body),
		Authorization: r.Header.Get("Authorization"), ForwardedFor: r.Header.Get("X-Forwarded-For"),
		ForwardedURI: r.Header.Get("X-Forwarded-Uri")}
	b.mu.Lock()
	b.last = seen
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Backend", b.name)
	_ = json.NewEncoder(w).Encode(seen)
}

func (b *recordingBackend) echo(w http.ResponseWriter) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: mizzen-echo\r\n\r\n")
	_ = rw.Flush()
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = rw.WriteString("echo: " + line)
		_ = rw.Flush()
	}
}

func (b *recordingBackend) lastRequest() seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// hostIP is an IPv4 address of this machine that the pod proxy accepts (global
// unicast: upstream refuses loopback and link-local pod IPs).
func hostIP(t *testing.T) string {
	t.Helper()
	ip, err := hostaddr.PrimaryIPv4()
	if err != nil {
		t.Skipf("no routable IPv4 address: %v", err)
	}
	return ip.String()
}

// startBackend serves b on ip; tlsOn serves HTTPS with a self-signed certificate.
func startBackend(t *testing.T, ip string, b *recordingBackend, tlsOn bool) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(b)
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

// rawClient sends requests as the admin; redirects are returned, not followed.
type rawClient struct {
	base   string
	client *http.Client
}

func newRawClient(t *testing.T, cfg *rest.Config) *rawClient {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &rawClient{base: strings.TrimSuffix(cfg.Host, "/"), client: c}
}

func (c *rawClient) do(t *testing.T, method, path, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

func decodeSeen(t *testing.T, data []byte) seenRequest {
	t.Helper()
	var seen seenRequest
	if err := json.Unmarshal(data, &seen); err != nil {
		t.Fatalf("not the backend's answer: %v: %s", err, data)
	}
	return seen
}

// decodeStatus reads a metav1.Status error body.
func decodeStatus(t *testing.T, data []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status (%v): %s", err, data)
	}
	return st
}

func createPodWithIP(t *testing.T, client kubernetes.Interface, pod *v1.Pod, ip string) {
	t.Helper()
	ctx := context.Background()
	created, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip == "" {
		return
	}
	created.Status.PodIP = ip
	created.Status.PodIPs = []v1.PodIP{{IP: ip}}
	if _, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestPodProxy(t *testing.T) {
	ip := hostIP(t)
	srv := apiserver.StartServer(t)
	client := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()

	plain := &recordingBackend{name: "plain"}
	plainPort := startBackend(t, ip, plain, false)
	other := &recordingBackend{name: "other"}
	otherPort := startBackend(t, ip, other, false)
	secure := &recordingBackend{name: "secure"}
	securePort := startBackend(t, ip, secure, true)

	// "web" declares plain's port first, so it is the default.
	createPodWithIP(t, client, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: v1.PodSpec{
		Containers: []v1.Container{
			{Name: "noports", Image: "img"},
			{Name: "app", Image: "img", Ports: []v1.ContainerPort{{ContainerPort: int32(plainPort)}, {ContainerPort: int32(otherPort)}}},
		}}}, ip)
	createPodWithIP(t, client, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "loopback", Namespace: "default"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "app", Image: "img", Ports: []v1.ContainerPort{{ContainerPort: int32(plainPort)}}}}}}, "127.0.0.1")
	createPodWithIP(t, client, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "app", Image: "img"}}}}, "")

	raw := newRawClient(t, srv.AdminConfig)
	base := "/api/v1/namespaces/default/pods/"

	t.Run("methods, path, query and body reach the pod", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, body string
			wantBackend        string
			wantURI            string
		}{
			{method: http.MethodGet, path: "web/proxy/some/path?x=1&y=a%20b", wantBackend: "plain", wantURI: "/some/path?x=1&y=a%20b"},
			{method: http.MethodGet, path: "web/proxy/", wantBackend: "plain", wantURI: "/"},
			{method: http.MethodGet, path: "web/proxy/dir/", wantBackend: "plain", wantURI: "/dir/"},
			{method: http.MethodGet, path: fmt.Sprintf("web:%d/proxy/p", otherPort), wantBackend: "other", wantURI: "/p"},
			{method: http.MethodPost, path: fmt.Sprintf("web:%d/proxy/submit?x=1", plainPort), body: `{"a":1}`, wantBackend: "plain", wantURI: "/submit?x=1"},
			{method: http.MethodPut, path: "web/proxy/item/1", body: "put body", wantBackend: "plain", wantURI: "/item/1"},
			{method: http.MethodPatch, path: "web/proxy/item/1", body: "patch body", wantBackend: "plain", wantURI: "/item/1"},
			{method: http.MethodDelete, path: "web/proxy/item/1", wantBackend: "plain", wantURI: "/item/1"},
			{method: http.MethodOptions, path: "web/proxy/item", wantBackend: "plain", wantURI: "/item"},
			{method: http.MethodGet, path: fmt.Sprintf("https:web:%d/proxy/tls?q=2", securePort), wantBackend: "secure", wantURI: "/tls?q=2"},
		} {
			t.Run(tc.method+" "+tc.path, func(t *testing.T) {
				// The admin's client certificate authenticates; a stray Authorization
				// header must still not reach the pod.
				resp, data := raw.do(t, tc.method, base+tc.path, tc.body, http.Header{"Authorization": {"Bearer not-for-pods"}})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, data)
				}
				seen := decodeSeen(t, data)
				if seen.Backend != tc.wantBackend || seen.Method != tc.method || seen.URI != tc.wantURI || seen.Body != tc.body {
					t.Errorf("backend saw %+v, want %s %s %q at %s", seen, tc.method, tc.wantURI, tc.body, tc.wantBackend)
				}
				if seen.Authorization != "" {
					t.Errorf("the pod received the client's Authorization header %q", seen.Authorization)
				}
				if seen.ForwardedFor == "" {
					t.Errorf("no X-Forwarded-For")
				}
				wantForwardedURI := strings.SplitN(base+tc.path, "?", 2)[0]
				if seen.ForwardedURI != wantForwardedURI {
					t.Errorf("X-Forwarded-Uri %q, want %q", seen.ForwardedURI, wantForwardedURI)
				}
			})
		}
	})

	t.Run("links in HTML pages point back through the proxy", func(t *testing.T) {
		resp, data := raw.do(t, http.MethodGet, base+"web/proxy/page.html", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		if want := `href="` + base + `web/proxy/docs/index.html"`; !strings.Contains(string(data), want) {
			t.Errorf("page %s lacks %s", data, want)
		}
	})

	t.Run("HEAD", func(t *testing.T) {
		resp, _ := raw.do(t, http.MethodHead, base+"web/proxy/h", "", nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "plain" {
			t.Fatalf("status %d, X-Backend %q", resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		if got := plain.lastRequest(); got.Method != http.MethodHead || got.URI != "/h" {
			t.Errorf("backend saw %+v", got)
		}
	})

	t.Run("the bare proxy path redirects to the directory", func(t *testing.T) {
		resp, data := raw.do(t, http.MethodGet, base+"web/proxy?x=1", "", nil)
		if resp.StatusCode != http.StatusMovedPermanently {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		if loc := resp.Header.Get("Location"); loc != base+"web/proxy/?x=1" {
			t.Errorf("Location %q", loc)
		}
	})

	t.Run("client-go ProxyGet", func(t *testing.T) {
		data, err := client.CoreV1().Pods("default").ProxyGet("", "web", strconv.Itoa(otherPort), "via/client-go", map[string]string{"k": "v"}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen := decodeSeen(t, data); seen.Backend != "other" || seen.URI != "/via/client-go?k=v" {
			t.Errorf("backend saw %+v", seen)
		}
	})

	t.Run("an upgraded connection passes through", func(t *testing.T) {
		got := upgradeEcho(t, srv.AdminConfig, base+"web/proxy/ws", "hello\n")
		if got != "echo: hello\n" {
			t.Errorf("read %q through the upgraded connection", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			path     string
			wantCode int32
			wantMsg  string
		}{
			{path: "nope/proxy/", wantCode: http.StatusNotFound, wantMsg: `pods "nope" not found`},
			{path: "loopback/proxy/", wantCode: http.StatusBadRequest, wantMsg: "address not allowed"},
			{path: "pending/proxy/", wantCode: http.StatusBadRequest, wantMsg: "address not allowed"},
			{path: "a:b:c:d/proxy/", wantCode: http.StatusBadRequest, wantMsg: `invalid pod request "a:b:c:d"`},
			{path: "ftp:web:80/proxy/", wantCode: http.StatusBadRequest, wantMsg: `invalid pod request "ftp:web:80"`},
		} {
			t.Run(tc.path, func(t *testing.T) {
				resp, data := raw.do(t, http.MethodGet, base+tc.path, "", nil)
				st := decodeStatus(t, data)
				if int32(resp.StatusCode) != tc.wantCode || st.Code != tc.wantCode || st.Message != tc.wantMsg {
					t.Errorf("got %d %q, want %d %q", st.Code, st.Message, tc.wantCode, tc.wantMsg)
				}
			})
		}
	})

	t.Run("a pod that refuses the connection", func(t *testing.T) {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		closedPort := l.Addr().(*net.TCPAddr).Port
		l.Close()
		resp, data := raw.do(t, http.MethodGet, fmt.Sprintf("%sweb:%d/proxy/", base, closedPort), "", nil)
		st := decodeStatus(t, data)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(st.Message, "error trying to reach service:") {
			t.Errorf("got %d %q", resp.StatusCode, st.Message)
		}
	})

	t.Run("anonymous", func(t *testing.T) {
		anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := anon.Get(strings.TrimSuffix(srv.AdminConfig.Host, "/") + base + "web/proxy/")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// system:anonymous, whom RBAC does not let through, as upstream.
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %d: %s", resp.StatusCode, data)
		}
	})
}

// upgradeEcho opens base+path with "Upgrade: mizzen-echo" as the admin, writes line
// after the switch and returns the line read back.
func upgradeEcho(t *testing.T, cfg *rest.Config, path, line string) string {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: mizzen-echo\r\n\r\n", path, u.Host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if _, err := io.WriteString(conn, line); err != nil {
		t.Fatal(err)
	}
	got, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestServiceProxy(t *testing.T) {
	ip := hostIP(t)
	srv := apiserver.StartServer(t)
	client := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()

	ready := &recordingBackend{name: "ready"}
	readyPort := startBackend(t, ip, ready, false)
	notReady := &recordingBackend{name: "not-ready"}
	notReadyPort := startBackend(t, ip, notReady, false)

	createPodWithIP(t, client, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "app", Image: "img"}}}}, ip)

	service := func(name string) {
		t.Helper()
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.ServiceSpec{
			Ports: []v1.ServicePort{{Name: "http", Port: 80}, {Name: "admin", Port: 8080}}}}
		if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice := func(name, svc, portName string, port int, ep discoveryv1.Endpoint) {
		t.Helper()
		es := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(int32(port)), Protocol: ptr.To(v1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{ep},
		}
		if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, es, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podRef := &v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"}
	endpoint := func(ready bool, ref *v1.ObjectReference) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}, TargetRef: ref}
	}

	// "web": one ready endpoint on "http", and a not-ready one on "http" in another slice.
	service("web")
	slice("web-a", "web", "http", readyPort, endpoint(true, podRef))
	slice("web-b", "web", "http", notReadyPort, endpoint(false, podRef))
	slice("web-admin", "web", "admin", readyPort, discoveryv1.Endpoint{Addresses: []string{ip}, TargetRef: podRef}) // no condition: ready
	// "idle": only a not-ready endpoint. "empty": no slices. "stray": an endpoint
	// that is no pod's.
	service("idle")
	slice("idle-a", "idle", "http", notReadyPort, endpoint(false, podRef))
	service("empty")
	service("stray")
	slice("stray-a", "stray", "http", readyPort, endpoint(true, nil))

	raw := newRawClient(t, srv.AdminConfig)
	base := "/api/v1/namespaces/default/services/"

	t.Run("requests reach a ready endpoint only", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, body, wantURI string
		}{
			{method: http.MethodGet, path: "web:80/proxy/", wantURI: "/"},
			{method: http.MethodGet, path: "web:http/proxy/a/b?x=1", wantURI: "/a/b?x=1"},
			{method: http.MethodGet, path: "http:web:80/proxy/c", wantURI: "/c"},
			{method: http.MethodGet, path: "web:8080/proxy/admin", wantURI: "/admin"},
			{method: http.MethodPost, path: "web:http/proxy/form", body: "a=b", wantURI: "/form"},
			{method: http.MethodDelete, path: "web:80/proxy/item", wantURI: "/item"},
		} {
			t.Run(tc.method+" "+tc.path, func(t *testing.T) {
				// The endpoint is chosen at random: repeat so that a not-ready one
				// would be picked at least once if it were a candidate.
				for range 16 {
					resp, data := raw.do(t, tc.method, base+tc.path, tc.body, nil)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d: %s", resp.StatusCode, data)
					}
					seen := decodeSeen(t, data)
					if seen.Backend != "ready" || seen.Method != tc.method || seen.URI != tc.wantURI || seen.Body != tc.body {
						t.Fatalf("backend saw %+v, want ready %s %s %q", seen, tc.method, tc.wantURI, tc.body)
					}
				}
			})
		}
	})

	t.Run("kubectl get --raw", func(t *testing.T) {
		data, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/services/web:80/proxy/").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen := decodeSeen(t, data); seen.Backend != "ready" || seen.URI != "/" {
			t.Errorf("backend saw %+v", seen)
		}
		data, err = client.CoreV1().Services("default").ProxyGet("", "web", "http", "x", map[string]string{"q": "1"}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen := decodeSeen(t, data); seen.URI != "/x?q=1" {
			t.Errorf("ProxyGet: backend saw %+v", seen)
		}
	})

	t.Run("kubectl proxy", func(t *testing.T) {
		h, err := kubectlproxy.NewProxyHandler("/", nil, srv.AdminConfig, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		kp := httptest.NewServer(h)
		t.Cleanup(kp.Close)
		resp, err := http.Get(kp.URL + base + "web:80/proxy/through/kubectl?z=1")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		if seen := decodeSeen(t, data); seen.Backend != "ready" || seen.URI != "/through/kubectl?z=1" {
			t.Errorf("backend saw %+v", seen)
		}
	})

	t.Run("an upgraded connection passes through", func(t *testing.T) {
		if got := upgradeEcho(t, srv.AdminConfig, base+"web:80/proxy/ws", "hi\n"); got != "echo: hi\n" {
			t.Errorf("read %q through the upgraded connection", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			path     string
			wantCode int32
			wantMsg  string
		}{
			{path: "nope:80/proxy/", wantCode: http.StatusNotFound, wantMsg: `services "nope" not found`},
			{path: "web:81/proxy/", wantCode: http.StatusServiceUnavailable, wantMsg: `no service port 81 found for service "web"`},
			{path: "web:metrics/proxy/", wantCode: http.StatusServiceUnavailable, wantMsg: `no endpoints available for service "web:metrics"`},
			{path: "idle:80/proxy/", wantCode: http.StatusServiceUnavailable, wantMsg: `no endpoints available for service "idle:80"`},
			{path: "empty:http/proxy/", wantCode: http.StatusServiceUnavailable, wantMsg: `no endpoints available for service "empty:http"`},
			{path: "stray:80/proxy/", wantCode: http.StatusServiceUnavailable, wantMsg: `no endpoints available for service "stray:80"`},
			{path: "gopher:web:80/proxy/", wantCode: http.StatusBadRequest, wantMsg: `invalid service request "gopher:web:80"`},
		} {
			t.Run(tc.path, func(t *testing.T) {
				resp, data := raw.do(t, http.MethodGet, base+tc.path, "", nil)
				st := decodeStatus(t, data)
				if int32(resp.StatusCode) != tc.wantCode || st.Code != tc.wantCode || st.Message != tc.wantMsg {
					t.Errorf("got %d %q, want %d %q", st.Code, st.Message, tc.wantCode, tc.wantMsg)
				}
			})
		}
		_, err := client.CoreV1().Services("default").ProxyGet("", "idle", "80", "", nil).DoRaw(ctx)
		if !apierrors.IsServiceUnavailable(err) {
			t.Errorf("client-go sees %v, want a 503", err)
		}
	})
}

func TestProxyDiscovery(t *testing.T) {
	client := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	list, err := client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pods/proxy": "PodProxyOptions", "services/proxy": "ServiceProxyOptions"}
	wantVerbs := []string{"create", "delete", "get", "patch", "update"}
	for _, r := range list.APIResources {
		kind, ok := want[r.Name]
		if !ok {
			continue
		}
		delete(want, r.Name)
		if r.Kind != kind {
			t.Errorf("%s: kind %s, want %s", r.Name, r.Kind, kind)
		}
		if strings.Join(r.Verbs, ",") != strings.Join(wantVerbs, ",") {
			t.Errorf("%s: verbs %v, want %v", r.Name, r.Verbs, wantVerbs)
		}
	}
	if len(want) > 0 {
		t.Errorf("discovery lacks %v", want)
	}
}
