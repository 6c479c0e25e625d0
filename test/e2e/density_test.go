package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/testing/density"
	"mizzen/internal/testing/lockedbuf"
	"mizzen/internal/testing/proc"
)

// The density test's size: upstream's density run at a tenth of its 1,000 nodes
// (30 pods a node), each node taking at most densityMaxPods, so that the scheduler
// must keep every node within its capacity for all pods to fit.
const (
	densityNodes       = 100
	densityPodsPerNode = 30
	densityMaxPods     = 32
	densityClusterCIDR = "10.241.0.0/16"
)

// TestDensity is bench/density's run as a correctness test, without timing: a
// `mizzen server` (no agent) and `mizzen hollow-nodes`, 3,000 pods in Deployments of
// 100 created at 100 pods/s; every pod must reach Running, bound once, with no node
// over its pods capacity, and every pod must be gone after the Deployments are
// deleted.
func TestDensity(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs 100 hollow nodes and 3,000 pods")
	}
	total := densityNodes * densityPodsPerNode
	var c *cluster
	// Registered first, so it runs after the server has stopped and its log is whole.
	t.Cleanup(func() {
		if t.Failed() && c != nil {
			t.Logf("mizzen server (exit: %v) log ends:\n%s", c.cmd.ProcessState, tail(c.log.String(), 40))
		}
	})
	dataDir := t.TempDir()
	c = startServer(t, dataDir, freePort(t), "--disable", "agent,cloud-controller-manager,proxy,dns,metrics-server,ingress,dashboard",
		"--cluster-cidr", densityClusterCIDR)
	hollowLog := &lockedbuf.Buffer{}
	hollow := exec.Command(mizzenBin, "hollow-nodes", "--kubeconfig", c.kubeconfig, "--count", strconv.Itoa(densityNodes),
		"--name-prefix", "density-node-", "--max-pods", strconv.Itoa(densityMaxPods), "--preloaded-images", density.Image,
		// Each kubelet as its node, as bench/density runs them: the Node authorizer,
		// NodeRestriction and priority and fairness see node traffic.
		"--node-ca-dir", datadir.Dir(dataDir).TLS(),
		// The pods' volumes in the test's own directory, removed with it even when the
		// process is killed before it removes its own.
		"--root-dir", filepath.Join(t.TempDir(), "hollow"))
	hollow.Stdout, hollow.Stderr = hollowLog, hollowLog
	if err := hollow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(hollow, 30*time.Second) })
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	ready := 0
	if err := density.Wait(ctx, 5*time.Minute, func() bool {
		ready, err = density.ReadyNodes(ctx, client)
		return err == nil && ready == densityNodes
	}, func() string { return fmt.Sprintf("%d of %d nodes Ready and untainted (%v)", ready, densityNodes, err) }); err != nil {
		t.Fatalf("%v\nhollow-nodes log ends:\n%s", err, tail(hollowLog.String(), 30))
	}
	const ns = "density"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tracker, err := density.Track(client, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer tracker.Stop()
	if err := density.Deployments(ctx, client, ns, total, 100, 100); err != nil {
		t.Fatal(err)
	}
	if err := density.Wait(ctx, 10*time.Minute, func() bool { return tracker.Counts().Running >= total },
		func() string { return fmt.Sprintf("%+v of %d pods", tracker.Counts(), total) }); err != nil {
		t.Fatal(err)
	}
	if counts := tracker.Counts(); counts.Live != total {
		t.Errorf("%d pods exist with every pod Running, want %d (%+v)", counts.Live, total, counts)
	}
	over, err := density.OverCapacity(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if len(over) > 0 {
		t.Errorf("nodes over their pods capacity: %v", over)
	}
	if err := density.DeleteDeployments(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	if err := density.Wait(ctx, 10*time.Minute, func() bool { return tracker.Counts().Live == 0 },
		func() string {
			return fmt.Sprintf("%+v pods left after the Deployments were deleted", tracker.Counts())
		}); err != nil {
		t.Fatal(err)
	}
	// What the watch saw of the pods (now gone) and what the apiserver holds agree.
	if rebound := density.Rebound(tracker.Pods()); len(rebound) > 0 {
		t.Errorf("pods bound twice: %v", rebound)
	}
	if left, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(left.Items) > 0 {
		t.Errorf("pods listed after every deletion was watched: %v, %v", len(left.Items), err)
	}
}
