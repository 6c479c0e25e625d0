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
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
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
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	agentImages := filepath.Join(dataDir, "agent", "images")
	if err := os.MkdirAll(agentImages, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(images, "agnhost.tar"), filepath.Join(agentImages, "agnhost.tar")); err != nil {
		t.Fatal(err)
	}
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

	// The server made the default class.
	if out := c.kubectl("get", "ingressclass", "mizzen", "-o", `jsonpath={.spec.controller} {.metadata.annotations.ingressclass\.kubernetes\.io/is-default-class}`); out != "mizzen.io/ingress true" {
		t.Fatalf("IngressClass mizzen: %q", out)
	}
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
		if out := c.kubectl("get", "ingress", "web"); !strings.Contains(out, nodeIP) {
			t.Errorf("kubectl get ingress:\n%s", out)
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
