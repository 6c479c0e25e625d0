package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"mizzen/bench/internal/benchutil"
)

// upstreamCgroupRoot is upstream's kubelet's --cgroup-root. Its default, /, would put
// its QoS cgroups at /kubepods, which mizzen's kubelets on this host (the conformance
// suite's too) share, and upstream's kubelet kills the processes of any pod cgroup
// under its QoS cgroups that it does not know (its orphaned pod cgroup clean-up).
const upstreamCgroupRoot = "/mizzen-bench-upstream"

// kernelTunables are the sysctls upstream's kubelet sets at start (vm.overcommit_memory=1,
// kernel.panic=10, ...) unless protectKernelDefaults, which instead refuses to start when
// they differ. The benchmark saves them before and restores them after, so the shared
// host's kernel keeps its settings.
var kernelTunables = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// upstreamKubeletConfig is the KubeletConfiguration file: kubeadm's defaults
// (webhook authentication and authorization with the cluster CA, clusterDNS,
// healthz on 127.0.0.1), with what this host and this benchmark need marked.
func upstreamKubeletConfig(n *node, dir string, port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# kubeadm's defaults
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
    cacheTTL: 0s
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
clusterDNS: [%s]
clusterDomain: cluster.local
healthzBindAddress: 127.0.0.1
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# this host: cgroups v1 (hybrid), no systemd driver, swap allowed
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupRoot: %s
# this benchmark: free ports, its own log directory, no static pods, a fixed
# client certificate (no bootstrap, so no rotation), the disk thresholds mizzen's
# kubelet is given (upstream's 15%% would refuse pods on a merely busy disk)
port: %d
healthzPort: %d
readOnlyPort: 0
podLogsDir: %s
rotateCertificates: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 5%%
  imagefs.available: 5%%
`, n.caFile, clusterDNS, upstreamCgroupRoot, port, healthzPort, filepath.Join(dir, "pod-logs"))
}

// startUpstreamKubelet runs DIR/kubelet against the node, printing its flags and
// configuration the first time (print). It returns a clean-up for what it leaves on
// the host, to run after the kubelet and the pods are gone.
func startUpstreamKubelet(binDir string, n *node, print bool) (*exec.Cmd, func(), error) {
	dir := filepath.Join(n.srv.Dir, "upstream-kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, func() {}, err
	}
	saved := map[string][]byte{}
	for _, k := range kernelTunables {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			saved[k] = b
		}
	}
	removeChains := kubeletChainsRemover()
	cleanup := func() {
		for k, v := range saved {
			_ = os.WriteFile("/proc/sys/"+k, v, 0o644)
		}
		removeChains()
		removeCgroupRoot(upstreamCgroupRoot)
		removeLogLinks(n.srv.Dir)
	}
	if err := makeCgroupRoot(upstreamCgroupRoot); err != nil {
		return nil, cleanup, err
	}
	config := filepath.Join(dir, "config.yaml")
	configYAML := upstreamKubeletConfig(n, dir, benchutil.FreePort(), benchutil.FreePort())
	if err := os.WriteFile(config, []byte(configYAML), 0o644); err != nil {
		return nil, cleanup, err
	}
	// kubeadm's flags (kubeadm-flags.env and the systemd drop-in) less the bootstrap
	// kubeconfig, plus this node's name, address and state directory.
	args := []string{"--config", config, "--kubeconfig", n.kubeconfig,
		"--container-runtime-endpoint", n.runtime.Endpoint(),
		"--hostname-override", nodeName, "--node-ip", n.nodeIP, "--root-dir", filepath.Join(dir, "root")}
	if print {
		fmt.Printf("upstream kubelet: %s %s\n  %s (ports and paths change from run to run):\n%s",
			filepath.Join(binDir, "kubelet"), strings.Join(args, " "), config, indent(configYAML))
	}
	log, err := os.Create(filepath.Join(dir, "kubelet.log"))
	if err != nil {
		return nil, cleanup, err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(binDir, "kubelet"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	benchutil.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, cleanup, err
	}
	return cmd, cleanup, nil
}

// kubeletChains are the iptables chains upstream's kubelet makes at start (its canary,
// the hint of its iptables mode, and KUBE-FIREWALL, which INPUT and OUTPUT jump to and
// which drops packets to 127.0.0.0/8 from other sources), in each table and family.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

// kubeletChainsRemover notes which of kubeletChains and which nftables tables exist
// now, and returns the function that removes those upstream's kubelet added: the
// chains (and the jumps to KUBE-FIREWALL), then the tables that were not there and are
// left empty, so that the shared host's packet filter is as the benchmark found it.
func kubeletChainsRemover() func() {
	type chain struct{ cmd, table, name string }
	existed := map[chain]bool{}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			for _, name := range kubeletChains {
				c := chain{cmd, table, name}
				existed[c] = exec.Command(cmd, "-t", table, "-S", name).Run() == nil
			}
		}
	}
	tablesBefore, _ := exec.Command("nft", "list", "tables").Output()
	return func() {
		for c, was := range existed {
			if was {
				continue
			}
			if c.table == "filter" && c.name == "KUBE-FIREWALL" {
				for _, from := range []string{"INPUT", "OUTPUT"} {
					for exec.Command(c.cmd, "-t", "filter", "-D", from, "-j", c.name).Run() == nil {
					}
				}
			}
			_ = exec.Command(c.cmd, "-t", c.table, "-F", c.name).Run()
			_ = exec.Command(c.cmd, "-t", c.table, "-X", c.name).Run()
		}
		tables, _ := exec.Command("nft", "list", "tables").Output()
		for _, line := range strings.Split(string(tables), "\n") {
			if line == "" || strings.Contains(string(tablesBefore), line) {
				continue
			}
			f := strings.Fields(line) // "table FAMILY NAME"
			if len(f) != 3 {
				continue
			}
			if out, err := exec.Command("nft", "list", "table", f[1], f[2]).Output(); err == nil && !strings.Contains(string(out), "chain ") {
				_ = exec.Command("nft", "delete", "table", f[1], f[2]).Run()
			}
		}
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}

// cgroupMounts are the host's cgroup (v1) and cgroup2 mount points.
func cgroupMounts() []string {
	b, _ := os.ReadFile("/proc/self/mounts")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out
}

// makeCgroupRoot creates root in every hierarchy: upstream's kubelet refuses a
// cgroup root that is missing from one. A new cpuset cgroup starts with no CPUs and
// no memory nodes, so it gets its parent's.
func makeCgroupRoot(root string) error {
	for _, m := range cgroupMounts() {
		dir := filepath.Join(m, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes root and every cgroup under it, in every hierarchy,
// deepest first (a cgroup is removed with rmdir once it has no process and no child).
func removeCgroupRoot(root string) {
	for _, m := range cgroupMounts() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, root), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for try := 0; try < 20; try++ {
			var left []string
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
					left = append([]string{dirs[i]}, left...)
				}
			}
			if dirs = left; len(dirs) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(dirs) > 0 {
			fmt.Fprintln(os.Stderr, "cgroups left behind:", dirs)
		}
	}
}

// removeLogLinks deletes the links upstream's kubelet made in /var/log/containers
// (a path it does not let one change) to log files under dir: pods removed behind
// its back, at the end, leave them.
func removeLogLinks(dir string) {
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(p)
		}
	}
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// load1 is the one-minute load average.
func load1() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
