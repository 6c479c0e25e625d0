package e2e

import (
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
)

// TestKillallLeavesNothing runs a cluster with a pod that has a volume, then
// `mizzen killall`: afterwards no process of the data directory runs (server,
// containerd, shims, the pod's own), nothing is mounted under it, and the pod network's
// bridge and nftables tables are gone. `mizzen uninstall` then removes the directory.
func TestKillallLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs containerd")
	}
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	const bridge = "mzn-killall"
	stageImages(t, dataDir, images, "agnhost.tar")
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", "10.238.0.0/16", "--service-cluster-ip-range", "10.120.0.0/16",
		"--pod-bridge", bridge, "--kubelet-port", strconv.Itoa(freePort(t)), "--disable", "metrics-server,dns")
	t.Cleanup(func() { cleanupHost(t, c, dataDir, bridge) }) // in case killall fails

	ctx := context.Background()
	client := clientFor(t, c)
	readyNode(t, ctx, client, dataDir, images)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "keeper"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: agnhostImage, Args: []string{"pause"},
				VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}}},
			Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, func() error {
		p, err := client.CoreV1().Pods("default").Get(ctx, "keeper", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("pod is %s", p.Status.Phase)
		}
		return nil
	})
	if len(mountsUnder(t, dataDir)) == 0 {
		t.Fatal("a running pod with a memory-backed volume should have mounts under the data directory")
	}
	if !linkExists(bridge) {
		t.Fatalf("the pod network's bridge %s should exist while the pod runs", bridge)
	}
	// The pod's own process: agnhost pause, in a cgroup of the pod.
	podProcess := 0
	for _, pid := range processesMentioning("pause") {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.HasSuffix(exe, "agnhost") {
			podProcess = pid
		}
	}

	out, err := exec.Command(mizzenBin, "killall", "--data-dir", dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("mizzen killall: %v\n%s", err, out)
	}
	t.Logf("mizzen killall: %s", out)
	_ = c.cmd.Wait() // reap the server killall stopped

	if pids := processesMentioning(dataDir); len(pids) > 0 {
		t.Errorf("processes of the data directory still run: %v", pids)
	}
	if podProcess != 0 && processAlive(podProcess) {
		t.Errorf("the pod's process %d still runs", podProcess)
	}
	if m := mountsUnder(t, dataDir); len(m) > 0 {
		t.Errorf("still mounted under the data directory: %v", m)
	}
	if linkExists(bridge) {
		t.Errorf("the bridge %s is still there", bridge)
	}
	if tables, _ := exec.Command("nft", "list", "tables").CombinedOutput(); strings.Contains(string(tables), bridge) {
		t.Errorf("nftables tables of %s are still there:\n%s", bridge, tables)
	}

	out, err = exec.Command(mizzenBin, "uninstall", "--data-dir", dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("mizzen uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the data directory is still there after uninstall: %v", err)
	}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir) {
			out = append(out, f[1])
		}
	}
	return out
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// processAlive reports whether pid runs and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}
