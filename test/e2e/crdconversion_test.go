package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	conversionClusterCIDR = "10.191.0.0/16"
	conversionServiceCIDR = "10.192.0.0/16"
	conversionBridge      = "mzn-api7conv"
)

const conversionServer = `
apiVersion: v1
kind: Pod
metadata: {name: crd-conversion-webhook, labels: {app: crd-conversion-webhook}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: converter
    image: mizzen.local/agnhost:v1
    args: ["crd-conversion-webhook", "--tls-cert-file=/certs/tls.crt", "--tls-private-key-file=/certs/tls.key", "--port=9443"]
    readinessProbe:
      httpGet: {path: /readyz, port: 9443, scheme: HTTPS}
      periodSeconds: 1
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes:
  - name: certs
    secret: {secretName: crd-conversion-webhook-tls}
---
apiVersion: v1
kind: Service
metadata: {name: crd-conversion-webhook}
spec:
  selector: {app: crd-conversion-webhook}
  ports:
  - {port: 9443, targetPort: 9443}
`

// conversionCRD serves stable.example.com in v1 (stored: hostPort) and v2 (host,
// port), converted by the webhook behind the Service.
const conversionCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crdwebhooks.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crdwebhooks, singular: crdwebhook, kind: CrdWebhook, listKind: CrdWebhookList}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {namespace: default, name: crd-conversion-webhook, path: /crdconvert, port: 9443}
        caBundle: CA_BUNDLE
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          hostPort: {type: string}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          host: {type: string}
          port: {type: string}
`

// TestCRDConversionWebhookOnContainerd runs agnhost's crd-conversion-webhook as a pod
// behind a Service and shows a custom resource stored in v1 read in v2 and written in
// v2 stored in v1, each conversion made by the webhook.
func TestCRDConversionWebhookOnContainerd(t *testing.T) {
	sideBySide(t)
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar")
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", conversionClusterCIDR, "--pod-bridge", conversionBridge,
		"--service-cluster-ip-range", conversionServiceCIDR, "--kubelet-port", strconv.Itoa(freePort(t)),
		"--disable", "dns,metrics-server")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", c.log.String())
		}
		_, _ = c.kubectlErr("delete", "crd", "crdwebhooks.stable.example.com", "--wait=true", "--timeout=60s")
		cleanupHost(t, c, dataDir, conversionBridge)
	})

	caPEM, certPEM, keyPEM := webhookCerts(t, "crd-conversion-webhook.default.svc")
	certFile, keyFile := filepath.Join(dataDir, "tls.crt"), filepath.Join(dataDir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	c.kubectl("create", "secret", "tls", "crd-conversion-webhook-tls", "--cert", certFile, "--key", keyFile)
	c.kubectlStdin(conversionServer, "apply", "-f", "-")
	c.waitPod("default", "crd-conversion-webhook", 180*time.Second, runningAndReady)
	c.kubectlStdin(strings.ReplaceAll(conversionCRD, "CA_BUNDLE", base64.StdEncoding.EncodeToString(caPEM)), "apply", "-f", "-")
	c.kubectl("wait", "--for=condition=Established", "crd/crdwebhooks.stable.example.com", "--timeout=30s")

	get := func(version, name, path string) (string, error) {
		return c.kubectlErr("get", "crdwebhooks."+version+".stable.example.com", name, "-o", "jsonpath="+path)
	}
	t.Run("stored in v1, read in v2", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			out, err := c.kubectlStdinErr("apiVersion: stable.example.com/v1\nkind: CrdWebhook\nmetadata: {name: from-v1}\nhostPort: \"localhost:8080\"\n", "apply", "-f", "-")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
		var host, port string
		eventually(t, 30*time.Second, func() error {
			var err error
			if host, err = get("v2", "from-v1", "{.host}"); err != nil {
				return fmt.Errorf("%v: %s", err, host)
			}
			port, err = get("v2", "from-v1", "{.port}")
			return err
		})
		if host != "localhost" || port != "8080" {
			t.Errorf("v2 view: host %q port %q, want localhost and 8080", host, port)
		}
		if apiVersion, _ := get("v2", "from-v1", "{.apiVersion}"); apiVersion != "stable.example.com/v2" {
			t.Errorf("apiVersion = %q", apiVersion)
		}
		if hp, _ := get("v1", "from-v1", "{.hostPort}"); hp != "localhost:8080" {
			t.Errorf("v1 view: hostPort %q", hp)
		}
	})
	t.Run("written in v2, stored in v1", func(t *testing.T) {
		if out, err := c.kubectlStdinErr("apiVersion: stable.example.com/v2\nkind: CrdWebhook\nmetadata: {name: from-v2}\nhost: example.org\nport: \"443\"\n", "apply", "-f", "-"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if hp, err := get("v1", "from-v2", "{.hostPort}"); err != nil || hp != "example.org:443" {
			t.Errorf("v1 view of an object written in v2: %q %v, want example.org:443", hp, err)
		}
	})
}
