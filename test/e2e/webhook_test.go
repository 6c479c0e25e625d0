package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	webhookClusterCIDR = "10.231.0.0/16"
	webhookServiceCIDR = "10.113.0.0/16"
	webhookBridge      = "mzn-adm"
)

// webhookCerts makes a CA and a serving certificate for the webhook Service's DNS
// name, as a cluster operator (or cert-manager) would.
func webhookCerts(t *testing.T, dnsName string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

const webhookServer = `
apiVersion: v1
kind: Pod
metadata: {name: sample-webhook, labels: {app: sample-webhook}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: webhook
    image: mizzen.local/agnhost:v1
    args: ["webhook", "--tls-cert-file=/certs/tls.crt", "--tls-private-key-file=/certs/tls.key", "--port=8443"]
    readinessProbe:
      httpGet: {path: /readyz, port: 8443, scheme: HTTPS}
      periodSeconds: 1
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes:
  - name: certs
    secret: {secretName: sample-webhook-tls}
---
apiVersion: v1
kind: Service
metadata: {name: sample-webhook}
spec:
  selector: {app: sample-webhook}
  ports:
  - {port: 443, targetPort: 8443}
---
apiVersion: v1
kind: Namespace
metadata: {name: webhook-e2e, labels: {webhook-e2e: "true"}}
`

// webhookConfigs registers, by service reference, a validating webhook for pods and
// ConfigMaps, a mutating one adding a label to pods, and two that time out.
const webhookConfigs = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: deny-unwanted}
webhooks:
- name: deny-unwanted-configmaps.mizzen.test
  clientConfig:
    service: {namespace: default, name: sample-webhook, path: /configmaps}
    caBundle: CA_BUNDLE
  rules: [{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  namespaceSelector: {matchLabels: {webhook-e2e: "true"}}
  sideEffects: None
  admissionReviewVersions: [v1]
- name: deny-unwanted-pods.mizzen.test
  clientConfig:
    service: {namespace: default, name: sample-webhook, path: /pods}
    caBundle: CA_BUNDLE
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  namespaceSelector: {matchLabels: {webhook-e2e: "true"}}
  sideEffects: None
  admissionReviewVersions: [v1]
- name: slow-ignore.mizzen.test
  clientConfig:
    service: {namespace: default, name: sample-webhook, path: /always-allow-delay-5s}
    caBundle: CA_BUNDLE
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  objectSelector: {matchLabels: {slow: ignore}}
  timeoutSeconds: 1
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
- name: slow-fail.mizzen.test
  clientConfig:
    service: {namespace: default, name: sample-webhook, path: /always-allow-delay-5s}
    caBundle: CA_BUNDLE
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  objectSelector: {matchLabels: {slow: fail}}
  timeoutSeconds: 1
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: add-label}
webhooks:
- name: add-label.mizzen.test
  clientConfig:
    service: {namespace: default, name: sample-webhook, path: /add-label}
    caBundle: CA_BUNDLE
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods, configmaps]}]
  namespaceSelector: {matchLabels: {webhook-e2e: "true"}}
  sideEffects: None
  admissionReviewVersions: [v1]
`

// TestAdmissionWebhookOnContainerd runs agnhost's webhook as a pod behind a Service
// and shows, through kubectl, pods and ConfigMaps refused and changed by it, and a
// webhook that times out answered by its failurePolicy within timeoutSeconds.
func TestAdmissionWebhookOnContainerd(t *testing.T) {
	sideBySide(t)
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar")
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", webhookClusterCIDR, "--pod-bridge", webhookBridge,
		"--service-cluster-ip-range", webhookServiceCIDR, "--kubelet-port", strconv.Itoa(freePort(t)),
		"--disable", "dns,metrics-server")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", c.log.String())
		}
		_, _ = c.kubectlErr("delete", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "--all")
		_, _ = c.kubectlErr("delete", "pod", "--all", "-n", "webhook-e2e", "--wait=true", "--timeout=60s")
		cleanupHost(t, c, dataDir, webhookBridge)
	})

	caPEM, certPEM, keyPEM := webhookCerts(t, "sample-webhook.default.svc")
	certFile, keyFile := filepath.Join(dataDir, "tls.crt"), filepath.Join(dataDir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	c.kubectl("create", "secret", "tls", "sample-webhook-tls", "--cert", certFile, "--key", keyFile)
	c.kubectlStdin(webhookServer, "apply", "-f", "-")
	c.waitPod("default", "sample-webhook", 180*time.Second, runningAndReady)
	c.kubectlStdin(strings.ReplaceAll(webhookConfigs, "CA_BUNDLE", base64.StdEncoding.EncodeToString(caPEM)), "apply", "-f", "-")

	t.Run("a ConfigMap the webhook refuses", func(t *testing.T) {
		var out string
		eventually(t, 30*time.Second, func() error {
			var err error
			out, err = c.kubectlErr("create", "configmap", "unwanted", "-n", "webhook-e2e", "--from-literal=webhook-e2e-test=webhook-disallow")
			if err == nil {
				c.kubectl("delete", "configmap", "unwanted", "-n", "webhook-e2e")
				return fmt.Errorf("created: the webhook is not in effect yet")
			}
			return nil
		})
		want := `admission webhook "deny-unwanted-configmaps.mizzen.test" denied the request: the configmap contains unwanted key and value`
		if !strings.Contains(out, want) {
			t.Fatalf("kubectl create configmap said %q, want %q", out, want)
		}
	})
	t.Run("a ConfigMap the webhook changes", func(t *testing.T) {
		c.kubectl("create", "configmap", "wanted", "-n", "webhook-e2e", "--from-literal=a=b")
		if got := c.kubectl("get", "configmap", "wanted", "-n", "webhook-e2e", "-o", "jsonpath={.metadata.labels.added-label}"); got != "yes" {
			t.Errorf("added-label = %q, want yes", got)
		}
	})
	t.Run("a pod the webhook refuses", func(t *testing.T) {
		out, err := c.kubectlErr("run", "disallowed", "-n", "webhook-e2e", "--image", "mizzen.local/agnhost:v1",
			"--labels", "webhook-e2e-test=webhook-disallow", "--", "pause")
		want := `admission webhook "deny-unwanted-pods.mizzen.test" denied the request: the pod contains unwanted label;`
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("kubectl run: %v %q, want %q", err, out, want)
		}
	})
	t.Run("a pod the webhook changes", func(t *testing.T) {
		c.kubectl("run", "labelled", "-n", "webhook-e2e", "--image", "mizzen.local/agnhost:v1", "--", "pause")
		if got := c.kubectl("get", "pod", "labelled", "-n", "webhook-e2e", "-o", "jsonpath={.metadata.labels.added-label}"); got != "yes" {
			t.Errorf("added-label = %q, want yes", got)
		}
		c.waitPod("webhook-e2e", "labelled", 120*time.Second, runningAndReady)
	})
	t.Run("a webhook that times out", func(t *testing.T) {
		slow := func(name, policy string) (string, error) {
			return c.kubectlStdinErr("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: default, labels: {slow: "+policy+"}}\n", "create", "-f", "-")
		}
		start := time.Now()
		if out, err := slow("slow-ignore", "ignore"); err != nil {
			t.Errorf("failurePolicy Ignore: %v %s", err, out)
		}
		out, err := slow("slow-fail", "fail")
		if err == nil || !strings.Contains(out, `failed calling webhook "slow-fail.mizzen.test"`) {
			t.Errorf("failurePolicy Fail: %v %q", err, out)
		}
		t.Logf("both slow creates answered in %v (webhook sleeps 5s, timeoutSeconds 1)", time.Since(start).Round(time.Millisecond))
		if got, err := c.kubectlErr("get", "configmap", "slow-fail", "-o", "name"); err == nil {
			t.Errorf("the refused ConfigMap exists: %s", got)
		}
	})
}

// kubectlStdinErr runs kubectl with input on stdin and returns what it printed.
func (c *cluster) kubectlStdinErr(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mizzenBin, append([]string{"kubectl", "--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
