package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/cri/fake"
	"mizzen/internal/kubelet/podcgroups"
)

// runningContainer returns the runtime status of the pod's running container.
func (h *harness) runningContainer(podUID, name string) *runtimeapi.ContainerStatus {
	h.t.Helper()
	ctx := context.Background()
	list, err := h.rt.Client().ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodUID: podUID}})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range list {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			st, err := h.rt.Client().ContainerStatus(ctx, c.Id, false)
			if err != nil {
				h.t.Fatal(err)
			}
			return st.Status
		}
	}
	return nil
}

func mountAt(c *runtimeapi.ContainerStatus, path string) *runtimeapi.Mount {
	for _, m := range c.Mounts {
		if m.ContainerPath == path {
			return m
		}
	}
	return nil
}

func TestConfigMapVolumeWaitsForItsSourceAndFollowsUpdates(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	h.startWith(opts)
	ctx := context.Background()

	pod := newPod("cfgpod", "app")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "scratch", MountPath: "/scratch"}}
	h.createPod(pod)

	msg := h.waitEvent("cfgpod", "FailedMount")
	if want := `MountVolume.SetUp failed for volume "config" : configmap "settings" not found`; msg != want {
		t.Errorf("FailedMount message = %q, want %q", msg, want)
	}
	p := h.waitPod("cfgpod", "status written while waiting", func(p *v1.Pod) bool { return containerStatus(p, "app") != nil })
	if w := containerStatus(p, "app").State.Waiting; w == nil || w.Reason != reasonContainerCreating {
		t.Errorf("container state while the configMap is missing = %+v, want waiting ContainerCreating", containerStatus(p, "app").State)
	}
	if n := h.rt.Calls("CreateContainer"); n != 0 {
		t.Errorf("%d containers created before the volume was ready", n)
	}
	summary := ""
	h.eventually("the summary event after two minutes", func() bool {
		evs, _ := h.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.HasPrefix(e.Message, "Unable to attach") {
				summary = e.Message
				return true
			}
		}
		return false
	})
	if want := "Unable to attach or mount volumes: unmounted volumes=[config], unattached volumes=[config scratch]: timed out waiting for the condition"; summary != want {
		t.Errorf("summary event %q, want %q", summary, want)
	}
	// Retries back off: two minutes of waiting cost about ten events, not sixty.
	evs, _ := h.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	for _, e := range evs.Items {
		if e.Reason == "FailedMount" && strings.HasPrefix(e.Message, "MountVolume.SetUp") && (e.Count < 3 || e.Count > 12) {
			t.Errorf("%d FailedMount events in two minutes, want a backed-off handful", e.Count)
		}
	}

	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}, Data: map[string]string{"mode": "blue"}}
	if _, err := h.client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("cfgpod", "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	c := h.runningContainer(string(pod.UID), "app")
	volDir := filepath.Join(opts.RootDir, "pods", string(pod.UID), "volumes")
	for _, want := range []*runtimeapi.Mount{
		{ContainerPath: "/etc/app", HostPath: filepath.Join(volDir, "kubernetes.io~configmap/config"), Readonly: true},
		{ContainerPath: "/scratch", HostPath: filepath.Join(volDir, "kubernetes.io~empty-dir/scratch")},
		{ContainerPath: "/etc/hosts", HostPath: filepath.Join(opts.RootDir, "pods", string(pod.UID), "etc-hosts")},
	} {
		got := mountAt(c, want.ContainerPath)
		if got == nil || got.HostPath != want.HostPath || got.Readonly != want.Readonly {
			t.Errorf("mount %s = %v, want %v", want.ContainerPath, got, want)
		}
	}
	if m := mountAt(c, "/dev/termination-log"); m == nil || !strings.HasPrefix(m.HostPath, filepath.Join(opts.RootDir, "pods", string(pod.UID), "containers", "app")) {
		t.Errorf("termination log mount = %v", m)
	}
	hosts, err := os.ReadFile(filepath.Join(opts.RootDir, "pods", string(pod.UID), "etc-hosts"))
	if err != nil || !strings.Contains(string(hosts), "\tcfgpod\n") {
		t.Errorf("hosts file %q (%v) lacks the pod's own name", hosts, err)
	}
	readMode := func() string {
		b, _ := os.ReadFile(filepath.Join(volDir, "kubernetes.io~configmap/config/mode"))
		return string(b)
	}
	if got := readMode(); got != "blue" {
		t.Errorf("mode file = %q, want blue", got)
	}

	cm.Data["mode"] = "green"
	if _, err := h.client.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the update reaches the volume", func() bool { return readMode() == "green" })

	if err := h.client.CoreV1().Pods("default").Delete(ctx, "cfgpod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("pod directory removed", func() bool {
		_, err := os.Stat(filepath.Join(opts.RootDir, "pods", string(pod.UID)))
		return os.IsNotExist(err)
	})
}

func TestTerminationMessage(t *testing.T) {
	cases := []struct {
		name    string
		policy  v1.TerminationMessagePolicy
		file    string
		log     string
		want    string
		logPath string
	}{
		{name: "from the file", policy: v1.TerminationMessageReadFile, file: "all done", want: "all done"},
		{name: "file wins over the log", policy: v1.TerminationMessageFallbackToLogsOnError, file: "from file", log: "2026-11-30T00:00:00Z stderr F boom\n", want: "from file"},
		{name: "fallback to the log", policy: v1.TerminationMessageFallbackToLogsOnError,
			log: "2026-11-30T00:00:00Z stdout F starting\n2026-11-30T00:00:01Z stderr F boom\n", want: "starting\nboom\n"},
		{name: "no fallback without the policy", policy: v1.TerminationMessageReadFile, log: "2026-11-30T00:00:01Z stderr F boom\n", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.rt.SetContainerBehavior("app", fake.Behavior{Exits: true, After: 30 * time.Second, ExitCode: 2})
			opts := h.options()
			opts.PodLogsDir = t.TempDir()
			h.startWith(opts)
			pod := newPod("ends", "app")
			pod.Spec.RestartPolicy = v1.RestartPolicyNever
			pod.Spec.Containers[0].TerminationMessagePolicy = tc.policy
			h.createPod(pod)
			h.waitPodReal("ends", "running", isRunning)
			c := h.runningContainer(string(pod.UID), "app")
			m := mountAt(c, "/dev/termination-log")
			if m == nil {
				t.Fatal("no termination log mount")
			}
			if err := os.WriteFile(m.HostPath, []byte(tc.file), 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(c.LogPath), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.LogPath, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			p := h.waitPod("ends", "failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			term := containerStatus(p, "app").State.Terminated
			if term == nil || term.Message != tc.want {
				t.Errorf("terminated = %+v, want message %q", term, tc.want)
			}
		})
	}
}

func TestFinishedPodReleasesItsVolumesAndOrphansAreRemoved(t *testing.T) {
	h := newHarness(t)
	h.rt.SetContainerBehavior("job", fake.Behavior{Exits: true, After: 3 * time.Second})
	opts := h.options()
	orphan := filepath.Join(opts.RootDir, "pods", "gone-uid", "volumes", "kubernetes.io~empty-dir", "data")
	if err := os.MkdirAll(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	h.startWith(opts)

	pod := newPod("batch", "job")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	h.createPod(pod)
	podDir := filepath.Join(opts.RootDir, "pods", string(pod.UID))
	h.waitPodReal("batch", "running", isRunning)
	if _, err := os.Stat(filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "scratch")); err != nil {
		t.Fatalf("emptyDir of the running pod: %v", err)
	}
	h.waitPod("batch", "succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	h.eventually("the finished pod's volumes removed", func() bool {
		_, err := os.Stat(filepath.Join(podDir, "volumes"))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(podDir); err != nil {
		t.Errorf("the finished pod's directory (termination messages) should stay while the pod exists: %v", err)
	}
	h.eventually("the orphaned pod directory removed", func() bool {
		_, err := os.Stat(filepath.Join(opts.RootDir, "pods", "gone-uid"))
		return os.IsNotExist(err)
	})
}

func TestObjectCache(t *testing.T) {
	h := newHarness(t)
	c := newObjectCache(h.clock, 10*time.Second)
	fetches := 0
	fetch := func() (any, error) { fetches++; return fetches, nil }
	failing := func() (any, error) { fetches++; return nil, os.ErrNotExist }
	steps := []struct {
		advance time.Duration
		fetch   func() (any, error)
		want    any
		fetched int
	}{
		{0, fetch, 1, 1},
		{9 * time.Second, fetch, 1, 1}, // still fresh
		{time.Second, fetch, 2, 2},     // ten seconds old: fetched again
		{10 * time.Second, failing, nil, 3},
		{0, fetch, 4, 4}, // an error is not kept
	}
	for i, s := range steps {
		h.clock.Step(s.advance)
		got, _ := c.get("k", s.fetch)
		if got != s.want || fetches != s.fetched {
			t.Errorf("step %d: got %v after %d fetches, want %v after %d", i, got, fetches, s.want, s.fetched)
		}
	}
}

func TestDownwardAPIVolumeFollowsLabels(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	h.startWith(opts)
	ctx := context.Background()
	pod := newPod("labelled", "app")
	pod.Labels = map[string]string{"tier": "front"}
	pod.Spec.Volumes = []v1.Volume{{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}}}
	h.createPod(pod)
	h.waitPod("labelled", "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	file := filepath.Join(opts.RootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~downward-api", "info", "labels")
	read := func() string { b, _ := os.ReadFile(file); return string(b) }
	if got := read(); got != `tier="front"` {
		t.Errorf("labels file = %q", got)
	}
	p, err := h.getPod("labelled")
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["tier"] = "back"
	p.Labels["canary"] = "yes"
	if _, err := h.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("new labels in the volume", func() bool { return read() == "canary=\"yes\"\ntier=\"back\"" })
}

// TestOrphanedPodCgroupsAreOnlyThisKubeletsOwn: the cgroup of a pod this kubelet once
// ran (its directory is under the kubelet's root) is removed once the pod is gone; the
// cgroup of a pod it never ran, another kubelet's on the same host, is left alone.
func TestOrphanedPodCgroupsAreOnlyThisKubeletsOwn(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	hierarchy := t.TempDir()
	opts.PodCgroups = podcgroups.New(hierarchy)
	for _, uid := range []string{"mine-gone", "another-kubelets"} {
		if err := os.MkdirAll(filepath.Join(hierarchy, "kubepods", "besteffort", "pod"+uid), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(opts.RootDir, "pods", "mine-gone"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.startWith(opts)
	h.eventually("this kubelet's orphaned pod cgroup removed", func() bool {
		_, err := os.Stat(filepath.Join(hierarchy, "kubepods", "besteffort", "podmine-gone"))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(filepath.Join(hierarchy, "kubepods", "besteffort", "podanother-kubelets")); err != nil {
		t.Errorf("another kubelet's pod cgroup: %v; want it left alone", err)
	}
}

// TestBusyPodCgroupIsRemovedLater: a pod's cgroup still busy when the pod is torn down
// (a container's cgroup not yet removed by runc, a process that outlived its container)
// is removed by the orphan sweep once it is free, and the pod's directory only then.
func TestBusyPodCgroupIsRemovedLater(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	hierarchy := t.TempDir()
	opts.PodCgroups = podcgroups.New(hierarchy)
	// The sweep starts once the kubelet has listed its pods; the removal of an earlier
	// pod's directory shows that it runs.
	earlier := filepath.Join(opts.RootDir, "pods", "earlier")
	if err := os.MkdirAll(earlier, 0o755); err != nil {
		t.Fatal(err)
	}
	h.startWith(opts)
	h.eventually("the orphan sweep running", func() bool {
		_, err := os.Stat(earlier)
		return os.IsNotExist(err)
	})
	pod := newPod("busy", "app")
	cgroup := filepath.Join(hierarchy, "kubepods", "besteffort", "pod"+string(pod.UID))
	// A container's cgroup left in it keeps the pod's from being removed, here as on
	// a cgroup filesystem.
	child := filepath.Join(cgroup, "container")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Fatal(err)
	}
	h.createPod(pod)
	h.waitPod("busy", "Running", isRunning)
	if err := h.client.CoreV1().Pods("default").Delete(context.Background(), "busy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the pod's sandbox removed", func() bool {
		sbs, _ := h.rt.Client().ListPodSandbox(context.Background(), nil)
		return len(sbs) == 0
	})
	podDir := filepath.Join(opts.RootDir, "pods", string(pod.UID))
	for range 2 * int(orphanSweepPeriod/time.Second) {
		h.clock.Step(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := os.Stat(cgroup); err != nil {
		t.Fatalf("the busy pod cgroup: %v", err)
	}
	if _, err := os.Stat(podDir); err != nil {
		t.Fatalf("the pod's directory went while its cgroup could not: %v", err)
	}
	if err := os.Remove(child); err != nil { // runc removes the container's cgroup
		t.Fatal(err)
	}
	h.eventually("the pod cgroup removed", func() bool {
		_, err := os.Stat(cgroup)
		return os.IsNotExist(err)
	})
	h.eventually("the pod's directory removed", func() bool {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err)
	})
}
