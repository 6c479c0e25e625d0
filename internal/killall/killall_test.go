package killall

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/kubelet/podcgroups"
)

func TestClassify(t *testing.T) {
	d := datadir.Dir("/srv/d")
	for _, tc := range []struct {
		args []string
		dir  datadir.Dir
		want string
	}{
		{[]string{"/usr/bin/mizzen", "server", "--data-dir", "/srv/d"}, d, "mizzen"},
		{[]string{"_output/bin/mizzen", "agent", "--data-dir=/srv/d", "--kubeconfig", "k"}, d, "mizzen"},
		{[]string{"/usr/bin/mizzen", "server", "--data-dir", "/srv/other"}, d, ""},
		{[]string{"/usr/bin/mizzen", "server", "--data-dir", "/srv/d2"}, d, ""},
		// The default data directory is the one a server naming none uses.
		{[]string{"/usr/bin/mizzen", "server"}, datadir.Dir(datadir.Default), "mizzen"},
		{[]string{"/usr/bin/mizzen", "server"}, d, ""},
		{[]string{"/usr/bin/mizzen", "scheduler", "--kubeconfig", "/var/lib/mizzen/scheduler.kubeconfig"}, datadir.Dir(datadir.Default), "mizzen"},
		{[]string{"/usr/bin/mizzen", "dns", "--port=53"}, datadir.Dir(datadir.Default), "mizzen"},
		// ... but not a standalone component pointed at another directory's files.
		{[]string{"/tmp/mizzen", "scheduler", "--config", "/tmp/bench/bench-scheduler.yaml", "--secure-port", "0"}, datadir.Dir(datadir.Default), ""},
		{[]string{"/tmp/mizzen", "controller-manager", "--kubeconfig=/tmp/bench/cm.kubeconfig"}, datadir.Dir(datadir.Default), ""},
		// Commands that are no component, even naming the directory, are left alone.
		{[]string{"/usr/bin/mizzen", "killall", "--data-dir", "/srv/d"}, d, ""},
		{[]string{"/usr/bin/mizzen", "kubectl", "--kubeconfig", "/srv/d/admin.kubeconfig"}, d, ""},
		{[]string{"/bin/bash", "-c", "mizzen killall --data-dir /srv/d"}, d, ""},
		{[]string{"/srv/d/mizzen-pause"}, d, ""},
		{[]string{"containerd", "--config", "/srv/d/agent/containerd/containerd.toml"}, d, "runtime"},
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", "/srv/d/agent/containerd/containerd.sock"}, d, "runtime"},
		{[]string{"containerd", "--config", "/etc/containerd/config.toml"}, d, ""},
		{[]string{"containerd", "--config", "/srv/d-other/containerd.toml"}, d, ""},
	} {
		if got := classify(tc.args, tc.dir); got != tc.want {
			t.Errorf("classify(%q, %s) = %q, want %q", tc.args, tc.dir, got, tc.want)
		}
	}
}

func TestMountPointsUnder(t *testing.T) {
	const mountinfo = `22 1 8:1 / / rw - ext4 /dev/vda rw
100 22 0:50 / /srv/d/agent/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/x rw - tmpfs tmpfs rw
101 22 0:51 / /srv/d/agent/containerd/state/netns/cni-1 rw - nsfs nsfs rw
102 22 0:52 / /srv/d-other/x rw - tmpfs tmpfs rw
103 22 0:53 / /srv/d/with\040space rw - tmpfs tmpfs rw
`
	got, err := mountPointsUnder(strings.NewReader(mountinfo), "/srv/d")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/srv/d/agent/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/x", "/srv/d/agent/containerd/state/netns/cni-1", "/srv/d/with space"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestBridgeOfReadsTheAgentsCNIConfiguration(t *testing.T) {
	d := datadir.Dir(t.TempDir())
	// No agent ran there: the host's mizzen0, if any, is another data directory's.
	if got := bridgeOf(d); got != "" {
		t.Fatalf("without a configuration: %q, want none", got)
	}
	opts := containerd.Options{DataDir: d.Containerd(), Bridge: "mzn-x"}
	conf, err := containerd.CNIConfList("10.1.0.0/24", opts.Bridge, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(opts.CNIConfDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(opts.CNIConfDir(), "10-mizzen.conflist"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := bridgeOf(d); got != "mzn-x" {
		t.Fatalf("got %q, want mzn-x", got)
	}
}

// The bridge is found, and deleted, in the namespace killall runs in (`nsenter --net`
// leaves /sys showing the host's links): a bridge made in a fresh network namespace
// that only this test's thread is in.
func TestDeleteLinkInTheCallersNetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	errc := make(chan error, 1)
	go func() {
		// The thread stays locked, so it ends with the goroutine, namespace and all.
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		if out, err := exec.Command("ip", "link", "add", "mzkill-test", "type", "bridge").CombinedOutput(); err != nil {
			errc <- fmt.Errorf("ip link add: %v: %s", err, out)
			return
		}
		if err := deleteLink("mzkill-test"); err != nil {
			errc <- err
			return
		}
		if _, err := net.InterfaceByName("mzkill-test"); err == nil {
			errc <- fmt.Errorf("mzkill-test is still there after deleteLink")
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestKillPodsThawsFrozenCgroups freezes a pod's container cgroup with a process in it,
// as a runc stopped between freezing and thawing leaves it, and expects killPods to
// kill the process and remove the cgroups all the same.
func TestKillPodsThawsFrozenCgroups(t *testing.T) {
	const freezer = "/sys/fs/cgroup/freezer"
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat(filepath.Join(freezer, "freezer.state")); err != nil {
		if _, err := os.Stat(filepath.Join(freezer, "cgroup.procs")); err != nil {
			t.Skip("no cgroup v1 freezer hierarchy")
		}
	}
	root := filepath.Join(freezer, fmt.Sprintf("mizzen-killall-test-%d", os.Getpid()))
	const uid = "0c3f6f5e-frozen"
	container := filepath.Join(root, "kubepods", "burstable", "pod"+uid, "c1")
	if err := os.MkdirAll(container, 0o755); err != nil {
		t.Skipf("cannot make a freezer cgroup: %v", err)
	}
	t.Cleanup(func() { _ = removeTree(root) })
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- sleep.Wait() }()
	if err := os.WriteFile(filepath.Join(container, "cgroup.procs"), []byte(fmt.Sprint(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(container, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		t.Fatal(err)
	}
	killed, removed, err := killPods(podcgroups.New(root), []string{uid})
	if err != nil {
		t.Fatalf("killPods: %v", err)
	}
	if killed != 1 || removed != 1 {
		t.Errorf("killed %d processes and removed %d pod cgroups, want 1 and 1", killed, removed)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the frozen process is still alive")
	}
	if _, err := os.Stat(filepath.Dir(container)); !os.IsNotExist(err) {
		t.Errorf("the pod's cgroup is still there: %v", err)
	}
}
