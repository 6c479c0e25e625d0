package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/proxy"
)

// The fault suite's network, distinct from every other cluster on this host.
const (
	faultBridge      = "mznf0"
	faultClusterCIDR = "10.160.0.0/16"
	faultServiceCIDR = "10.72.0.0/16"
	faultNode        = "mznf-node"
	faultHollow      = "mznf-hollow-"
)

// faultCluster is a cluster composed of separate processes, so that one component can
// be killed alone: three `mizzen etcd` members, `mizzen apiserver`, `mizzen scheduler`,
// `mizzen controller-manager`, `mizzen kubelet` (supervising a containerd of its own),
// `mizzen proxy`, and two hollow nodes that give the scheduler a choice of node.
type faultCluster struct {
	t    *testing.T
	dir  datadir.Dir
	etcd etcdCluster
	// args of each component, by name, to restart it as it was started.
	args  map[string][]string
	procs map[string]*process
	// client is the admin's; a client-go clientset retries nothing by itself, and
	// every caller here tolerates errors while a component is down.
	client kubernetes.Interface
	images string
}

func startFaultCluster(t *testing.T) *faultCluster {
	t.Helper()
	images := testImages(t)
	base := t.TempDir()
	fc := &faultCluster{t: t, dir: datadir.Dir(base), args: map[string][]string{}, procs: map[string]*process{}, images: images}
	fc.etcd.startMembers(t, base)
	// Pods are removed while their runtime still runs, then every component stops and
	// the host is cleaned; the etcd members, started before, stop after.
	t.Cleanup(func() {
		if err := containerd.RemoveAllPods(context.Background(), containerd.Options{DataDir: fc.dir.Containerd()}); err != nil {
			t.Logf("removing pods: %v", err)
		}
		for _, p := range fc.procs {
			p.kill()
		}
		cleanupNode(t, base, faultBridge)
	})

	kubeconfig := fc.dir.AdminKubeconfig()
	fc.args["apiserver"] = []string{"apiserver", "--etcd-servers", strings.Join(fc.etcd.clientURLs, ","), "--data-dir", base,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(freePort(t)), "--service-cluster-ip-range", faultServiceCIDR}
	if ip := defaultRouteIPv4(); ip != "" {
		// Advertised in the kubernetes Service, whose endpoints then go through a kill
		// of the apiserver too (a loopback address is not advertised).
		fc.args["apiserver"] = append(fc.args["apiserver"], "--advertise-address", ip)
	}
	fc.start("apiserver")
	fc.client = waitReady(t, kubeconfig)

	fc.args["scheduler"] = []string{"scheduler", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0"}
	fc.args["controller-manager"] = []string{"controller-manager", "--kubeconfig", kubeconfig, "--secure-port", "0",
		"--cluster-cidr", faultClusterCIDR}
	pause := filepath.Join(filepath.Dir(mizzenBin), "mizzen-pause")
	fc.args["kubelet"] = []string{"kubelet", "--kubeconfig", kubeconfig, "--hostname-override", faultNode,
		"--root-dir", fc.dir.Kubelet(), "--containerd-data-dir", fc.dir.Containerd(), "--cni-bridge", faultBridge,
		"--pause-binary", pause, "--port", strconv.Itoa(freePort(t)), "--client-ca-file", fc.dir.CACert(),
		"--eviction-hard", "memory.available<100Mi,nodefs.available<5%,imagefs.available<5%"}
	fc.args["proxy"] = []string{"proxy", "--kubeconfig", kubeconfig, "--hostname-override", faultNode,
		"--cluster-cidr", faultClusterCIDR, "--nftables-table", fc.proxyTable(), "--healthz-bind-address", ""}
	fc.args["hollow-nodes"] = []string{"hollow-nodes", "--kubeconfig", kubeconfig, "--count", "2", "--name-prefix", faultHollow,
		"--preloaded-images", busyboxImage}
	for _, name := range []string{"scheduler", "controller-manager", "kubelet", "proxy", "hollow-nodes"} {
		fc.start(name)
	}

	ctx := context.Background()
	eventually(t, 90*time.Second, func() error {
		nodes, err := fc.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue && n.Spec.PodCIDR != "" {
					ready++
				}
			}
		}
		if ready < 3 {
			return fmt.Errorf("%d of 3 nodes Ready with a pod CIDR\n%s", ready, fc.logs())
		}
		return nil
	})
	importCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, name := range []string{"agnhost.tar", "busybox.tar"} {
		if err := containerd.ImportArchive(importCtx, containerd.Options{DataDir: fc.dir.Containerd()}, filepath.Join(images, name)); err != nil {
			t.Fatal(err)
		}
	}
	return fc
}

// proxyTable is the nftables table the proxy of the fault cluster's node writes.
func (fc *faultCluster) proxyTable() string { return proxy.TableNameFor(faultBridge) }

func (fc *faultCluster) start(name string) {
	fc.t.Helper()
	fc.procs[name] = launch(fc.t, fc.args[name]...)
}

// kill9 sends SIGKILL to the component and waits until it is gone.
func (fc *faultCluster) kill9(name string) {
	fc.t.Helper()
	p := fc.procs[name]
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		fc.t.Fatalf("kill -9 %s: %v", name, err)
	}
	_ = p.cmd.Wait()
}

// etcdMember kills or restarts etcd member i.
func (fc *faultCluster) killEtcdMember(i int) {
	if err := fc.etcd.members[i].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		fc.t.Fatalf("kill -9 etcd member %d: %v", i, err)
	}
	_ = fc.etcd.members[i].cmd.Wait()
}

func (fc *faultCluster) restartEtcdMember(i int) {
	fc.etcd.members[i] = startProcess(fc.t, fc.etcd.memberArgs[i]...)
}

// containerdPID is the pid of the kubelet's containerd (not of a shim), 0 if none runs.
func (fc *faultCluster) containerdPID() int {
	for _, pid := range processesMentioning(fc.dir.Containerd()) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); filepath.Base(argv0) == "containerd" {
			return pid
		}
	}
	return 0
}

// logs is the last lines of every component's log, for a failure message.
func (fc *faultCluster) logs() string {
	var b strings.Builder
	for name, p := range fc.procs {
		fmt.Fprintf(&b, "--- %s\n%s\n", name, tail(p.log.String(), 15))
	}
	for i, p := range fc.etcd.members {
		fmt.Fprintf(&b, "--- etcd member %d\n%s\n", i, tail(p.log.String(), 5))
	}
	return b.String()
}
