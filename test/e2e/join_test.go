package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/testing/netlab"
	"mizzen/internal/testing/proc"
)

// This test's own network: lab machines, pod bridges, cluster and service CIDRs.
const (
	joinLabPrefix   = "mznj"
	joinLabSubnet   = "10.250.144.0/24"
	joinClusterCIDR = "10.144.0.0/16"
	joinServiceCIDR = "10.64.0.0/16"
)

// labAgent is a `mizzen agent` in a lab machine.
type labAgent struct {
	cmd     *exec.Cmd
	log     *bytes.Buffer
	dataDir string
	bridge  string
}

func startLabAgent(t *testing.T, m *netlab.Machine, dataDir, nodeName, bridge string, env []string, args ...string) *labAgent {
	t.Helper()
	a := &labAgent{log: &bytes.Buffer{}, dataDir: dataDir, bridge: bridge}
	a.cmd = m.Command(context.Background(), mizzenBin, append([]string{"agent", "--data-dir", dataDir, "--node-name", nodeName,
		"--pod-bridge", bridge, "--cluster-cidr", joinClusterCIDR, "--kubelet-port", strconv.Itoa(freePort(t))}, args...)...)
	a.cmd.Env = append(os.Environ(), env...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent %s log:\n%s", nodeName, a.log.String())
		}
		proc.Stop(a.cmd, 30*time.Second)
		cleanupNode(t, dataDir, bridge)
	})
	return a
}

// runLabAgent runs an agent expected to give up, and returns its output.
func runLabAgent(t *testing.T, m *netlab.Machine, nodeName string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := m.Command(ctx, mizzenBin, append([]string{"agent", "--data-dir", t.TempDir(), "--node-name", nodeName,
		"--pod-bridge", "mznj3", "--kubelet-port", strconv.Itoa(freePort(t))}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// nodeClient is a client with the credentials a joined agent got for its node.
func nodeClient(t *testing.T, c *cluster, a *labAgent) kubernetes.Interface {
	t.Helper()
	admin, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pem := filepath.Join(datadir.Dir(a.dataDir).KubeletPKI(), "kubelet-client-current.pem")
	cfg := rest.AnonymousClientConfig(admin)
	cfg.CertFile, cfg.KeyFile = pem, pem
	return kubernetes.NewForConfigOrDie(cfg)
}

// TestJoinWithToken: a server on the host and two agents in their own network
// namespaces, joined with a token only, get their certificates through CSRs; each
// node's credentials reach only its own pods' Secrets; bad tokens and a second
// machine taking a running node's name are refused with clear errors.
func TestJoinWithToken(t *testing.T) {
	sideBySide(t)
	requireNodeRuntime(t)
	lab, err := netlab.New(joinLabPrefix, joinLabSubnet, 2)
	if err != nil {
		t.Fatalf("network lab: %v", err)
	}
	t.Cleanup(func() { _ = lab.Close() })
	ctx := context.Background()
	dataDir := t.TempDir()
	port := freePort(t)
	c := startServer(t, dataDir, port, "--bind-address", "0.0.0.0", "--advertise-address", lab.Gateway.String(),
		"--disable", "agent,dns,metrics-server,ingress,dashboard",
		"--cluster-cidr", joinClusterCIDR, "--service-cluster-ip-range", joinServiceCIDR, "--pod-bridge", "mznj0")
	serverURL := fmt.Sprintf("https://%s:%d", lab.Gateway, port)
	admin := kubernetes.NewForConfigOrDie(mustConfig(t, c.kubeconfig))

	out, err := exec.Command(mizzenBin, "token", "create", "--data-dir", dataDir, "--ttl", "1h").CombinedOutput()
	if err != nil {
		t.Fatalf("mizzen token create: %v\n%s", err, out)
	}
	token := strings.TrimSpace(string(out))
	hash, cred, _ := strings.Cut(strings.TrimPrefix(token, "K10"), "::")

	// A token for another cluster is refused before any credential is sent: no CSR
	// is filed.
	wrongCA := "K10" + strings.Repeat("0", len(hash)) + "::" + cred
	out2, err := runLabAgent(t, lab.Machines[0], "mznj-x", "--server", serverURL, "--token", wrongCA)
	if err == nil || !strings.Contains(out2, "does not match the token's CA hash") {
		t.Errorf("agent with another cluster's token: %v\n%s", err, out2)
	}
	// An unknown token (this cluster's CA, credentials it never issued) is refused.
	out2, err = runLabAgent(t, lab.Machines[0], "mznj-x", "--server", serverURL, "--token", "K10"+hash+"::zzzzzz.0123456789abcdef")
	if err == nil || !strings.Contains(out2, "refused the join token") {
		t.Errorf("agent with an unknown token: %v\n%s", err, out2)
	}
	if csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil || len(csrs.Items) != 0 {
		t.Errorf("CSRs after the refused tokens: %v %v, want none", csrs, err)
	}

	names := []string{"mznj-a", "mznj-b"}
	agents := []*labAgent{
		// MIZZEN_URL and MIZZEN_TOKEN join as the flags do.
		startLabAgent(t, lab.Machines[0], t.TempDir(), names[0], "mznj1", []string{"MIZZEN_URL=" + serverURL, "MIZZEN_TOKEN=" + token}),
		startLabAgent(t, lab.Machines[1], t.TempDir(), names[1], "mznj2", nil, "--server", serverURL, "--token", token),
	}
	eventually(t, 3*time.Minute, func() error {
		for _, name := range names {
			n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ready := false
			for _, cond := range n.Status.Conditions {
				ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
			}
			if !ready {
				return fmt.Errorf("node %s not Ready: %v", name, n.Status.Conditions)
			}
		}
		return nil
	})
	// Every node's client, serving and proxy certificates came through approved and
	// issued CSRs, as kubectl shows them.
	eventually(t, 2*time.Minute, func() error {
		out := c.kubectl("get", "csr")
		if !strings.HasPrefix(out, "NAME") || !strings.Contains(out, "SIGNERNAME") || !strings.Contains(out, "REQUESTOR") || !strings.Contains(out, "CONDITION") {
			return fmt.Errorf("columns: %s", out)
		}
		for _, want := range []string{"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client"} {
			n := 0
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, want+" ") && strings.Contains(line, "Approved,Issued") {
					n++
				}
			}
			if n < 2 {
				return fmt.Errorf("%d approved and issued %s CSRs, want one per node:\n%s", n, want, out)
			}
		}
		if strings.Contains(out, "Pending") {
			return fmt.Errorf("a CSR is pending:\n%s", out)
		}
		return nil
	})
	// The apiserver reaches the kubelets with their issued serving certificates.
	for _, name := range names {
		if _, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + name + "/proxy/healthz").DoRaw(ctx); err != nil {
			t.Errorf("nodes/%s/proxy/healthz: %v", name, err)
		}
	}

	// A second machine may not take a running node's name.
	out2, err = runLabAgent(t, lab.Machines[1], names[0], "--server", serverURL, "--token", token)
	if err == nil || !strings.Contains(out2, "NodeNameInUse") {
		t.Errorf("a second agent named %s: %v\n%s", names[0], err, out2)
	}

	// Node B's credentials read its own pod's Secret, not one used only by node A's.
	for i, name := range names {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secret-" + name, Namespace: "default"}, StringData: map[string]string{"k": "v"}}
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "uses-secret-" + name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: names[i],
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}},
				Volumes:    []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}}},
			},
		}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeB := nodeClient(t, c, agents[1])
	eventually(t, 30*time.Second, func() error {
		_, err := nodeB.CoreV1().Secrets("default").Get(ctx, "secret-"+names[1], metav1.GetOptions{})
		return err
	})
	_, err = nodeB.CoreV1().Secrets("default").Get(ctx, "secret-"+names[0], metav1.GetOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:node:mznj-b" cannot get resource "secrets"`) {
		t.Errorf("node B reading node A's pod's Secret: %v, want 403", err)
	}
	// NodeRestriction: node B may not change node A.
	nodeA, err := nodeB.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeA.Labels["example.com/by"] = "b"
	if _, err := nodeB.CoreV1().Nodes().Update(ctx, nodeA, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `node "mznj-b" is not allowed to modify node "mznj-a"`) {
		t.Errorf("node B updating node A: %v, want 403", err)
	}
	t.Logf("kubectl get csr:\n%s", c.kubectl("get", "csr"))

	// A restarted agent uses the certificates it has: its token may be gone by then.
	if out, err := exec.Command(mizzenBin, "token", "delete", "--data-dir", dataDir, token).CombinedOutput(); err != nil {
		t.Fatalf("mizzen token delete: %v\n%s", err, out)
	}
	csrsBefore, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	proc.Stop(agents[1].cmd, 30*time.Second)
	restarted := time.Now()
	agents[1] = startLabAgent(t, lab.Machines[1], agents[1].dataDir, names[1], "mznj2", nil, "--server", serverURL, "--token", token)
	eventually(t, 2*time.Minute, func() error {
		lease, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, names[1], metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(restarted.Add(time.Second)) {
			return fmt.Errorf("the restarted agent has not renewed its node's Lease yet")
		}
		return nil
	})
	csrsAfter, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil || len(csrsAfter.Items) != len(csrsBefore.Items) {
		t.Errorf("the restarted agent filed CSRs: %d before, %d after (%v)", len(csrsBefore.Items), len(csrsAfter.Items), err)
	}
	_ = c.kubectl("delete", "pod", "--all", "--grace-period=0", "--force")
}

func mustConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
