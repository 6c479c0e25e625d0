package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestRunKubeletReturnsItsStartError: a kubelet whose start fails after its containerd
// is up stops that containerd and returns the error. It used to wait for containerd to
// end with the caller's context, so a restarted kubelet that met a transient error
// hung silently and its node went NotReady.
func TestRunKubeletReturnsItsStartError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	if _, err := exec.LookPath("containerd"); err != nil {
		t.Skip("containerd not installed (apt-get install containerd)")
	}
	dir := t.TempDir()
	pause := filepath.Join(dir, "pause")
	if err := os.WriteFile(pause, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kf := KubeletOptions{
		HostnameOverride: "start-error",
		RootDir:          filepath.Join(dir, "kubelet"),
		ContainerdDir:    filepath.Join(dir, "containerd"),
		PauseBinary:      pause,
		// Checked after containerd is ready: half of a serving key pair.
		TLSCertFile: filepath.Join(dir, "serving.crt"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan error, 1)
	go func() { returned <- RunKubelet(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, kf) }()
	select {
	case err := <-returned:
		if err == nil || !strings.Contains(err.Error(), "go together") {
			t.Fatalf("RunKubelet returned %v, want the serving key pair's error", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("RunKubelet did not return its start error: it waits for its containerd, which nobody stops")
	}
	if out, _ := exec.Command("pgrep", "-f", "containerd --config "+kf.ContainerdDir).Output(); len(out) > 0 {
		t.Fatalf("the kubelet's containerd still runs after RunKubelet returned: pid %s", out)
	}
}
