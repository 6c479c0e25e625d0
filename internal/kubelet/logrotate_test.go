package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerLogsAreRotated checks the kubelet's wiring of log rotation: a running
// container's log past ContainerLogMaxSize is moved aside once the monitor interval
// has passed, and the runtime is asked to reopen it.
func TestContainerLogsAreRotated(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	opts.PodLogsDir = t.TempDir()
	opts.ContainerLogMaxSize = 100
	opts.ContainerLogMonitorInterval = time.Minute
	h.startWith(opts)
	h.createPod(newPod("chatty", "app"))
	h.waitPod("chatty", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	ctx := context.Background()
	cs, err := h.rt.Client().ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("running containers: %v, %v", cs, err)
	}
	st, err := h.rt.Client().ContainerStatus(ctx, cs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	logPath := st.GetStatus().GetLogPath()
	if !strings.HasPrefix(logPath, opts.PodLogsDir) {
		t.Fatalf("log path %q is not under the pod logs directory %q", logPath, opts.PodLogsDir)
	}
	// The fake runtime writes no log: write one past the limit in its place.
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte(strings.Repeat("x", 200)), 0o640); err != nil {
		t.Fatal(err)
	}
	reopens := h.rt.Calls("ReopenContainerLog")
	var rotated []string
	h.eventually("the log rotated", func() bool {
		rotated, _ = filepath.Glob(logPath + ".*")
		return len(rotated) > 0 && h.rt.Calls("ReopenContainerLog") > reopens
	})
	if b, err := os.ReadFile(rotated[0]); err != nil || len(b) != 200 {
		t.Errorf("rotated file %s: %d bytes, %v; want the 200 written", rotated[0], len(b), err)
	}
}
