package eviction

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"mizzen/internal/cri/fake"
)

const meminfo = `MemTotal:        8388608 kB
MemFree:         1048576 kB
MemAvailable:    4194304 kB
Inactive(file):  2097152 kB
`

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHostNode(t *testing.T) {
	const gi = 1 << 30
	tests := []struct {
		name      string
		cgroup    map[string]string // files of the memory cgroup root; none for cgroup v2
		wantAvail int64
	}{{
		name:   "cgroup v1: root usage less total_inactive_file",
		cgroup: map[string]string{"memory.usage_in_bytes": "6442450944\n", "memory.stat": "cache 1\ntotal_cache 2\ntotal_inactive_file 1073741824\n"},
		// 8Gi - (6Gi - 1Gi)
		wantAvail: 3 * gi,
	}, {
		name: "no memory cgroup: meminfo's used less inactive file pages",
		// 8Gi - ((8Gi - 1Gi) - 2Gi)
		wantAvail: 3 * gi,
	}, {
		name:      "cgroup v1 usage above capacity leaves nothing",
		cgroup:    map[string]string{"memory.usage_in_bytes": "10737418240\n", "memory.stat": "total_inactive_file 0\n"},
		wantAvail: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc, cg, root := t.TempDir(), t.TempDir(), t.TempDir()
			writeFiles(t, proc, map[string]string{
				"meminfo": meminfo, "sys/kernel/pid_max": "4194304\n", "sys/kernel/threads-max": "65536\n",
			})
			writeFiles(t, cg, tt.cgroup)
			h, err := NewHost(HostOptions{
				RootDir: root, ProcDir: proc, MemoryCgroup: cg, Runtime: fake.New(fake.Options{}).Client(),
				EmptyDirPath: func(*v1.Pod, string) string { return "" }, LogDir: func(*v1.Pod) string { return "" },
			})
			if err != nil {
				t.Fatal(err)
			}
			n, err := h.Node(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n.Memory == nil || n.Memory.Capacity != 8*gi || n.Memory.Available != tt.wantAvail {
				t.Errorf("memory %+v, want %d available of %d", n.Memory, tt.wantAvail, 8*gi)
			}
			// The smaller of pid_max and threads-max; this machine runs some tasks.
			if n.PIDs == nil || n.PIDs.Capacity != 65536 || n.PIDs.Available <= 0 || n.PIDs.Available >= 65536 {
				t.Errorf("pids %+v, want some of 65536 available", n.PIDs)
			}
			if n.NodeFs == nil || n.NodeFs.CapacityBytes <= 0 || n.NodeFs.AvailableBytes > n.NodeFs.CapacityBytes {
				t.Errorf("nodefs %+v", n.NodeFs)
			}
			// Without a runtime to ask, imagefs is the root directory's filesystem.
			if n.ImageFs == nil || n.ImageFs.CapacityBytes != n.NodeFs.CapacityBytes {
				t.Errorf("imagefs %+v, want nodefs's filesystem %+v", n.ImageFs, n.NodeFs)
			}
		})
	}
}

func TestHostPods(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := fake.New(fake.Options{Clock: clk})
	pod := pod([]v1.Volume{emptyDir("scratch", "", ""), emptyDir("shm", "", v1.StorageMediumMemory)}, container("app", ""))
	pod.ObjectMeta = metav1.ObjectMeta{Name: "p", Namespace: "default", UID: types.UID("uid-p")}
	runContainer(t, rt, pod, "app")
	rt.SetContainerBehavior("app", fake.Behavior{WritableLayerBytes: 3 * mi})
	root := t.TempDir()
	emptyDirPath := func(p *v1.Pod, vol string) string { return filepath.Join(root, string(p.UID), vol) }
	logDir := func(p *v1.Pod) string { return filepath.Join(root, "logs", string(p.UID)) }
	writeFile(t, filepath.Join(emptyDirPath(pod, "scratch"), "big"), 2*mi)
	writeFile(t, filepath.Join(emptyDirPath(pod, "shm"), "big"), 5*mi)
	writeFile(t, filepath.Join(logDir(pod), "app", "0.log"), mi)
	h, err := NewHost(HostOptions{
		RootDir: root, Runtime: rt.Client(), EmptyDirPath: emptyDirPath, LogDir: logDir,
		PodProcesses: func(uid types.UID) (int64, bool) { return 7, uid == pod.UID },
	})
	if err != nil {
		t.Fatal(err)
	}
	unstarted := memPod("unstarted", 0, "")
	stats, err := h.Pods(context.Background(), []*v1.Pod{pod, unstarted})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stats[unstarted.UID]; ok {
		t.Error("a pod without containers was measured")
	}
	s, ok := stats[pod.UID]
	if !ok || len(s.Containers) != 1 {
		t.Fatalf("stats %+v, want the pod's one container", stats)
	}
	c := s.Containers[0]
	if c.Name != "app" || c.RootfsBytes != 3*mi || c.MemoryWorkingSet <= 0 || c.LogsBytes < mi || c.LogsBytes > 2*mi {
		t.Errorf("container stats %+v", c)
	}
	// Only the disk-backed emptyDir counts.
	if s.VolumeBytes < 2*mi || s.VolumeBytes >= 5*mi || s.VolumeInodes != 2 {
		t.Errorf("volumes %d bytes %d inodes, want the scratch directory and its file", s.VolumeBytes, s.VolumeInodes)
	}
	if s.Processes != 7 {
		t.Errorf("processes %d, want 7", s.Processes)
	}
}

func TestImageGC(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := fake.New(fake.Options{Clock: clk})
	c := rt.Client()
	pull := func(ref string) {
		t.Helper()
		if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	images := func() []string {
		t.Helper()
		imgs, err := c.ListImages(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, img := range imgs {
			out = append(out, img.RepoTags...)
		}
		slices.Sort(out)
		return out
	}
	pull("registry.local/old:1")
	runContainer(t, rt, memPod("p", 0, ""), "app") // uses "img"
	gc, err := NewImageGC(ImageGCOptions{Runtime: c, Images: c, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// Images first seen now are too young to go.
	if err := gc.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	if got := images(); len(got) != 2 {
		t.Fatalf("images after a reclaim of young images: %q, want both", got)
	}
	clk.Step(time.Minute)
	pull("registry.local/new:1")
	clk.Step(time.Minute)
	if err := gc.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	// old is unused and two minutes known; new was first seen a minute ago; img is used.
	got := images()
	if len(got) != 2 || slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "old") }) ||
		!slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "new") }) {
		t.Errorf("images left %q, want the used one and the young one", got)
	}
}
