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

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/testing/netlab"
	"mizzen/internal/testing/proc"
)

// The multi-node cluster's networks: its machines' LAN, its pods and its Services,
// distinct from every other cluster on this host.
const (
	mnLabPrefix   = "mznp"
	mnLabSubnet   = "10.250.148.0/24"
	mnClusterCIDR = "10.148.0.0/16"
	mnServiceCIDR = "10.66.0.0/16"
	mnClusterDNS  = "10.66.0.10"
	// mnKubeletPort is every node's kubelet port, inside its own machine.
	mnKubeletPort = "10350"
)

// labNet is where a multi-node cluster lives: its netlab prefix and machines' LAN, its
// pod and Service ranges, the prefix of its nodes' pod bridges and agents' names, and
// how many machines it has. Tests running at the same time use different ones.
type labNet struct {
	prefix, subnet, clusterCIDR, serviceCIDR, clusterDNS string
	bridgePrefix, nodePrefix                             string
	machines                                             int
}

// podNetworkLab is the three machines' network of the pod network tests.
var podNetworkLab = labNet{prefix: mnLabPrefix, subnet: mnLabSubnet, clusterCIDR: mnClusterCIDR, serviceCIDR: mnServiceCIDR,
	clusterDNS: mnClusterDNS, bridgePrefix: "mznp", nodePrefix: "mznp-node-", machines: 3}

// multiNode is a cluster of three machines (network namespaces on one bridge): a
// `mizzen server` with its bundled agent on the first, a `mizzen agent` on each of the
// others, every node with its own data directory, containerd and pod bridge.
type multiNode struct {
	t      *testing.T
	net    labNet
	lab    *netlab.Lab
	server *cluster
	agents []*nodeProcess
	// nodes are the node names, the server's first.
	nodes []string
	// serverDir is the server's data directory.
	serverDir string
	client    kubernetes.Interface
	// token is the agent join token the agents share.
	token string
}

// nodeProcess is a `mizzen agent` running in a machine.
type nodeProcess struct {
	name, dataDir, bridge string
	machine               *netlab.Machine
	cmd                   *exec.Cmd
	log                   *bytes.Buffer
}

// startMultiNode starts the three machines' cluster with the given --pod-network and
// waits until every node is Ready with a pod CIDR.
func startMultiNode(t *testing.T, podNetwork string) *multiNode {
	t.Helper()
	return startMultiNodeOn(t, podNetworkLab, podNetwork)
}

// startMultiNodeOn starts a cluster of ln.machines machines on ln.
func startMultiNodeOn(t *testing.T, ln labNet, podNetwork string) *multiNode {
	t.Helper()
	requireNodeRuntime(t)
	images := testImages(t)
	lab, err := netlab.New(ln.prefix, ln.subnet, ln.machines)
	if err != nil {
		t.Fatal(err)
	}
	mn := &multiNode{t: t, net: ln, lab: lab, serverDir: t.TempDir()}
	// Every directory exists before the cleanups are registered, so that none is
	// removed while a process still uses it.
	for i, m := range lab.Machines[1:] {
		mn.agents = append(mn.agents, &nodeProcess{name: fmt.Sprintf("%s%d", ln.nodePrefix, i+1), dataDir: t.TempDir(),
			bridge: fmt.Sprintf("%s%d", ln.bridgePrefix, i+1), machine: m, log: &bytes.Buffer{}})
	}
	// Cleanups run last-registered first: the lab goes after every process in it.
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Logf("closing the lab: %v", err)
		}
	})
	t.Cleanup(mn.cleanup)

	// The server, on the first machine, with its own node.
	stageImages(t, mn.serverDir, images, "agnhost.tar", "busybox.tar")
	port := 6444 // inside the machine's own network namespace: no other cluster is there
	serverMachine := lab.Machines[0]
	c := &cluster{t: t, dataDir: mn.serverDir, port: port, log: &bytes.Buffer{},
		kubeconfig: filepath.Join(mn.serverDir, "host.kubeconfig")}
	c.cmd = serverMachine.Command(context.Background(), mizzenBin, "server", "--data-dir", mn.serverDir,
		"--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(port),
		"--cluster-cidr", ln.clusterCIDR, "--service-cluster-ip-range", ln.serviceCIDR,
		"--pod-bridge", ln.bridgePrefix+"0", "--pod-network", podNetwork, "--kubelet-port", mnKubeletPort,
		"--disable", "ingress,dashboard,metrics-server", "--controller-manager-secure-port", "0", "--scheduler-secure-port", "0",
		"--etcd-disable-snapshots")
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mn.server = c
	// The admin kubeconfig names 127.0.0.1, the server machine's own loopback: the
	// host reaches the apiserver at the machine's address instead.
	apiserver := fmt.Sprintf("https://%s:%d", serverMachine.Addr, port)
	eventually(t, 60*time.Second, func() error {
		return rewriteKubeconfig(filepath.Join(mn.serverDir, "admin.kubeconfig"), c.kubeconfig, apiserver)
	})
	eventually(t, 60*time.Second, func() error {
		out, err := c.kubectlErr("get", "--raw", "/readyz")
		if err != nil || strings.TrimSpace(out) != "ok" {
			return fmt.Errorf("readyz: %v %s", err, out)
		}
		return nil
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if mn.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}

	// The agents, one per other machine.
	for _, a := range mn.agents {
		stageImages(t, a.dataDir, images, "agnhost.tar", "busybox.tar")
		args := append([]string{"agent", "--data-dir", a.dataDir, "--node-name", a.name, "--pod-bridge", a.bridge,
			"--cluster-cidr", ln.clusterCIDR, "--cluster-dns", ln.clusterDNS, "--kubelet-port", mnKubeletPort,
			"--pod-network", podNetwork}, mn.agentCredentials(a.name, apiserver)...)
		a.cmd = a.machine.Command(context.Background(), mizzenBin, args...)
		a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
		if err := a.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}

	// Every node Ready, with a pod CIDR, and its images imported.
	ctx := context.Background()
	eventually(t, 180*time.Second, func() error {
		nodes, err := mn.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var ready []string
		for _, n := range nodes.Items {
			if n.Spec.PodCIDR != "" && nodeReady(&n) && hasImage(&n, agnhostImage) && hasImage(&n, busyboxImage) {
				ready = append(ready, n.Name)
			}
		}
		if len(ready) < ln.machines {
			return fmt.Errorf("nodes Ready with a pod CIDR and the test images: %v", ready)
		}
		return nil
	})
	hostname, _ := os.Hostname()
	mn.nodes = []string{strings.ToLower(hostname)}
	for _, a := range mn.agents {
		mn.nodes = append(mn.nodes, a.name)
	}
	return mn
}

// agentCredentials are the flags giving an agent its identity: the server's address
// on the lab and a join token, all a new node needs (docs/joining.md).
func (mn *multiNode) agentCredentials(node, apiserver string) []string {
	if mn.token == "" {
		admin := filepath.Join(mn.serverDir, "lab-admin.kubeconfig")
		if err := rewriteKubeconfig(filepath.Join(mn.serverDir, "admin.kubeconfig"), admin, apiserver); err != nil {
			mn.t.Fatal(err)
		}
		out, err := exec.Command(mizzenBin, "token", "create", "--kubeconfig", admin, "--description", "multi-node e2e").CombinedOutput()
		if err != nil {
			mn.t.Fatalf("mizzen token create: %v\n%s", err, out)
		}
		mn.token = strings.TrimSpace(string(out))
	}
	return []string{"--server", apiserver, "--token", mn.token}
}

// rewriteKubeconfig copies a kubeconfig with its clusters' server set to url.
func rewriteKubeconfig(from, to, url string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return err
	}
	for _, cl := range cfg.Clusters {
		cl.Server = url
	}
	return clientcmd.WriteToFile(*cfg, to)
}

func hasImage(n *v1.Node, image string) bool {
	for _, img := range n.Status.Images {
		for _, name := range img.Names {
			if name == image {
				return true
			}
		}
	}
	return false
}

// logs returns every process's log, for a failed test.
func (mn *multiNode) logs() string {
	var b strings.Builder
	fmt.Fprintf(&b, "=== server\n%s\n", mn.server.log.String())
	for _, a := range mn.agents {
		fmt.Fprintf(&b, "=== agent %s\n%s\n", a.name, a.log.String())
	}
	return b.String()
}

// cleanup removes the pods while the runtimes still run, stops the agents and the
// server, and then removes what each machine's node left (`mizzen uninstall` inside
// the machine, where its bridge and nftables tables are).
func (mn *multiNode) cleanup() {
	t := mn.t
	if t.Failed() {
		t.Logf("logs:\n%s", mn.logs())
	}
	if mn.server != nil && mn.server.cmd.ProcessState == nil {
		_, _ = mn.server.kubectlErr("delete", "pods", "--all", "--all-namespaces", "--wait=true", "--timeout=60s")
	}
	type node struct {
		dir, bridge string
		machine     *netlab.Machine
		cmd         *exec.Cmd
	}
	nodes := []node{}
	for _, a := range mn.agents {
		if a.cmd != nil {
			nodes = append(nodes, node{a.dataDir, a.bridge, a.machine, a.cmd})
		}
	}
	if mn.server != nil {
		nodes = append(nodes, node{mn.serverDir, mn.net.bridgePrefix + "0", mn.lab.Machines[0], mn.server.cmd})
	}
	for _, n := range nodes {
		rt := containerd.Options{DataDir: datadir.Dir(n.dir).Containerd()}
		if err := containerd.RemoveAllPods(context.Background(), rt); err != nil {
			t.Logf("removing pods of %s: %v", n.dir, err)
		}
		proc.Stop(n.cmd, 30*time.Second)
	}
	for _, n := range nodes {
		if out, err := n.machine.Run(context.Background(), mizzenBin, "uninstall", "--data-dir", n.dir, "--pod-bridge", n.bridge, "--grace-period", "5s"); err != nil {
			t.Logf("uninstalling %s: %v\n%s", n.dir, err, out)
		}
	}
}

// podOn is a pod pinned to a node: agnhost's netexec (HTTP on 8080, answering its
// name on /hostname and the caller's address on /clientip) or a busybox client.
func podOn(name, node string, labels map[string]string, netexec bool) *v1.Pod {
	c := v1.Container{Name: "main", Image: busyboxImage, Command: []string{"sleep", "3600"}}
	if netexec {
		c = v1.Container{Name: "main", Image: agnhostImage, Args: []string{"netexec", "--http-port=8080"},
			Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}}
	}
	grace := int64(1)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{c}, TerminationGracePeriodSeconds: &grace}}
}
