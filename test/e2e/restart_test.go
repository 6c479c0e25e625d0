package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestBundleSurvivesRestarts restarts a whole `mizzen server` bundle (every component
// enabled, pods running) on its data directory four times, twice with SIGTERM and twice
// with kill -9, writing between restarts. After each start the server must stay up,
// every acknowledged write must be there, the Deployment's pods must be Ready again,
// and the bundled DNS and metrics server must serve again.
func TestBundleSurvivesRestarts(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	const bridge = "mzn-restart"
	stageImages(t, dataDir, images, "agnhost.tar")
	port, kubeletPort := freePort(t), freePort(t)
	args := []string{"--cluster-cidr", "10.237.0.0/16", "--service-cluster-ip-range", "10.119.0.0/16",
		"--pod-bridge", bridge, "--kubelet-port", strconv.Itoa(kubeletPort)}
	c := startServer(t, dataDir, port, args...)
	t.Cleanup(func() { cleanupHost(t, c, dataDir, bridge) })

	ctx := context.Background()
	client := clientFor(t, c)
	readyNode(t, ctx, client, dataDir, images)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{
					Name: "web", Image: agnhostImage, Args: []string{"netexec", "--http-port=8080"},
					ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
				}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentReady(t, ctx, client, "web", 2)
	// The server's own kubelet joined as every node does: its client and serving
	// certificates came through approved CSRs. Restarts reuse them (counted at the end).
	kubeletCSRs := func() int {
		t.Helper()
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range csrs.Items {
			if r.Spec.SignerName == "kubernetes.io/kube-apiserver-client-kubelet" && len(r.Status.Certificate) > 0 {
				n++
			}
		}
		return n
	}
	if n := kubeletCSRs(); n != 1 {
		t.Errorf("%d issued kubelet client CSRs, want the server's own node's one", n)
	}

	written := 0
	writeConfigMaps := func(client kubernetes.Interface, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", written)}, Data: map[string]string{"n": strconv.Itoa(written)}}
			if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", cm.Name, err)
			}
			written++
		}
	}
	writeConfigMaps(client, 20)

	for i, how := range []string{"SIGTERM", "kill -9", "SIGTERM", "kill -9"} {
		t.Logf("restart %d: %s", i+1, how)
		if how == "SIGTERM" {
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- c.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the server exited with %v after SIGTERM\n%s", err, c.log.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the server did not stop within 60 s of SIGTERM\n%s", c.log.String())
			}
		} else {
			c.kill()
		}
		restarted := time.Now()
		c = startServer(t, dataDir, port, args...)
		client = clientFor(t, c)

		// Every acknowledged write is there.
		cms, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, cm := range cms.Items {
			have[cm.Name] = true
		}
		for n := 0; n < written; n++ {
			if name := fmt.Sprintf("cm-%03d", n); !have[name] {
				t.Fatalf("after %s: acknowledged ConfigMap %s is gone", how, name)
			}
		}
		// The node comes back (its Lease renewed by the new kubelet: until then the Node
		// still shows the old one's Ready) and the pods are Ready again.
		eventually(t, 120*time.Second, func() error {
			leases, err := client.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, l := range leases.Items {
				if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(restarted) {
					return nil
				}
			}
			return fmt.Errorf("no node Lease renewed since the restart")
		})
		readyNode(t, ctx, client, dataDir, images)
		waitDeploymentReady(t, ctx, client, "web", 2)
		// The bundled metrics server serves again (it once failed every restart with
		// "tls: bad certificate") and DNS answers through its Service.
		eventually(t, 90*time.Second, func() error {
			out, err := c.kubectlErr("get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "jsonpath={.status.conditions[?(@.type=='Available')].status}")
			if err != nil || strings.TrimSpace(out) != "True" {
				return fmt.Errorf("metrics APIService not Available: %v %s", err, out)
			}
			out, err = c.kubectlErr("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes")
			if err != nil {
				return fmt.Errorf("metrics API: %v %s", err, out)
			}
			return nil
		})
		writeConfigMaps(client, 10)
		// The server is still up a while after /readyz: a component failing late takes
		// the whole bundle down, and that is what the restart bug looked like.
		time.Sleep(3 * time.Second)
		if out, err := c.kubectlErr("get", "--raw", "/readyz"); err != nil {
			t.Fatalf("after %s the server went down after /readyz: %v %s\nlog:\n%s", how, err, out, c.log.String())
		}
	}
	if n := kubeletCSRs(); n != 1 {
		t.Errorf("after the restarts, %d issued kubelet client CSRs: a restart asked for a new certificate", n)
	}
}

// clientFor is a client-go clientset with the cluster's admin credentials.
func clientFor(t *testing.T, c *cluster) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// waitDeploymentReady waits until the Deployment reports replicas ready pods of its
// current generation.
func waitDeploymentReady(t *testing.T, ctx context.Context, client kubernetes.Interface, name string, replicas int32) {
	t.Helper()
	eventually(t, 120*time.Second, func() error {
		d, err := client.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.ReadyReplicas != replicas || d.Status.UpdatedReplicas != replicas {
			return fmt.Errorf("deployment %s: %d/%d ready, %d updated", name, d.Status.ReadyReplicas, replicas, d.Status.UpdatedReplicas)
		}
		return nil
	})
}
