package ingress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// echo is a backend answering with its name and the request it saw, and echoing the
// bytes of an Upgrade: echo connection.
func echo(t testing.TB, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "echo" {
			conn, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			defer conn.Close()
			fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			rw.Flush()
			line, _ := rw.ReadString('\n')
			fmt.Fprintf(rw, "%s says %s", name, line)
			rw.Flush()
			return
		}
		if d := r.URL.Query().Get("sleep"); d != "" {
			ms, _ := strconv.Atoi(d)
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		_ = json.NewEncoder(w).Encode(seen{Backend: name, Host: r.Host, Path: r.URL.Path, Header: r.Header})
	}))
	t.Cleanup(s.Close)
	return s
}

type seen struct {
	Backend string
	Host    string
	Path    string
	Header  http.Header
}

// service returns a Service with ports "http" 80 -> targetPort "web", and an
// EndpointSlice per backend (each an httptest server on its own port) with ready set.
func service(name string, ready bool, backends ...*httptest.Server) []any {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}}}
	objs := []any{svc}
	for i, b := range backends {
		addr := b.Listener.Addr().(*net.TCPAddr)
		port, portName := int32(addr.Port), "http"
		objs = append(objs, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr.IP.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		})
	}
	return objs
}

func defaultClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "mizzen", Annotations: map[string]string{DefaultClassAnnotation: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}
}

func byName(svc, port string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: port}}}
}

func byNumber(svc string, port int32) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func path(p string, b networkingv1.IngressBackend) networkingv1.HTTPIngressPath {
	typ := networkingv1.PathTypePrefix
	return networkingv1.HTTPIngressPath{Path: p, PathType: &typ, Backend: b}
}

type harness struct {
	t      testing.TB
	client kubernetes.Interface
	srv    *Server
	http   *http.Client
}

func start(t testing.TB, objs ...any) *harness {
	t.Helper()
	var runtimeObjs []any
	runtimeObjs = append(runtimeObjs, objs...)
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, client: client}
	for _, o := range runtimeObjs {
		h.create(o)
	}
	srv, err := Start(ctx, client, Options{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", StatusAddress: "192.0.2.7", ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := srv.Wait(); err != nil {
			t.Error(err)
		}
	})
	h.srv = srv
	h.http = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	return h
}

func (h *harness) create(o any) {
	h.t.Helper()
	ctx := context.Background()
	var err error
	switch o := o.(type) {
	case *corev1.Service:
		_, err = h.client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = h.client.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Secret:
		_, err = h.client.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *networkingv1.IngressClass:
		_, err = h.client.NetworkingV1().IngressClasses().Create(ctx, o, metav1.CreateOptions{})
	case *networkingv1.Ingress:
		_, err = h.client.NetworkingV1().Ingresses(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case []any:
		for _, x := range o {
			h.create(x)
		}
	default:
		h.t.Fatalf("cannot create %T", o)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// get requests host+path over scheme and returns the status and what the backend saw.
func (h *harness) get(scheme, host, p string) (int, seen, *http.Response) {
	h.t.Helper()
	addr := h.srv.HTTPAddr().String()
	if scheme == "https" {
		addr = h.srv.HTTPSAddr().String()
	}
	req, err := http.NewRequest("GET", scheme+"://"+addr+p, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Host = host
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var s seen
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &s); err != nil {
			h.t.Fatalf("%s: %v", body, err)
		}
	}
	return resp.StatusCode, s, resp
}

// eventually retries until check passes; the configuration follows the informers.
func eventually(t testing.TB, check func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) waitBackend(scheme, host, p, backend string) seen {
	h.t.Helper()
	var got seen
	eventually(h.t, func() error {
		code, s, _ := h.get(scheme, host, p)
		if code != http.StatusOK || s.Backend != backend {
			return fmt.Errorf("%s %s%s: %d from %q, want 200 from %s", scheme, host, p, code, s.Backend, backend)
		}
		got = s
		return nil
	})
	return got
}

func TestProxyRoutesAndHeaders(t *testing.T) {
	a1, a2, b := echo(t, "a1"), echo(t, "a2"), echo(t, "b")
	h := start(t, defaultClass(), service("a", true, a1, a2), service("b", true, b), service("down", false, echo(t, "down")),
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
				rule("a.test", path("/", byName("a", "http")), path("/b", byNumber("b", 80)), path("/down", byName("down", "http"))),
				rule("*.wild.test", path("/", byNumber("b", 80))),
			}}})
	got := h.waitBackend("http", "a.test", "/b/x", "b")

	t.Run("forwarded headers", func(t *testing.T) {
		if got.Host != "a.test" || got.Path != "/b/x" {
			t.Errorf("backend saw host %q path %q", got.Host, got.Path)
		}
		want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1", "X-Forwarded-Host": "a.test",
			"X-Forwarded-Proto": "http", "X-Forwarded-Port": strconv.Itoa(h.srv.HTTPAddr().(*net.TCPAddr).Port)}
		for k, v := range want {
			if g := got.Header.Get(k); g != v {
				t.Errorf("%s = %q, want %q", k, g, v)
			}
		}
		// A client's own X-Forwarded-For is not passed on as truth.
		req, _ := http.NewRequest("GET", "http://"+h.srv.HTTPAddr().String()+"/b", nil)
		req.Host = "a.test"
		req.Header.Set("X-Forwarded-For", "6.6.6.6")
		resp, err := h.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var s seen
		_ = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if g := s.Header.Get("X-Forwarded-For"); g != "127.0.0.1" {
			t.Errorf("X-Forwarded-For with a spoofed header = %q", g)
		}
	})
	t.Run("round robin over ready endpoints", func(t *testing.T) {
		count := map[string]int{}
		for range 10 {
			_, s, _ := h.get("http", "a.test", "/")
			count[s.Backend]++
		}
		if count["a1"] != 5 || count["a2"] != 5 {
			t.Errorf("10 requests went %v, want 5 to each of a1 and a2", count)
		}
	})
	t.Run("wildcard host", func(t *testing.T) {
		if code, s, _ := h.get("http", "x.wild.test", "/"); code != 200 || s.Backend != "b" {
			t.Errorf("x.wild.test: %d %q", code, s.Backend)
		}
		if code, _, _ := h.get("http", "y.x.wild.test", "/"); code != http.StatusNotFound {
			t.Errorf("y.x.wild.test: %d, want 404", code)
		}
	})
	t.Run("404 when nothing matches, 503 without a ready endpoint", func(t *testing.T) {
		if code, _, _ := h.get("http", "nobody.test", "/"); code != http.StatusNotFound {
			t.Errorf("unknown host: %d, want 404", code)
		}
		if code, _, _ := h.get("http", "a.test", "/down"); code != http.StatusServiceUnavailable {
			t.Errorf("no ready endpoint: %d, want 503", code)
		}
	})
	t.Run("status names the listening address", func(t *testing.T) {
		eventually(t, func() error {
			ing, err := h.client.NetworkingV1().Ingresses("ns").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].IP != "192.0.2.7" {
				return fmt.Errorf("status.loadBalancer.ingress = %+v", lb)
			}
			return nil
		})
	})
	t.Run("upgrade", func(t *testing.T) {
		conn, err := net.Dial("tcp", h.srv.HTTPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "GET /b HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade answered %s", resp.Status)
		}
		fmt.Fprintf(conn, "ping\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "b says ping\n" {
			t.Errorf("after the upgrade: %q, %v", line, err)
		}
	})
	t.Run("HTTP/2 over TLS", func(t *testing.T) {
		code, s, resp := h.get("https", "a.test", "/b")
		if code != 200 || s.Backend != "b" || resp.ProtoMajor != 2 {
			t.Errorf("https: %d from %q over %s", code, s.Backend, resp.Proto)
		}
		if g := s.Header.Get("X-Forwarded-Proto"); g != "https" {
			t.Errorf("X-Forwarded-Proto = %q, want https", g)
		}
	})
}

// TestConfigurationSwap changes the routes while a request is in flight: the request
// completes, and the next one follows the new routes.
func TestConfigurationSwap(t *testing.T) {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("h.test", path("/", byNumber("old", 80)))}}}
	h := start(t, defaultClass(), service("old", true, echo(t, "old")), service("new", true, echo(t, "new")), ing)
	h.waitBackend("http", "h.test", "/", "old")

	done := make(chan error, 1)
	go func() {
		code, s, _ := h.get("http", "h.test", "/slow?sleep=1500")
		if code != 200 || s.Backend != "old" {
			done <- fmt.Errorf("in-flight request: %d from %q", code, s.Backend)
			return
		}
		done <- nil
	}()
	time.Sleep(200 * time.Millisecond)
	up := ing.DeepCopy()
	up.Spec.Rules = []networkingv1.IngressRule{rule("h.test", path("/", byNumber("new", 80)))}
	if _, err := h.client.NetworkingV1().Ingresses("ns").Update(context.Background(), up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitBackend("http", "h.test", "/", "new")
	if err := <-done; err != nil {
		t.Error(err)
	}
	// Deleting the Service leaves the route with no endpoint: 503.
	if err := h.client.CoreV1().Services("ns").Delete(context.Background(), "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if code, _, _ := h.get("http", "h.test", "/"); code != http.StatusServiceUnavailable {
			return fmt.Errorf("after the Service's deletion: %d, want 503", code)
		}
		return nil
	})
}

// TestIngressClasses serves its class, and classless Ingresses only while it is the
// default; another controller's Ingresses get neither routes nor status.
func TestIngressClasses(t *testing.T) {
	other := "nginx"
	mine := DefaultClassName
	mk := func(name, host string, class *string, annotations map[string]string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations},
			Spec: networkingv1.IngressSpec{IngressClassName: class, Rules: []networkingv1.IngressRule{rule(host, path("/", byNumber("s", 80)))}}}
	}
	class := defaultClass()
	class.Annotations = nil
	h := start(t, class, service("s", true, echo(t, "s")),
		mk("mine", "mine.test", &mine, nil), mk("other", "other.test", &other, nil),
		mk("none", "none.test", nil, nil), mk("legacy", "legacy.test", nil, map[string]string{legacyClassAnnotation: "mizzen"}))
	h.waitBackend("http", "mine.test", "/", "s")
	h.waitBackend("http", "legacy.test", "/", "s")
	for _, host := range []string{"other.test", "none.test"} {
		if code, _, _ := h.get("http", host, "/"); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", host, code)
		}
	}
	// Marked default, the class takes the classless Ingress too.
	class.Annotations = map[string]string{DefaultClassAnnotation: "true"}
	if _, err := h.client.NetworkingV1().IngressClasses().Update(context.Background(), class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitBackend("http", "none.test", "/", "s")
	ing, err := h.client.NetworkingV1().Ingresses("ns").Get(context.Background(), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("another class's Ingress got status %+v", ing.Status.LoadBalancer.Ingress)
	}
	// An Ingress moved to another class is no longer served and loses the address.
	statusOf := func() ([]networkingv1.IngressLoadBalancerIngress, error) {
		ing, err := h.client.NetworkingV1().Ingresses("ns").Get(context.Background(), "mine", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return ing.Status.LoadBalancer.Ingress, nil
	}
	eventually(t, func() error {
		if lb, err := statusOf(); err != nil || len(lb) != 1 {
			return fmt.Errorf("status of mine: %+v %v", lb, err)
		}
		return nil
	})
	moved, err := h.client.NetworkingV1().Ingresses("ns").Get(context.Background(), "mine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved.Spec.IngressClassName = &other
	if _, err := h.client.NetworkingV1().Ingresses("ns").Update(context.Background(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if code, _, _ := h.get("http", "mine.test", "/"); code != http.StatusNotFound {
			return fmt.Errorf("mine.test after leaving the class: %d", code)
		}
		if lb, err := statusOf(); err != nil || len(lb) != 0 {
			return fmt.Errorf("status of mine after leaving the class: %+v %v", lb, err)
		}
		return nil
	})
}

// TestTLS picks certificates by SNI: a host's own from its Secret, a wildcard's, and
// the default certificate (with a Warning event) when the Secret is missing.
func TestTLS(t *testing.T) {
	aCrt, aKey := selfSigned(t, "a.test")
	wCrt, wKey := selfSigned(t, "*.w.test")
	tlsSecret := func(name string, crt, key []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "secure", UID: "secure-uid"},
		Spec: networkingv1.IngressSpec{
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"a.test"}, SecretName: "a-tls"}, {Hosts: []string{"*.w.test"}, SecretName: "w-tls"},
				{Hosts: []string{"missing.test"}, SecretName: "missing"}},
			Rules: []networkingv1.IngressRule{rule("a.test", path("/", byNumber("s", 80))), rule("*.w.test", path("/", byNumber("s", 80))),
				rule("missing.test", path("/", byNumber("s", 80)))},
		}}
	h := start(t, defaultClass(), service("s", true, echo(t, "s")), tlsSecret("a-tls", aCrt, aKey), tlsSecret("w-tls", wCrt, wKey), ing)
	h.waitBackend("https", "a.test", "/", "s")
	subject := func(serverName string) string {
		conn, err := tls.Dial("tcp", h.srv.HTTPSAddr().String(), &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	eventually(t, func() error {
		for name, want := range map[string]string{"a.test": "a.test", "x.w.test": "*.w.test", "A.TEST": "a.test",
			"missing.test": "Mizzen Ingress Controller Fake Certificate", "x.y.w.test": "Mizzen Ingress Controller Fake Certificate"} {
			if got := subject(name); got != want {
				return fmt.Errorf("SNI %s: certificate %q, want %q", name, got, want)
			}
		}
		return nil
	})
	eventually(t, func() error {
		events, err := h.client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "secure" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "secret ns/missing not found") {
				return nil
			}
		}
		return fmt.Errorf("no Warning event about the missing secret among %d events", len(events.Items))
	})
	// The Secret created later is picked up.
	mCrt, mKey := selfSigned(t, "missing.test")
	h.create(tlsSecret("missing", mCrt, mKey))
	eventually(t, func() error {
		if got := subject("missing.test"); got != "missing.test" {
			return fmt.Errorf("certificate %q after the secret's creation", got)
		}
		return nil
	})
	// Gone again: the default certificate, and the warning again (counted on the event).
	if err := h.client.CoreV1().Secrets("ns").Delete(context.Background(), "missing", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if got := subject("missing.test"); got != "Mizzen Ingress Controller Fake Certificate" {
			return fmt.Errorf("certificate %q after the secret's deletion", got)
		}
		events, err := h.client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "secret ns/missing not found") && e.Count >= 2 {
				return nil
			}
		}
		return fmt.Errorf("the warning about the secret was not sent again")
	})
}

func selfSigned(t *testing.T, host string) (crtPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
