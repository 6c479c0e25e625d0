package logrotate_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/kubelet"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/kubelet/logrotate"
	"mizzen/internal/kubelet/podcgroups"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/testing/lockedbuf"
	"mizzen/internal/testing/poll"
)

// contiguousLines returns how many lines "line 1", "line 2", ... out starts with, and
// an error at the first line out of sequence.
func contiguousLines(out string) (int, error) {
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		if l != "line "+strconv.Itoa(n+1) {
			return n, fmt.Errorf("after line %d came %q", n, l)
		}
		n++
	}
	return n, nil
}

// TestChattyContainerOnContainerd rotates the log of a real container that writes a
// line every 10ms, while a follower reads it as `kubectl logs -f` does: the runtime
// reopens its log, at most MaxFiles files remain, and the follower misses no line.
func TestChattyContainerOnContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	for _, bin := range []string{"containerd", "ctr", "runc", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install containerd runc)", bin)
		}
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skip("busybox not installed (apt-get install busybox-static)")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pause := filepath.Join(dir, "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", pause, "../containerd/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building pause: %v\n%s", err, out)
	}
	pauseBin, err := os.ReadFile(pause)
	if err != nil {
		t.Fatal(err)
	}
	cgroups, err := podcgroups.FromMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}

	opts := containerd.Options{DataDir: filepath.Join(dir, "containerd"), Bridge: "mzn-logrot"}
	rtCtx, stopRuntime := context.WithCancel(context.Background())
	stopped, err := containerd.Start(rtCtx, opts, slog.New(slog.NewTextHandler(io.Discard, nil)), pauseBin)
	const uid = "logrot-uid"
	t.Cleanup(func() {
		_ = containerd.RemoveAllPods(context.Background(), opts)
		stopRuntime()
		<-stopped
		_ = exec.Command("ip", "link", "delete", opts.Bridge).Run()
		_ = containerd.RemoveMasquerade(opts.Bridge)
		_ = cgroups.RemovePod(types.UID(uid))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The pod runs in the host's network namespace, so the CNI configuration is only
	// there for the runtime's readiness; no bridge is made.
	if err := opts.WriteCNIConfig("10.231.0.0/24"); err != nil {
		t.Fatal(err)
	}
	const image = "mizzen.local/logrot-chatty:v1"
	if err := containerd.ImportImage(ctx, opts, containerd.Image{
		Name: image,
		Files: []containerd.File{
			{Path: "/bin/busybox", Mode: 0o755, Data: busybox},
			{Path: "/bin/sh", Link: "busybox"},
			{Path: "/bin/sleep", Link: "busybox"},
		},
		Env:        []string{"PATH=/bin"},
		Entrypoint: []string{"/bin/sh", "-c", `i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.01; done`},
	}); err != nil {
		t.Fatal(err)
	}
	rs, _, err := kubelet.ConnectRuntime(ctx, opts.Endpoint(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(context.Background())

	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "chatty", Namespace: "default", Uid: uid},
		LogDirectory: filepath.Join(dir, "pods", "default_chatty_"+uid),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/besteffort/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	sb, err := rs.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := rs.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		LogPath:  "app/0.log",
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(sbCfg.LogDirectory, "app", "0.log")

	followCtx, stopFollowing := context.WithCancel(ctx)
	followed := &lockedbuf.Buffer{}
	followDone := make(chan error, 1)
	go func() {
		followDone <- nodeserver.ReadLogs(followCtx, logPath, nodeserver.LogOptions{
			Tail: -1, Follow: true, PollInterval: 20 * time.Millisecond,
		}, followed)
	}()
	defer func() {
		stopFollowing()
		<-followDone
	}()

	const maxFiles = 3
	m, err := logrotate.New(logrotate.Options{Runtime: rs, MaxSize: 2 << 10, MaxFiles: maxFiles,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Rotate four times, a little over a second apart: rotated names carry seconds.
	var linesAtLastRotation int
	for rotation := 1; rotation <= 4; rotation++ {
		waitFor(t, "the log to pass the limit", func() bool {
			info, err := os.Stat(logPath)
			return err == nil && info.Size() >= 2<<10
		})
		before, err := os.Stat(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.RotateLogs(ctx); err != nil {
			t.Fatalf("rotation %d: %v", rotation, err)
		}
		linesAtLastRotation, _ = contiguousLines(followed.String())
		after, err := os.Stat(logPath)
		if err != nil {
			t.Fatalf("rotation %d: no current log: %v", rotation, err)
		}
		if os.SameFile(before, after) {
			t.Fatalf("rotation %d: the runtime still writes the rotated file", rotation)
		}
		entries, err := os.ReadDir(filepath.Dir(logPath))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) > maxFiles {
			t.Errorf("rotation %d: %d files %v, want at most %d", rotation, len(names), names, maxFiles)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	// Four rotations leave the current log, one older rotation gzipped and the newest
	// as it was written.
	entries, err := os.ReadDir(filepath.Dir(logPath))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != maxFiles || names[0] != "0.log" || !strings.HasSuffix(names[1], ".gz") || strings.HasSuffix(names[2], ".gz") {
		t.Errorf("files after four rotations: %v, want 0.log, one .gz and one uncompressed rotation", names)
	}
	// The runtime writes on into the new file and the follower reads on past the last
	// rotation, with no line lost or repeated.
	waitFor(t, "the follower to read past the last rotation", func() bool {
		n, err := contiguousLines(followed.String())
		if err != nil {
			t.Fatalf("followed log: %v", err)
		}
		return n > linesAtLastRotation+50
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 30*time.Second, 20*time.Millisecond, cond)
}
