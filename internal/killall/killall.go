// Package killall stops everything a data directory's cluster runs on this host and
// removes what it leaves there, as k3s-killall.sh does for k3s: the mizzen processes
// of the data directory, its containerd and container shims, every pod's processes and
// cgroups, every mount under the directory (volumes, rootfs, network namespaces), the
// pod network's bridge, vxlan device and nftables tables. Uninstall does that and removes the
// directory. A plain stop leaves pods running on purpose (a restarted kubelet adopts
// them); this is for when the user wants nothing left.
package killall

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/kubelet/podcgroups"
	"mizzen/internal/netpol"
	"mizzen/internal/podnet"
	"mizzen/internal/proxy"
)

// Options say whose processes and leftovers to remove.
type Options struct {
	Dir datadir.Dir
	// Bridge is the pod network's bridge; by default the one the agent's CNI
	// configuration names. A data directory whose agent never wrote one (a server
	// run without its agent) made no pod network, so none is removed: a bridge of
	// the default name on this host is another data directory's.
	Bridge string
	// GracePeriod is how long mizzen processes get after SIGTERM before SIGKILL.
	GracePeriod time.Duration
	Log         *slog.Logger
	// Proc is the proc filesystem (/proc); tests point it elsewhere.
	Proc string
}

// Report is what Run found and removed.
type Report struct {
	Processes, PodProcesses, Cgroups, Mounts int
	Bridge                                   string
}

func (r Report) String() string {
	if r.Bridge == "" {
		return fmt.Sprintf("stopped %d processes and %d pod processes, removed %d pod cgroups and %d mounts; no pod network of this data directory",
			r.Processes, r.PodProcesses, r.Cgroups, r.Mounts)
	}
	return fmt.Sprintf("stopped %d processes and %d pod processes, removed %d pod cgroups and %d mounts, and the pod network %s",
		r.Processes, r.PodProcesses, r.Cgroups, r.Mounts, r.Bridge)
}

// Run stops and removes everything of opts.Dir's cluster on this host. It goes on past
// errors, so that one stubborn leftover does not keep the rest, and returns them all.
func Run(opts Options) (Report, error) {
	if opts.Proc == "" {
		opts.Proc = "/proc"
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = 20 * time.Second
	}
	root, err := filepath.Abs(opts.Dir.Root())
	if err != nil {
		return Report{}, err
	}
	opts.Dir = datadir.Dir(root)
	var report Report
	var errs []error
	if report.Bridge = opts.Bridge; report.Bridge == "" {
		report.Bridge = bridgeOf(opts.Dir)
	}

	// The mizzen processes first, gently: a server withdraws its endpoints and leader
	// Leases on SIGTERM. Then the runtime, which has nothing left to save.
	procs := processesOf(opts.Proc, opts.Dir)
	report.Processes = len(procs.mizzen) + len(procs.runtime)
	signalAll(procs.mizzen, syscall.SIGTERM)
	waitGone(procs.mizzen, opts.GracePeriod)
	signalAll(procs.mizzen, syscall.SIGKILL)
	signalAll(procs.runtime, syscall.SIGKILL)
	waitGone(append(procs.mizzen, procs.runtime...), 5*time.Second)
	// A shim being started when its containerd was killed daemonizes after the scan
	// above; look again until nothing of the runtime is left.
	for pass := 0; pass < 3; pass++ {
		late := processesOf(opts.Proc, opts.Dir).runtime
		if len(late) == 0 {
			break
		}
		report.Processes += len(late)
		signalAll(late, syscall.SIGKILL)
		waitGone(late, 5*time.Second)
	}

	// Every pod's processes, found through its cgroups, whichever QoS class it is in.
	cgroups, err := podcgroups.FromMountinfo(filepath.Join(opts.Proc, "self", "mountinfo"))
	if err != nil {
		errs = append(errs, err)
	} else {
		killed, removed, err := killPods(cgroups, podUIDs(opts.Dir))
		report.PodProcesses, report.Cgroups = killed, removed
		if err != nil {
			errs = append(errs, err)
		}
	}

	n, err := unmountUnder(filepath.Join(opts.Proc, "self", "mountinfo"), root)
	report.Mounts = n
	if err != nil {
		errs = append(errs, err)
	}

	if report.Bridge == "" {
		return report, errors.Join(errs...)
	}
	if err := deleteLink(report.Bridge); err != nil {
		errs = append(errs, err)
	}
	if err := containerd.RemoveMasquerade(report.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("removing the pod network's masquerade table: %w", err))
	}
	if err := (proxy.Table{Name: proxy.TableNameFor(report.Bridge)}).Delete(); err != nil {
		errs = append(errs, fmt.Errorf("removing the service proxy's table: %w", err))
	}
	if err := podnet.RemoveDevice(report.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("removing the pod network's vxlan device: %w", err))
	}
	if err := (netpol.Table{Name: netpol.TableName(report.Bridge)}).Delete(); err != nil {
		errs = append(errs, fmt.Errorf("removing the network policy table: %w", err))
	}
	return report, errors.Join(errs...)
}

// Uninstall runs Run and then removes the data directory.
func Uninstall(opts Options) (Report, error) {
	report, err := Run(opts)
	if rmErr := os.RemoveAll(opts.Dir.Root()); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	return report, err
}

// bridgeOf is the bridge the agent's CNI configuration names, or "" when it has none.
func bridgeOf(dir datadir.Dir) string {
	files, _ := filepath.Glob(filepath.Join(containerd.Options{DataDir: dir.Containerd()}.CNIConfDir(), "*.conflist"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var list struct {
			Plugins []struct {
				Type   string `json:"type"`
				Bridge string `json:"bridge"`
			} `json:"plugins"`
		}
		if json.Unmarshal(data, &list) != nil {
			continue
		}
		for _, p := range list.Plugins {
			if p.Type == "bridge" && p.Bridge != "" {
				return p.Bridge
			}
		}
	}
	return ""
}

// processes are a data directory's: mizzen components, and its containerd and shims.
type processes struct {
	mizzen, runtime []int
}

// components are the mizzen subcommands that run as long-lived processes.
var components = []string{"server", "agent", "apiserver", "etcd", "scheduler", "controller-manager",
	"cloud-controller-manager", "kubelet", "proxy", "dns", "ingress", "metrics-server", "dashboard"}

// processesOf finds the data directory's processes by their command lines: a mizzen
// component naming the directory (or, for the default directory, naming none), and a
// containerd or shim whose arguments lie under it. Other commands that merely mention
// the directory (a shell, this very command) are left alone.
func processesOf(proc string, dir datadir.Dir) processes {
	var out processes
	entries, _ := os.ReadDir(proc)
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		switch classify(args, dir) {
		case "mizzen":
			out.mizzen = append(out.mizzen, pid)
		case "runtime":
			out.runtime = append(out.runtime, pid)
		}
	}
	return out
}

// classify says whether a command line is one of dir's mizzen components ("mizzen"),
// its runtime ("runtime"), or neither ("").
func classify(args []string, dir datadir.Dir) string {
	if len(args) == 0 {
		return ""
	}
	mentions := slices.ContainsFunc(args, func(a string) bool { return underDir(a, dir.Root()) })
	switch base := filepath.Base(args[0]); {
	case base == "mizzen" || strings.HasPrefix(base, "mizzen") && !strings.HasPrefix(base, "mizzen-"):
		if len(args) < 2 || !slices.Contains(components, args[1]) {
			return ""
		}
		namesDir := slices.ContainsFunc(args, func(a string) bool { return a == "--data-dir" || strings.HasPrefix(a, "--data-dir=") })
		// A component naming no directory is the default directory's, unless it is
		// pointed at files elsewhere (a standalone scheduler with another cluster's
		// kubeconfig, as the benchmarks start): that one belongs to whoever started it.
		elsewhere := slices.ContainsFunc(args[2:], func(a string) bool { return isPath(a) && !underDir(a, dir.Root()) })
		if mentions || !namesDir && !elsewhere && dir.Root() == datadir.Default {
			return "mizzen"
		}
	case base == "containerd" || strings.HasPrefix(base, "containerd-shim"):
		if mentions {
			return "runtime"
		}
	}
	return ""
}

// underDir reports whether an argument is dir or a path under it, alone or as a flag's
// value (--x=PATH).
func underDir(arg, dir string) bool {
	if _, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(arg, "-") {
		arg = v
	}
	return arg == dir || strings.HasPrefix(arg, dir+"/")
}

// isPath reports whether an argument is an absolute path, alone or as a flag's value.
func isPath(arg string) bool {
	if _, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(arg, "-") {
		arg = v
	}
	return filepath.IsAbs(arg)
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// waitGone waits until none of pids is alive, or timeout.
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !slices.ContainsFunc(pids, alive) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := bytes.Cut(stat, []byte(") "))
	return len(rest) == 0 || rest[0] != 'Z'
}

// podUIDs are the pods this data directory's kubelet ran: a directory each under its
// root, as the kubelet's own orphan sweep decides what is its.
func podUIDs(dir datadir.Dir) []string {
	entries, _ := os.ReadDir(filepath.Join(dir.Kubelet(), "pods"))
	var uids []string
	for _, e := range entries {
		if e.IsDir() {
			uids = append(uids, e.Name())
		}
	}
	return uids
}

// killPods kills every process in the pods' cgroups (their containers' too) and
// removes the cgroups, innermost first; it returns how many processes it killed and
// how many pod cgroups it removed.
func killPods(cgroups *podcgroups.Cgroups, uids []string) (killed, removed int, err error) {
	var errs []error
	for _, uid := range uids {
		dirs := cgroups.PodDirs(uid)
		if len(dirs) == 0 {
			continue
		}
		thaw(dirs)
		for attempt := 0; attempt < 50; attempt++ {
			pids := pidsIn(dirs)
			if len(pids) == 0 {
				break
			}
			if attempt == 0 {
				killed += len(pids)
			}
			signalAll(pids, syscall.SIGKILL)
			time.Sleep(100 * time.Millisecond)
		}
		gone := true
		for _, d := range dirs {
			if err := removeTree(d); err != nil {
				errs = append(errs, err)
				gone = false
			}
		}
		if gone {
			removed++
		}
	}
	return killed, removed, errors.Join(errs...)
}

// pidsIn lists the processes in the cgroup directories and every cgroup below them.
func pidsIn(dirs []string) []int {
	seen := map[int]bool{}
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			f, err := os.Open(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			defer f.Close()
			s := bufio.NewScanner(f)
			for s.Scan() {
				if pid, err := strconv.Atoi(strings.TrimSpace(s.Text())); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var pids []int
	for pid := range seen {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// thaw thaws every frozen cgroup in the directories and below them. runc freezes a
// container's cgroup while it signals its processes and thaws it after: a runc killed in
// between (its shim stopped first) leaves the processes frozen, and a frozen process
// does not die of SIGKILL until thawed.
func thaw(dirs []string) {
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			state := filepath.Join(path, "freezer.state")
			if data, err := os.ReadFile(state); err == nil && strings.TrimSpace(string(data)) != "THAWED" {
				_ = os.WriteFile(state, []byte("THAWED"), 0)
			}
			return nil
		})
	}
}

// removeTree removes a cgroup directory and the cgroups below it, innermost first
// (cgroupfs directories are removed with rmdir, never by deleting their files).
func removeTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// unmountUnder unmounts every mount point under root, innermost (latest) first, and
// returns how many it unmounted.
func unmountUnder(mountinfo, root string) (int, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return 0, err
	}
	points, err := mountPointsUnder(f, root)
	f.Close()
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", points[i], err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// mountPointsUnder reads a mountinfo file and returns the mount points at or under
// root, in mount order.
func mountPointsUnder(r io.Reader, root string) ([]string, error) {
	var points []string
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		point := podcgroups.UnescapeMountinfo(fields[4])
		if point == root || strings.HasPrefix(point, root+"/") {
			points = append(points, point)
		}
	}
	return points, s.Err()
}

// deleteLink removes a network link, if there is one. It asks the kernel in this
// process's network namespace (netlink), not /sys/class/net, which shows the namespace
// sysfs was mounted in: under `nsenter --net` that is the host's, and the bridge was missed.
func deleteLink(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link delete %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}
