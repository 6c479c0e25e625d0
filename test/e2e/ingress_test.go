package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/hostaddr"
)

// Network of the ingress test's cluster: distinct from other clusters on this host.
const (
	ingressClusterCIDR = "10.234.0.0/16"
	ingressServiceCIDR = "10.116.0.0/16"
	ingressBridge      = "mzn-ing"
)

// ingressObjects are two netexec Deployments behind Services (one reached by port
// name, its targetPort a named container port; one by port number), and an Ingress
// without a class, which the default IngressClass mizzen takes: two hosts, two paths.
const ingressObjects = `apiVersion: apps/v1
kind: Deployment
metadata: {name: alpha}
spec:
  replicas: 2
  selector: {matchLabels: {app: alpha}}
  template:
    metadata: {labels: {app: alpha}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: netexec
        image: mizzen.local/agnhost:v1
        args: ["netexec", "--http-port=8080"]
        ports: [{name: web, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: beta}
spec:
  replicas: 1
  selector: {matchLabels: {app: beta}}
  template:
    metadata: {labels: {app: beta}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: netexec
        image: mizzen.local/agnhost:v1
        args: ["netexec", "--http-port=9090"]
        readinessProbe:
          httpGet: {path: /healthz, port: 9090}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: alpha}
spec:
  selector: {app: alpha}
  ports:
  - {name: http, port: 80, targetPort: web}
---
apiVersion: v1
kind: Service
metadata: {name: beta}
spec:
  selector: {app: beta}
  ports:
  - {port: 8000, targetPort: 9090}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  tls:
  - {hosts: [alpha.test], secretName: alpha-tls}
  rules:
  - host: alpha.test
    http:
      paths:
      - {path: /hostname, pathType: Exact, backend: {service: {name: alpha, port: {name: http}}}}
      - {path: /hostName, pathType: Prefix, backend: {service: {name: beta, port: {number: 8000}}}}
  - host: "*.beta.test"
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: beta, port: {number: 8000}}}}
`

// TestIngress runs a cluster with its bundled Ingress controller and reaches two
// Deployments through it by host and path, over HTTP and over TLS with SNI.
func TestIngress(t *testing.T) {
	sideBySide(t)
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar")
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", ingressClusterCIDR, "--pod-bridge", ingressBridge,
		"--service-cluster-ip-range", ingressServiceCIDR, "--kubelet-port", strconv.Itoa(freePort(t)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", c.log.String())
		}
		cleanupHost(t, c, dataDir, ingressBridge)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	// The server makes the default class as it starts the controller, after /readyz.
	eventually(t, 30*time.Second, func() error {
		out, err := c.kubectlErr("get", "ingressclass", "mizzen", "-o", `jsonpath={.spec.controller} {.metadata.annotations.ingressclass\.kubernetes\.io/is-default-class}`)
		if err != nil || out != "mizzen.io/ingress true" {
			return fmt.Errorf("IngressClass mizzen: %q %v", out, err)
		}
		return nil
	})
	crtPEM, keyPEM := selfSignedPEM(t, "alpha.test")
	if _, err := client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "alpha-tls"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crtPEM, corev1.TLSPrivateKeyKey: keyPEM}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.kubectlStdin(ingressObjects, "apply", "-f", "-")
	for _, d := range []string{"alpha", "beta"} {
		c.kubectl("rollout", "status", "deployment/"+d, "--timeout=180s")
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(crtPEM)
	// get requests path of host through the ingress and returns the status, body and
	// protocol of the answer.
	get := func(scheme, host, path string) (int, string, string, error) {
		port := c.ingressHTTPPort
		if scheme == "https" {
			port = c.ingressHTTPSPort
		}
		req, err := http.NewRequest("GET", fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, path), nil)
		if err != nil {
			return 0, "", "", err
		}
		req.Host = host
		// A connection per request: SNI names the host, and the certificate is checked
		// against it (a shared HTTP/2 connection would carry every host over the first's).
		httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host}, ForceAttemptHTTP2: true}}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body)), resp.Proto, err
	}
	// reaches polls until the answers of host+path came from every pod named with
	// prefix that is expected.
	reaches := func(scheme, host, path, prefix string, pods int) {
		t.Helper()
		seen := map[string]bool{}
		eventually(t, 60*time.Second, func() error {
			code, body, _, err := get(scheme, host, path)
			if err != nil {
				return err
			}
			if code != http.StatusOK || !strings.HasPrefix(body, prefix) {
				return fmt.Errorf("%s://%s%s: %d %q, want a pod of %s", scheme, host, path, code, body, prefix)
			}
			seen[body] = true
			if len(seen) < pods {
				return fmt.Errorf("%s://%s%s reached only %v so far", scheme, host, path, seen)
			}
			return nil
		})
	}

	t.Run("hosts and paths over HTTP", func(t *testing.T) {
		reaches("http", "alpha.test", "/hostname", "alpha-", 2)
		reaches("http", "alpha.test", "/hostName", "beta-", 1)
		reaches("http", "x.beta.test", "/hostname", "beta-", 1)
		for _, tc := range []struct{ host, path string }{{"alpha.test", "/hostname/more"}, {"unknown.test", "/hostname"}, {"beta.test", "/hostname"}} {
			if code, body, _, err := get("http", tc.host, tc.path); err != nil || code != http.StatusNotFound {
				t.Errorf("%s%s: %d %q %v, want 404", tc.host, tc.path, code, body, err)
			}
		}
	})
	t.Run("TLS with SNI, over HTTP/2", func(t *testing.T) {
		reaches("https", "alpha.test", "/hostname", "alpha-", 2)
		code, body, proto, err := get("https", "alpha.test", "/hostname")
		if err != nil || code != http.StatusOK || proto != "HTTP/2.0" {
			t.Errorf("https://alpha.test/hostname: %d %q over %s, %v", code, body, proto, err)
		}
		// A host without a certificate of its own gets the default one, which the
		// alpha.test certificate's pool does not trust.
		if _, _, _, err := get("https", "x.beta.test", "/hostname"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("x.beta.test over TLS: %v, want the default certificate refused", err)
		}
	})
	t.Run("status names the node's address", func(t *testing.T) {
		nodeIP := strings.TrimSpace(c.kubectl("get", "nodes", "-o", `jsonpath={.items[0].status.addresses[?(@.type=="InternalIP")].address}`))
		eventually(t, 30*time.Second, func() error {
			got := strings.TrimSpace(c.kubectl("get", "ingress", "web", "-o", "jsonpath={.status.loadBalancer.ingress[*].ip}"))
			if got != nodeIP {
				return fmt.Errorf("status.loadBalancer.ingress ips %q, want the node's %s", got, nodeIP)
			}
			return nil
		})
		// The DefaultIngressClass admission plugin gave the classless Ingress the class.
		if out := c.kubectl("get", "ingress", "web"); !strings.Contains(out, "mizzen") || !strings.Contains(out, nodeIP) {
			t.Errorf("kubectl get ingress:\n%s", out)
		}
	})
	t.Run("a missing TLS secret: the default certificate and a Warning event", func(t *testing.T) {
		c.kubectlStdin(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: unsigned}
spec:
  ingressClassName: mizzen
  tls:
  - {hosts: [gamma.test], secretName: nowhere}
  rules:
  - host: gamma.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: alpha, port: {number: 80}}}}
`, "apply", "-f", "-")
		eventually(t, 30*time.Second, func() error {
			out := c.kubectl("get", "events", "--field-selector", "involvedObject.kind=Ingress,involvedObject.name=unsigned",
				"-o", "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}")
			if !strings.Contains(out, "Warning TLSSecretInvalid: secret default/nowhere not found; serving gamma.test with the default certificate") {
				return fmt.Errorf("events of ingress unsigned:\n%s", out)
			}
			return nil
		})
		// Served all the same, with the default certificate (which these roots refuse).
		reaches("http", "gamma.test", "/hostname", "alpha-", 2)
		if _, _, _, err := get("https", "gamma.test", "/hostname"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("gamma.test over TLS: %v, want the default certificate refused", err)
		}
	})
	t.Run("a backend scaled to zero answers 503", func(t *testing.T) {
		c.kubectl("scale", "deployment/beta", "--replicas=0")
		eventually(t, 60*time.Second, func() error {
			code, body, _, err := get("http", "x.beta.test", "/hostname")
			if err != nil {
				return err
			}
			if code != http.StatusServiceUnavailable {
				return fmt.Errorf("x.beta.test after scaling to 0: %d %q, want 503", code, body)
			}
			return nil
		})
		reaches("http", "alpha.test", "/hostname", "alpha-", 2)
	})
}

func selfSignedPEM(t *testing.T, host string) (crtPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
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

// TestIngressStandalone runs `mizzen ingress` as its own process against a control plane
// without nodes or a bundled controller: it serves the class once it exists, routes to
// a Service whose EndpointSlice names a server on this machine, and writes its bind
// address into the Ingress's status.
func TestIngressStandalone(t *testing.T) {
	hostIP, err := hostaddr.PrimaryIPv4()
	if err != nil {
		t.Skip("no address for an EndpointSlice (they refuse loopback):", err)
	}
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend saw %s%s from %s", r.Host, r.URL.Path, r.Header.Get("X-Forwarded-For"))
	})}
	ln, err := net.Listen("tcp", net.JoinHostPort(hostIP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = backend.Serve(ln) }()
	t.Cleanup(func() { _ = backend.Close() })

	c := startServer(t, t.TempDir(), freePort(t), "--disable", "agent,scheduler,controller-manager,dns,metrics-server,ingress")
	httpPort := freePort(t)
	p := startProcess(t, "ingress", "--kubeconfig", c.kubeconfig, "--bind-address", "127.0.0.1",
		"--http-port", strconv.Itoa(httpPort), "--https-port", "0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ingress log:\n%s", p.log.String())
		}
	})
	c.kubectlStdin(fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports:
  - {name: http, port: 80}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-manual
  labels: {kubernetes.io/service-name: web, endpointslice.kubernetes.io/managed-by: e2e-test}
addressType: IPv4
ports: [{name: http, port: %d}]
endpoints: [{addresses: [%q]}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: mizzen
  rules:
  - host: web.test
    http:
      paths:
      - {path: /app, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
`, ln.Addr().(*net.TCPAddr).Port, hostIP.String()), "apply", "-f", "-")
	get := func(path string) (int, string, error) {
		req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, path), nil)
		if err != nil {
			return 0, "", err
		}
		req.Host = "web.test"
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// No IngressClass mizzen yet: the Ingress is not this controller's.
	time.Sleep(time.Second)
	if code, body, err := get("/app"); err != nil || code != http.StatusNotFound {
		t.Fatalf("before the class exists: %d %q %v, want 404", code, body, err)
	}
	c.kubectlStdin(`apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: mizzen}
spec: {controller: mizzen.io/ingress}
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() error {
		code, body, err := get("/app/x")
		if err != nil {
			return err
		}
		if want := "backend saw web.test/app/x from 127.0.0.1"; code != http.StatusOK || body != want {
			return fmt.Errorf("web.test/app/x: %d %q, want 200 %q", code, body, want)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		if got := strings.TrimSpace(c.kubectl("get", "ingress", "web", "-o", "jsonpath={.status.loadBalancer.ingress[*].ip}")); got != "127.0.0.1" {
			return fmt.Errorf("status.loadBalancer.ingress ips %q, want the bind address", got)
		}
		return nil
	})
}
