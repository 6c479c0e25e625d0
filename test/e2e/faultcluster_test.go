package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	procs map[string]*component
	// client is the admin's; a client-go clientset retries nothing by itself, and
	// every caller here tolerates errors while a component is down.
	client kubernetes.Interface
	images string
}

func startFaultCluster(t *testing.T) *faultCluster {
	t.Helper()
	images := testImages(t)
	base := t.TempDir()
	fc := &faultCluster{t: t, dir: datadir.Dir(base), args: map[string][]string{}, procs: map[string]*component{}, images: images}
	fc.etcd.startMembers(t, base)
	// Pods are removed while their runtime still runs, then every component stops and
	// the host is cleaned; the etcd members, started before, stop after.
	t.Cleanup(func() {
		if err := containerd.RemoveAllPods(context.Background(), containerd.Options{DataDir: fc.dir.Containerd()}); err != nil {
			t.Logf("removing pods: %v", err)
		}
		for _, c := range fc.procs {
			c.stop()
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

	fc.args["scheduler"] = []string{"scheduler", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0", "--secure-port", "0"}
	fc.args["controller-manager"] = []string{"controller-manager", "--kubeconfig", kubeconfig, "--secure-port", "0",
		"--cluster-cidr", faultClusterCIDR}
	pause := filepath.Join(filepath.Dir(mizzenBin), "mizzen-pause")
	fc.args["kubelet"] = []string{"kubelet", "--kubeconfig", kubeconfig, "--hostname-override", faultNode,
		"--root-dir", fc.dir.Kubelet(), "--containerd-data-dir", fc.dir.Containerd(), "--cni-bridge", faultBridge,
		"--pause-binary", pause, "--port", strconv.Itoa(freePort(t)), "--client-ca-file", fc.dir.CACert(),
		"--eviction-hard", "memory.available<100Mi,nodefs.available<5%,imagefs.available<5%"}
	fc.args["proxy"] = []string{"proxy", "--kubeconfig", kubeconfig, "--hostname-override", faultNode,
		"--cluster-cidr", faultClusterCIDR, "--nftables-table", fc.proxyTable(), "--healthz-bind-address", ""}
	// The hollow nodes' volumes go under the cluster's directory, removed after every
	// component has stopped: a kill -9 leaves them behind.
	fc.args["hollow-nodes"] = []string{"hollow-nodes", "--kubeconfig", kubeconfig, "--count", "2", "--name-prefix", faultHollow,
		"--preloaded-images", busyboxImage, "--root-dir", filepath.Join(base, "hollow")}
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

// start starts the component, or starts it again after kill9, under its supervisor.
func (fc *faultCluster) start(name string) {
	fc.t.Helper()
	c := fc.procs[name]
	if c == nil {
		c = &component{t: fc.t, name: name, args: fc.args[name]}
		fc.procs[name] = c
	}
	c.start()
}

// kill9 sends SIGKILL to the component and waits until it is gone; its supervisor
// leaves it down until start.
func (fc *faultCluster) kill9(name string) {
	fc.t.Helper()
	if err := fc.procs[name].kill9(); err != nil {
		fc.t.Fatalf("kill -9 %s: %v", name, err)
	}
}

// component is one of the fault cluster's processes under a supervisor that restarts
// it a second after it exits by itself, as systemd's Restart=always does for upstream's
// components: a standalone scheduler or controller-manager that cannot renew its Lease
// in time (the apiserver or etcd being killed) exits, as upstream's do, and relies on
// that. Without one, the cluster would lose a component for good on a slow machine.
type component struct {
	t    *testing.T
	name string
	args []string

	mu       sync.Mutex
	proc     *process
	exited   chan struct{} // closed once proc has exited
	down     bool          // killed on purpose: not restarted until start
	restarts int
	gone     []string // the ends of the logs of the processes that exited by themselves
}

func (c *component) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
	c.launchLocked()
}

func (c *component) launchLocked() {
	p := launch(c.t, c.args...)
	exited := make(chan struct{})
	c.proc, c.exited = p, exited
	go func() {
		_ = p.cmd.Wait()
		close(exited)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.down || c.proc != p {
			return
		}
		c.restarts++
		c.gone = append(c.gone, fmt.Sprintf("exited by itself (%s), restarted by the supervisor:\n%s", p.state(), tail(p.log.String(), 5)))
		time.AfterFunc(time.Second, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.down && c.proc == p {
				c.launchLocked()
			}
		})
	}()
}

// supervised says which components exited by themselves and were started again.
func (fc *faultCluster) supervised() string {
	var restarted []string
	for name, c := range fc.procs {
		c.mu.Lock()
		if c.restarts > 0 {
			restarted = append(restarted, fmt.Sprintf("%s %d times", name, c.restarts))
		}
		c.mu.Unlock()
	}
	slices.Sort(restarted)
	return strings.Join(restarted, ", ")
}

// kill9 kills the running process, if any, and keeps the component down.
func (c *component) kill9() error {
	c.mu.Lock()
	c.down = true
	p, exited := c.proc, c.exited
	c.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return nil
}

// stop kills the component for good, at the end of the test.
func (c *component) stop() { _ = c.kill9() }

// log is the end of the running process's log, after what the ones that exited by
// themselves said last.
func (c *component) log(lines int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(append(slices.Clone(c.gone), tail(c.proc.log.String(), lines)), "\n")
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
	for name, c := range fc.procs {
		fmt.Fprintf(&b, "--- %s\n%s\n", name, c.log(15))
	}
	for i, p := range fc.etcd.members {
		fmt.Fprintf(&b, "--- etcd member %d\n%s\n", i, tail(p.log.String(), 5))
	}
	// The kubelet's containerd logs to a file of its own; a kubelet waiting on it says little.
	if data, err := os.ReadFile(filepath.Join(fc.dir.Containerd(), "containerd.log")); err == nil {
		fmt.Fprintf(&b, "--- the kubelet's containerd\n%s\n", tail(string(data), 15))
	}
	return b.String()
}
