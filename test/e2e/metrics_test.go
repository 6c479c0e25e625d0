package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/hostaddr"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/pki"
	"mizzen/internal/testing/proc"
)

const topPodYAML = `apiVersion: v1
kind: Pod
metadata:
  name: idle
  namespace: default
  labels:
    app: idle
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busyboxImage + `
    command: ["sleep", "3600"]
`

// TestKubectlTop runs a cluster with an agent on its own containerd and a
// `mizzen metrics-server` process registered with the apiserver, and checks that
// `kubectl top node` and `kubectl top pod` show the node and a running pod.
func TestKubectlTop(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	requireNodeRuntime(t)
	if _, err := exec.LookPath("/bin/busybox"); err != nil {
		t.Skip("busybox-static not installed")
	}
	hostIP, err := hostaddr.PrimaryIPv4()
	if err != nil {
		t.Skipf("no routable IPv4 address: %v", err)
	}
	ip := hostIP.String()
	images := testImages(t)
	dataDir := t.TempDir()
	bridge := "mzn-metrics"
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", "10.227.0.0/16", "--pod-bridge", bridge,
		"--kubelet-port", strconv.Itoa(freePort(t)),
		"--kubelet-certificate-authority", filepath.Join(dataDir, "tls", "ca.crt"),
		// The test runs the standalone command in its place.
		"--disable", "metrics-server")
	t.Cleanup(func() { cleanupHost(t, c, dataDir, bridge) })

	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	node := readyNode(t, ctx, client, dataDir, images)
	c.kubectlStdin(fmt.Sprintf(topPodYAML, node), "apply", "-f", "-")

	// The metrics server's credentials: a client certificate of the cluster CA for the
	// identity kubelets let read stats.
	tlsDir := filepath.Join(dataDir, "tls")
	ca, err := pki.LoadOrCreateCA(tlsDir, "ca", "mizzen-ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueClient(nodeserver.MetricsServerUser, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "metrics-server.kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, "https://127.0.0.1:"+strconv.Itoa(c.port), ca.CertPEM, cert, "metrics-server"); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	ms := exec.Command(mizzenBin, "metrics-server", "--kubeconfig", kubeconfig, "--bind-address", ip,
		"--secure-port", strconv.Itoa(freePort(t)), "--cert-dir", t.TempDir(), "--metric-resolution", "2s",
		"--register-address", ip, "--register-kubeconfig", c.kubeconfig)
	ms.Stdout, ms.Stderr = &log, &log
	if err := ms.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(ms, 15*time.Second)
		if t.Failed() {
			t.Logf("metrics-server log:\n%s", log.String())
		}
	})

	eventually(t, 120*time.Second, func() error {
		out, err := c.kubectlErr("top", "node")
		if err != nil || !strings.Contains(out, node) {
			return fmt.Errorf("kubectl top node: %v\n%s", err, out)
		}
		t.Logf("kubectl top node:\n%s", out)
		return nil
	})
	eventually(t, 120*time.Second, func() error {
		out, err := c.kubectlErr("top", "pod", "-l", "app=idle", "--containers")
		if err != nil {
			return fmt.Errorf("kubectl top pod: %v\n%s", err, out)
		}
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if len(rows) != 2 {
			return fmt.Errorf("kubectl top pod:\n%s", out)
		}
		f := strings.Fields(rows[1])
		if len(f) != 4 || f[0] != "idle" || f[1] != "main" || !strings.HasSuffix(f[2], "m") || !strings.HasSuffix(f[3], "Mi") {
			return fmt.Errorf("kubectl top pod row %q", rows[1])
		}
		t.Logf("kubectl top pod:\n%s", out)
		return nil
	})
	if out, err := c.kubectlErr("get", "apiservice", "v1beta1.metrics.k8s.io"); err != nil || !strings.Contains(out, "kube-system/metrics-server") || !strings.Contains(out, "True") {
		t.Errorf("kubectl get apiservice: %v\n%s", err, out)
	}
}
