package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/pki"
	"mizzen/internal/testing/proc"
)

const (
	// nodeName is the one node of every run.
	nodeName = "bench-node"
	// bridge and clusterCIDR are the benchmark's own, so that a cluster already running
	// on this host is left alone; both kubelets' pods use them.
	bridge      = "mzn-bench"
	clusterCIDR = "10.201.0.0/16"
	// clusterDNS is kubeadm's (the tenth address of the default service range): pods
	// get it in their resolv.conf on both sides, and no DNS server is needed since the
	// pause container never resolves a name.
	clusterDNS = "10.96.0.10"
)

// node is one run's node: a fresh `mizzen server` (no agent) and a fresh containerd
// the benchmark supervises, with the same binary and configuration for both kubelets
// (containerd.Options.Config), its state under the server's data directory.
type node struct {
	srv         *benchutil.Server
	runtime     containerd.Options
	stopRuntime func()
	stopped     <-chan error
	// kubeconfig is the kubelet's: a client certificate of the server's CA for
	// system:node:<name> in group system:nodes, as a kubeadm node's kubelet.conf, so
	// the Node authorizer and NodeRestriction judge both kubelets alike.
	kubeconfig string
	caFile     string
	nodeIP     string
}

// startNode starts the server and containerd, with the sandbox image imported.
func startNode(bin string) (n *node, err error) {
	n = &node{}
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	if n.srv, err = benchutil.StartServer(bin, "--disable", "agent", "--cluster-cidr", clusterCIDR); err != nil {
		return n, err
	}
	pause, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "mizzen-pause"))
	if err != nil {
		return n, err
	}
	n.runtime = containerd.Options{DataDir: filepath.Join(n.srv.Dir, "containerd"), Bridge: bridge, ClusterCIDR: clusterCIDR}
	ctx, cancel := context.WithCancel(context.Background())
	n.stopRuntime = cancel
	if n.stopped, err = containerd.Start(ctx, n.runtime, nil, pause); err != nil {
		return n, err
	}
	ca, err := pki.LoadOrCreateCA(datadir.Dir(n.srv.Dir).TLS(), datadir.CAName, "unused")
	if err != nil {
		return n, err
	}
	n.caFile = datadir.Dir(n.srv.Dir).CACert()
	user := "system:node:" + nodeName
	cert, err := ca.IssueClient(user, []string{"system:nodes"})
	if err != nil {
		return n, err
	}
	n.kubeconfig = filepath.Join(n.srv.Dir, "bench-kubelet.kubeconfig")
	if err := pki.WriteKubeconfig(n.kubeconfig, n.srv.Config.Host, ca.CertPEM, cert, user); err != nil {
		return n, err
	}
	n.nodeIP, err = hostIP()
	return n, err
}

// hostIP is the host's first global IPv4 address on a link that is not another
// cluster's (the conformance suite's mcf* links, any mzn* bridge).
func hostIP() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagUp == 0 ||
			strings.HasPrefix(ifc.Name, "mcf") || strings.HasPrefix(ifc.Name, "mzn") {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("no global IPv4 address for --node-ip")
}

// waitReady waits for the kubelet's node to get its pod CIDR from the node IPAM
// controller, writes the pod network's CNI configuration for it into containerd's
// conf dir (which containerd reports as network ready, for both kubelets alike), and
// waits for the node to be Ready. exited says whether the kubelet has died meanwhile.
func (n *node) waitReady(ctx context.Context, exited func() bool) error {
	cniWritten := false
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no Ready node within 2 minutes")
		}
		if exited() {
			return fmt.Errorf("the kubelet exited")
		}
		node, err := n.srv.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil || node.Spec.PodCIDR == "" {
			continue
		}
		if !cniWritten {
			if err := n.runtime.WriteCNIConfig(node.Spec.PodCIDR); err != nil {
				return err
			}
			cniWritten = true
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
	}
}

// stopKubelet stops a kubelet as SIGTERM does.
func stopKubelet(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		proc.Stop(cmd, 30*time.Second)
	}
}

// stop removes every pod from the runtime (pods outlive their kubelet), stops
// containerd, deletes the bridge and the masquerade table, unmounts whatever is
// still mounted under the data directory, and stops the server, which removes it.
// The kubelet must be stopped first, or it would start the pods again.
func (n *node) stop() {
	if n.stopRuntime != nil {
		// On a machine at load 40 a CRI call can time out; a second pass usually ends it.
		for try := 1; try <= 3; try++ {
			err := containerd.RemoveAllPods(context.Background(), n.runtime)
			if err == nil {
				break
			}
			fmt.Fprintf(os.Stderr, "removing the pods from containerd (pass %d): %v\n", try, err)
		}
		n.stopRuntime()
		if n.stopped != nil {
			<-n.stopped
		}
		killShims(n.runtime.Socket())
	}
	_ = exec.Command("ip", "link", "delete", bridge).Run()
	_ = containerd.RemoveMasquerade(bridge)
	if n.srv != nil {
		unmountUnder(n.srv.Dir)
		n.srv.Stop()
	}
}

// killShims kills what RemoveAllPods could not remove: the shims of socket's
// containerd and the containers they run, whose pod cgroups it then removes.
func killShims(socket string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	parent := map[string]string{} // pid -> parent pid, of every process
	var shims []string
	for _, p := range procs {
		pid := filepath.Base(filepath.Dir(p))
		if status, err := os.ReadFile(filepath.Join("/proc", pid, "status")); err == nil {
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "PPid:" {
					parent[pid] = f[1]
				}
			}
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "containerd-shim") &&
			strings.Contains(string(b), "\x00-address\x00"+socket+"\x00") {
			shims = append(shims, pid)
		}
	}
	for _, shim := range shims {
		var cgroups []string
		for pid, ppid := range parent {
			if ppid != shim {
				continue
			}
			if b, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup")); err == nil {
				cgroups = append(cgroups, string(b))
			}
			_ = exec.Command("kill", "-9", pid).Run()
		}
		_ = exec.Command("kill", "-9", shim).Run()
		fmt.Fprintf(os.Stderr, "killed the shim %s of %s and its %d container(s)\n", shim, socket, len(cgroups))
		time.Sleep(time.Second)
		// /proc/<pid>/cgroup lines are "id:controllers:/path"; the pod's cgroup is the
		// container's parent.
		for _, c := range cgroups {
			for _, line := range strings.Split(c, "\n") {
				f := strings.SplitN(line, ":", 3)
				if len(f) != 3 || !strings.Contains(f[2], "/pod") {
					continue
				}
				// rmdir fails harmlessly in the hierarchies that do not have it.
				for _, m := range cgroupMounts() {
					_ = os.Remove(filepath.Join(m, f[2]))
					_ = os.Remove(filepath.Join(m, filepath.Dir(f[2])))
				}
			}
		}
	}
}

// unmountUnder lazily unmounts every mount point under dir, deepest first, so that
// removing dir cannot reach into a mounted filesystem and none stays on the host.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = exec.Command("umount", "-l", p).Run()
	}
}
