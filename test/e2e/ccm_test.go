package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/testing/proc"
)

// Network of the cloud-controller-manager test's cluster: distinct from other
// clusters on this host, and a load balancer pool of two addresses.
const (
	ccmClusterCIDR = "10.152.0.0/16"
	ccmServiceCIDR = "10.68.0.0/16"
	ccmBridge      = "mznc0"
	ccmNode        = "ccm-e2e"
	ccmPool        = "10.250.152.0/30" // 10.250.152.1 and .2
)

const ccmCloudConfig = `zone: e2e-zone-a
region: e2e-region
nodes:
  ccm-e2e:
    instanceType: e2e.small
`

// TestCloudControllerManager runs `mizzen server` (its cloud-controller-manager on the
// local provider with a pool of two addresses) and a `mizzen agent --cloud-provider
// external`: the node registers tainted uninitialized and the controller initializes
// it; a LoadBalancer Service gets a pool address and answers HTTP on it from this
// host; a third Service finds the pool exhausted and says so, and gets an address
// once one comes free; deleting a Service removes its rules and its finalizer; a
// machine the config file marks shut down gets its node tainted, and one marked
// removed its node deleted, once the node is not Ready.
func TestCloudControllerManager(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	requireNodeRuntime(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed")
	}
	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar")
	cloudConfig := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(cloudConfig, []byte(ccmCloudConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startServer(t, dataDir, freePort(t), "--disable", "agent", "--cluster-cidr", ccmClusterCIDR,
		"--service-cluster-ip-range", ccmServiceCIDR, "--pod-bridge", ccmBridge,
		"--lb-ip-pool", ccmPool, "--cloud-config", cloudConfig)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// Watch from before the node exists, to see it as the kubelet registered it.
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", ccmNode).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	a := &agent{t: t, dataDir: dataDir, args: []string{"agent", "--kubeconfig", c.kubeconfig, "--data-dir", dataDir,
		"--node-name", ccmNode, "--pod-bridge", ccmBridge, "--kubelet-port", strconv.Itoa(freePort(t)),
		"--cluster-cidr", ccmClusterCIDR, "--cloud-provider", "external"}}
	a.start()
	t.Cleanup(func() {
		for _, svc := range []string{"web", "web2", "web3"} {
			_, _ = c.kubectlErr("delete", "service", svc, "--ignore-not-found", "--wait=true", "--timeout=30s")
		}
		_, _ = c.kubectlErr("delete", "pods", "--all", "--wait=true", "--timeout=60s")
		rt := containerd.Options{DataDir: filepath.Join(dataDir, "agent", "containerd")}
		if err := containerd.RemoveAllPods(context.Background(), rt); err != nil {
			t.Logf("removing the node's pods: %v", err)
		}
		a.stop()
		if t.Failed() {
			t.Logf("agent log:\n%s\nserver log:\n%s", a.log.String(), c.log.String())
		}
		c.stop()
		cleanupNode(t, dataDir, ccmBridge)
	})

	t.Run("the node registers tainted and is initialized", func(t *testing.T) {
		var registered *v1.Node
		for registered == nil {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("node watch ended")
				}
				if ev.Type == watch.Added {
					registered = ev.Object.(*v1.Node)
				}
			case <-ctx.Done():
				t.Fatal("the node never registered")
			}
		}
		if !hasTaint(registered, "node.cloudprovider.kubernetes.io/uninitialized") {
			t.Fatalf("the node registered with taints %v, want node.cloudprovider.kubernetes.io/uninitialized", registered.Spec.Taints)
		}
		if registered.Annotations["alpha.kubernetes.io/provided-node-ip"] == "" {
			t.Errorf("the node registered without the annotation alpha.kubernetes.io/provided-node-ip: %v", registered.Annotations)
		}
		var node *v1.Node
		eventually(t, 2*time.Minute, func() error {
			n, err := client.CoreV1().Nodes().Get(ctx, ccmNode, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if hasTaint(n, "node.cloudprovider.kubernetes.io/uninitialized") {
				return fmt.Errorf("still tainted: %v", n.Spec.Taints)
			}
			if !nodeReady(n) {
				return fmt.Errorf("not Ready")
			}
			node = n
			return nil
		})
		if node.Spec.ProviderID != "local://"+ccmNode {
			t.Errorf("providerID %q, want local://%s", node.Spec.ProviderID, ccmNode)
		}
		for k, want := range map[string]string{"topology.kubernetes.io/zone": "e2e-zone-a", "topology.kubernetes.io/region": "e2e-region",
			"node.kubernetes.io/instance-type": "e2e.small"} {
			if got := node.Labels[k]; got != want {
				t.Errorf("label %s=%q, want %q", k, got, want)
			}
		}
		if ip := registered.Annotations["alpha.kubernetes.io/provided-node-ip"]; len(node.Status.Addresses) == 0 ||
			node.Status.Addresses[0] != (v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip}) {
			t.Errorf("addresses %v, want the InternalIP %s first", node.Status.Addresses, ip)
		}
		out := c.kubectl("get", "events", "-A", "--field-selector", "involvedObject.name="+ccmNode+",reason=Synced", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, "Node synced successfully") {
			t.Errorf("no Synced event for the node: %q", out)
		}
	})

	c.kubectl("create", "deployment", "web", "--image", agnhostImage, "--port", "8080", "--", "/agnhost", "netexec", "--http-port", "8080")
	eventually(t, 3*time.Minute, func() error {
		out, err := c.kubectlErr("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}")
		if err != nil || strings.TrimSpace(out) != "1" {
			return fmt.Errorf("deployment not ready: %v %s", err, out)
		}
		return nil
	})

	t.Run("a LoadBalancer Service answers on its pool address", func(t *testing.T) {
		c.kubectl("expose", "deployment", "web", "--type", "LoadBalancer", "--port", "80", "--target-port", "8080")
		ip := waitExternalIP(t, c, "web")
		if ip != "10.250.152.1" {
			t.Errorf("EXTERNAL-IP %s, want the pool's first address 10.250.152.1", ip)
		}
		svc, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(svc.Finalizers, "service.kubernetes.io/load-balancer-cleanup") {
			t.Errorf("finalizers %v, want service.kubernetes.io/load-balancer-cleanup", svc.Finalizers)
		}
		events := c.kubectl("get", "events", "--field-selector", "involvedObject.name=web,involvedObject.kind=Service", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
		for _, want := range []string{"EnsuringLoadBalancer", "EnsuredLoadBalancer"} {
			if !strings.Contains(events, want) {
				t.Errorf("no %s event on the service: %q", want, events)
			}
		}
		var body string
		eventually(t, time.Minute, func() error {
			b, err := httpGet("http://" + ip + ":80/hostname")
			body = b
			return err
		})
		if !strings.HasPrefix(body, "web-") {
			t.Errorf("GET http://%s/hostname = %q, want a pod of web", ip, body)
		}
	})

	t.Run("an exhausted pool is reported and a freed address reused", func(t *testing.T) {
		c.kubectl("expose", "deployment", "web", "--name", "web2", "--type", "LoadBalancer", "--port", "81", "--target-port", "8080")
		if ip := waitExternalIP(t, c, "web2"); ip != "10.250.152.2" {
			t.Errorf("web2 EXTERNAL-IP %s, want 10.250.152.2", ip)
		}
		c.kubectl("expose", "deployment", "web", "--name", "web3", "--type", "LoadBalancer", "--port", "82", "--target-port", "8080")
		eventually(t, time.Minute, func() error {
			out, _ := c.kubectlErr("get", "events", "--field-selector", "involvedObject.name=web3,reason=SyncLoadBalancerFailed", "-o", "jsonpath={.items[*].message}")
			if !strings.Contains(out, "exhausted") {
				return fmt.Errorf("no SyncLoadBalancerFailed event saying the pool is exhausted: %q", out)
			}
			return nil
		})
		if out := c.kubectl("get", "service", "web3", "--no-headers"); !strings.Contains(out, "<pending>") {
			t.Errorf("web3 should be pending: %s", out)
		}
		c.kubectl("delete", "service", "web2", "--wait=true", "--timeout=60s")
		if ip := waitExternalIP(t, c, "web3"); ip != "10.250.152.2" {
			t.Errorf("web3 EXTERNAL-IP %s, want the freed 10.250.152.2", ip)
		}
	})

	t.Run("deleting the Service removes its rules and its finalizer", func(t *testing.T) {
		c.kubectl("delete", "service", "web", "--wait=true", "--timeout=60s")
		if _, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err == nil {
			t.Fatal("service web still exists after its deletion")
		}
		eventually(t, time.Minute, func() error {
			out, err := exec.Command("nft", "list", "map", "ip", "mizzen-proxy-"+ccmBridge, "service-ips").CombinedOutput()
			if err != nil {
				return fmt.Errorf("nft: %v: %s", err, out)
			}
			if strings.Contains(string(out), "10.250.152.1 ") {
				return fmt.Errorf("the proxy still has rules for 10.250.152.1:\n%s", out)
			}
			if !strings.Contains(string(out), "10.250.152.2 ") {
				return fmt.Errorf("the proxy lost web3's 10.250.152.2:\n%s", out)
			}
			return nil
		})
		if _, err := httpGet("http://10.250.152.1:80/hostname"); err == nil {
			t.Error("10.250.152.1:80 still answers after the service was deleted")
		}
	})

	t.Run("a shut down machine is tainted and a removed one's node deleted", func(t *testing.T) {
		writeConfig := func(extra string) {
			if err := os.WriteFile(cloudConfig, []byte(ccmCloudConfig+extra), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		writeConfig("    shutdown: true\n")
		a.stop()
		eventually(t, 3*time.Minute, func() error {
			n, err := client.CoreV1().Nodes().Get(ctx, ccmNode, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !hasTaint(n, "node.cloudprovider.kubernetes.io/shutdown") {
				return fmt.Errorf("no shutdown taint yet (Ready: %v): %v", nodeReady(n), n.Spec.Taints)
			}
			return nil
		})
		writeConfig("    removed: true\n")
		eventually(t, time.Minute, func() error {
			if _, err := client.CoreV1().Nodes().Get(ctx, ccmNode, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("node %s still exists", ccmNode)
			}
			return nil
		})
		out := c.kubectl("get", "events", "-A", "--field-selector", "reason=DeletingNode", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, "Deleting node "+ccmNode+" because it does not exist in the cloud provider") {
			t.Errorf("DeletingNode events: %q", out)
		}
		// The machine comes back: the agent registers the node again, and the test's
		// cleanup has a running node to stop.
		writeConfig("")
		a.start()
		eventually(t, 2*time.Minute, func() error {
			n, err := client.CoreV1().Nodes().Get(ctx, ccmNode, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if hasTaint(n, "node.cloudprovider.kubernetes.io/uninitialized") || !nodeReady(n) {
				return fmt.Errorf("re-registered node not initialized and Ready: %v", n.Spec.Taints)
			}
			return nil
		})
	})
}

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// waitExternalIP waits until `kubectl get service` shows an EXTERNAL-IP and returns it.
func waitExternalIP(t *testing.T, c *cluster, name string) string {
	t.Helper()
	var ip string
	eventually(t, time.Minute, func() error {
		out, err := c.kubectlErr("get", "service", name, "--no-headers")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		fields := strings.Fields(out)
		if len(fields) < 4 || fields[3] == "<pending>" {
			return fmt.Errorf("no EXTERNAL-IP yet: %s", out)
		}
		ip = fields[3]
		return nil
	})
	return ip
}

// Network of the bundled cloud-controller-manager test's cluster.
const (
	ccmBundleClusterCIDR = "10.153.0.0/16"
	ccmBundleServiceCIDR = "10.69.0.0/16"
	ccmBundleBridge      = "mznc1"
)

// TestCloudControllerManagerBundled runs `mizzen server` with its own agent's kubelet
// on --cloud-provider external and no pool: the node is initialized, and a
// LoadBalancer Service gets the node's address, as k3s's ServiceLB gives it, and
// answers there; a second Service on the same port is refused with an event. A server
// asked to run its kubelet external without the cloud-controller-manager refuses to
// start.
func TestCloudControllerManagerBundled(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	requireNodeRuntime(t)

	t.Run("external kubelet without the cloud-controller-manager is refused", func(t *testing.T) {
		out, err := exec.Command(mizzenBin, "server", "--data-dir", t.TempDir(), "--bind-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(freePort(t)), "--disable", "agent,cloud-controller-manager",
			"--kubelet-cloud-provider", "external", "--etcd-disable-snapshots").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "needs the cloud-controller-manager") {
			t.Errorf("server: %v\n%s", err, out)
		}
	})

	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar")
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", ccmBundleClusterCIDR, "--service-cluster-ip-range", ccmBundleServiceCIDR,
		"--pod-bridge", ccmBundleBridge, "--kubelet-port", strconv.Itoa(freePort(t)),
		"--kubelet-certificate-authority", filepath.Join(dataDir, "tls", "ca.crt"), "--kubelet-cloud-provider", "external")
	t.Cleanup(func() {
		for _, svc := range []string{"web", "web2"} {
			_, _ = c.kubectlErr("delete", "service", svc, "--ignore-not-found", "--wait=true", "--timeout=30s")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", c.log.String())
		}
		cleanupHost(t, c, dataDir, ccmBundleBridge)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	var node *v1.Node
	eventually(t, 2*time.Minute, func() error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 1 {
			return fmt.Errorf("nodes: %v", err)
		}
		n := &nodes.Items[0]
		if hasTaint(n, "node.cloudprovider.kubernetes.io/uninitialized") || !nodeReady(n) || n.Spec.ProviderID == "" {
			return fmt.Errorf("node %s not initialized and Ready: taints %v, providerID %q", n.Name, n.Spec.Taints, n.Spec.ProviderID)
		}
		node = n
		return nil
	})
	if node.Spec.ProviderID != "local://"+node.Name || node.Labels["node.kubernetes.io/instance-type"] != "local" {
		t.Errorf("providerID %q, instance-type %q", node.Spec.ProviderID, node.Labels["node.kubernetes.io/instance-type"])
	}
	var nodeIP string
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			nodeIP = a.Address
		}
	}

	c.kubectl("create", "deployment", "web", "--image", agnhostImage, "--port", "8080", "--", "/agnhost", "netexec", "--http-port", "8080")
	eventually(t, 3*time.Minute, func() error {
		out, err := c.kubectlErr("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}")
		if err != nil || strings.TrimSpace(out) != "1" {
			return fmt.Errorf("deployment not ready: %v %s", err, out)
		}
		return nil
	})
	// A port above the NodePort range that nothing on this host listens on.
	port := strconv.Itoa(freePort(t))
	c.kubectl("expose", "deployment", "web", "--type", "LoadBalancer", "--port", port, "--target-port", "8080")
	if ip := waitExternalIP(t, c, "web"); ip != nodeIP {
		t.Errorf("EXTERNAL-IP %s, want the node's address %s", ip, nodeIP)
	}
	var body string
	eventually(t, time.Minute, func() error {
		b, err := httpGet("http://" + net.JoinHostPort(nodeIP, port) + "/hostname")
		body = b
		return err
	})
	if !strings.HasPrefix(body, "web-") {
		t.Errorf("GET /hostname = %q, want a pod of web", body)
	}
	c.kubectl("expose", "deployment", "web", "--name", "web2", "--type", "LoadBalancer", "--port", port, "--target-port", "8080")
	eventually(t, time.Minute, func() error {
		out, _ := c.kubectlErr("get", "events", "--field-selector", "involvedObject.name=web2,reason=SyncLoadBalancerFailed", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, "is already taken by the load balancer of service default/web") {
			return fmt.Errorf("no SyncLoadBalancerFailed event about the taken port: %q", out)
		}
		return nil
	})
}

// TestCloudControllerManagerCommand runs `mizzen cloud-controller-manager` as its own
// process beside a server whose bundled one is disabled: a LoadBalancer Service gets an
// address of its pool, with a warning that no node can serve it yet; an unknown
// provider is refused.
func TestCloudControllerManagerCommand(t *testing.T) {
	out, err := exec.Command(mizzenBin, "cloud-controller-manager", "--kubeconfig", "/nonexistent", "--cloud-provider", "aws").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--cloud-provider "aws" is unknown`) {
		t.Errorf("--cloud-provider aws: %v\n%s", err, out)
	}
	c := startServer(t, t.TempDir(), freePort(t), "--disable", "agent,cloud-controller-manager,dns,metrics-server,ingress,dashboard",
		"--service-cluster-ip-range", ccmBundleServiceCIDR)
	c.kubectl("create", "service", "loadbalancer", "web", "--tcp", "80:8080")
	ccm := &bytes.Buffer{}
	cmd := exec.Command(mizzenBin, "cloud-controller-manager", "--kubeconfig", c.kubeconfig, "--cloud-provider", "local",
		"--lb-ip-pool", "10.250.152.8-10.250.152.9")
	cmd.Stdout, cmd.Stderr = ccm, ccm
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(cmd, 15*time.Second)
		if t.Failed() {
			t.Logf("cloud-controller-manager log:\n%s", ccm.String())
		}
	})
	if ip := waitExternalIP(t, c, "web"); ip != "10.250.152.8" {
		t.Errorf("EXTERNAL-IP %s, want 10.250.152.8", ip)
	}
	out2 := c.kubectl("get", "events", "--field-selector", "involvedObject.name=web", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	if !strings.Contains(out2, "UnAvailableLoadBalancer: There are no available nodes for LoadBalancer") {
		t.Errorf("events:\n%s", out2)
	}
	holder := c.kubectl("get", "lease", "-n", "kube-system", "cloud-controller-manager", "-o", "jsonpath={.spec.holderIdentity}")
	if holder == "" {
		t.Error("the Lease kube-system/cloud-controller-manager has no holder")
	}
}
