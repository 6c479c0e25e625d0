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

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
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
