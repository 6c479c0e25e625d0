package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/cri/fake"
	"mizzen/internal/kubelet/eviction"
)

// A pod over one of its local storage limits is evicted as upstream's kubelet does it:
// phase Failed, reason Evicted, upstream's message, an Evicted event, its containers
// stopped.
func TestLocalStorageEviction(t *testing.T) {
	tests := []struct {
		name string
		pod  func() *v1.Pod
		// fill makes the pod use more than it may, given the kubelet's root directory.
		fill func(t *testing.T, h *harness, rootDir string, pod *v1.Pod)
		want string
	}{{
		name: "emptyDir past its sizeLimit",
		pod: func() *v1.Pod {
			p := newPod("scratchy", "app")
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{
				EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Mi"))}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			return p
		},
		fill: func(t *testing.T, _ *harness, rootDir string, pod *v1.Pod) {
			dir := filepath.Join(rootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "scratch")
			if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		want: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
	}, {
		name: "container's writable layer past its limit",
		pod: func() *v1.Pod {
			p := newPod("writer", "app", "quiet")
			for i := range p.Spec.Containers {
				p.Spec.Containers[i].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("4Mi")}
			}
			return p
		},
		fill: func(_ *testing.T, h *harness, _ string, _ *v1.Pod) {
			h.rt.SetContainerBehavior("app", fake.Behavior{WritableLayerBytes: 5 << 20})
		},
		want: `Container app exceeded its local ephemeral storage limit "4Mi". `,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			opts := h.options()
			opts.PodLogsDir = t.TempDir()
			h.startWith(opts)
			pod := tt.pod()
			h.createPod(pod)
			h.waitPod(pod.Name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

			tt.fill(t, h, opts.RootDir, pod)
			p := h.waitPod(pod.Name, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if p.Status.Reason != "Evicted" || p.Status.Message != tt.want {
				t.Errorf("status reason %q message %q, want Evicted, %q", p.Status.Reason, p.Status.Message, tt.want)
			}
			if msg := h.waitEvent(pod.Name, "Evicted"); msg != tt.want {
				t.Errorf("Evicted event message %q, want %q", msg, tt.want)
			}
			cs, err := h.rt.Client().ListContainers(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
					t.Errorf("container %s is %s after the eviction, want exited", c.Metadata.Name, c.State)
				}
			}
			sbs, err := h.rt.Client().ListPodSandbox(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, sb := range sbs {
				if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
					t.Errorf("sandbox %s still ready after the eviction", sb.Id)
				}
			}
		})
	}
}

// memoryMeasurer reports memory pressure until the pod it names has failed (its
// eviction freed the memory), and each pod's working set as given.
type memoryMeasurer struct {
	h        *harness
	hog      string
	low      int64
	workings map[string]int64 // pod name -> working set of its container "app"
}

func (m *memoryMeasurer) Node(context.Context) (eviction.NodeStats, error) {
	available := m.low
	if p, err := m.h.getPod(m.hog); err == nil && p.Status.Phase == v1.PodFailed {
		available = 4 << 30
	}
	return eviction.NodeStats{Memory: &eviction.Observation{Available: available, Capacity: 8 << 30}}, nil
}

func (m *memoryMeasurer) Pods(_ context.Context, pods []*v1.Pod) (map[types.UID]eviction.PodStats, error) {
	out := map[types.UID]eviction.PodStats{}
	for _, p := range pods {
		if ws, ok := m.workings[p.Name]; ok {
			out[p.UID] = eviction.PodStats{Containers: []eviction.ContainerStats{{Name: "app", MemoryWorkingSet: ws}}}
		}
	}
	return out, nil
}

func nodeCondition(h *harness, t v1.NodeConditionType) *v1.NodeCondition {
	n, err := h.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// Under memory pressure the node reports MemoryPressure, the BestEffort pod using
// more than it requests goes first with upstream's message, a new BestEffort pod is
// refused, and the condition clears once the transition period has passed.
func TestMemoryPressureEviction(t *testing.T) {
	h := newHarness(t)
	thresholds, err := eviction.ParseThresholds(eviction.ThresholdFlags{Hard: "memory.available<100Mi"})
	if err != nil {
		t.Fatal(err)
	}
	m := &memoryMeasurer{h: h, hog: "besteffort", low: 80 << 20, workings: map[string]int64{
		"besteffort": 64 << 20, "burstable": 200 << 20,
	}}
	opts := h.options()
	opts.NodePressure = &NodePressure{Thresholds: thresholds, Measurer: m}
	h.startWith(opts)

	burstable := newPod("burstable", "app")
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	h.createPod(burstable)
	h.createPod(newPod("besteffort", "app"))

	p := h.waitPod("besteffort", "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	recovered := h.clock.Now() // the measurer reports plenty of memory from now on
	const want = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container app was using 64Mi, request is 0, has larger consumption of memory. "
	if p.Status.Reason != "Evicted" || p.Status.Message != want {
		t.Errorf("status reason %q message %q, want Evicted, %q", p.Status.Reason, p.Status.Message, want)
	}
	if c := condition(p, v1.DisruptionTarget); c == nil || c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("DisruptionTarget condition %+v, want True, TerminationByKubelet", c)
	}
	if msg := h.waitEvent("besteffort", "Evicted"); msg != want {
		t.Errorf("Evicted event message %q, want %q", msg, want)
	}
	h.eventually("MemoryPressure True", func() bool {
		c := nodeCondition(h, v1.NodeMemoryPressure)
		return c != nil && c.Status == v1.ConditionTrue
	})
	if c := nodeCondition(h, v1.NodeMemoryPressure); c.Reason != "KubeletHasInsufficientMemory" || c.Message != "kubelet has insufficient memory available" {
		t.Errorf("MemoryPressure reason %q message %q", c.Reason, c.Message)
	}

	h.createPod(newPod("late", "app"))
	late := h.waitPod("late", "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if late.Status.Reason != "Evicted" || late.Status.Message != "The node was low on resource: [MemoryPressure]. " {
		t.Errorf("new BestEffort pod: reason %q message %q", late.Status.Reason, late.Status.Message)
	}
	guaranteedLate := newPod("late-burstable", "app")
	guaranteedLate.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	h.createPod(guaranteedLate)
	h.waitPod("late-burstable", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	h.eventually("MemoryPressure False", func() bool {
		c := nodeCondition(h, v1.NodeMemoryPressure)
		return c != nil && c.Status == v1.ConditionFalse
	})
	// The pressure was last seen at most one monitoring period before the eviction
	// freed the memory.
	if held := h.clock.Since(recovered); held < 5*time.Minute-10*time.Second {
		t.Errorf("MemoryPressure cleared %v after the pressure ended, want the 5m transition period", held)
	}
	if c := nodeCondition(h, v1.NodeMemoryPressure); c.Reason != "KubeletHasSufficientMemory" {
		t.Errorf("MemoryPressure reason %q after the transition period", c.Reason)
	}
	if p, _ := h.getPod("burstable"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the burstable pod within its request is %s, want Running", p.Status.Phase)
	}
}

// diskMeasurer reports nodefs short of space, from three minutes after start (when
// image GC may remove images it has known for two), for as long as an unused image
// named "unused" takes up the disk.
type diskMeasurer struct {
	h     *harness
	start time.Time
}

func (m *diskMeasurer) Node(ctx context.Context) (eviction.NodeStats, error) {
	available := int64(500)
	if m.h.clock.Since(m.start) >= 3*time.Minute && hasImage(ctx, m.h, "unused") {
		available = 50
	}
	return eviction.NodeStats{NodeFs: &eviction.FsStats{AvailableBytes: available, CapacityBytes: 1000, InodesFree: 100, Inodes: 100}}, nil
}

func (m *diskMeasurer) Pods(context.Context, []*v1.Pod) (map[types.UID]eviction.PodStats, error) {
	return map[types.UID]eviction.PodStats{}, nil
}

func hasImage(ctx context.Context, h *harness, name string) bool {
	imgs, err := h.rt.Client().ListImages(ctx, nil)
	if err != nil {
		return false
	}
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			if strings.Contains(tag, name) {
				return true
			}
		}
	}
	return false
}

// Under disk pressure the kubelet removes unused images before it evicts anybody; if
// that relieves the pressure no pod goes, DiskPressure is still reported for the
// transition period, and new pods are refused meanwhile.
func TestDiskPressureReclaimsImages(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	if _, err := h.rt.Client().PullImage(ctx, &runtimeapi.ImageSpec{Image: "registry.local/unused:1.0"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	thresholds, err := eviction.ParseThresholds(eviction.ThresholdFlags{Hard: "nodefs.available<10%"})
	if err != nil {
		t.Fatal(err)
	}
	opts := h.options()
	opts.NodePressure = &NodePressure{Thresholds: thresholds, Measurer: &diskMeasurer{h: h, start: h.clock.Now()}}
	h.startWith(opts)
	h.createPod(newPod("web", "app"))
	h.waitPod("web", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	h.eventually("DiskPressure True", func() bool {
		c := nodeCondition(h, v1.NodeDiskPressure)
		return c != nil && c.Status == v1.ConditionTrue
	})
	if c := nodeCondition(h, v1.NodeDiskPressure); c.Reason != "KubeletHasDiskPressure" || c.Message != "kubelet has disk pressure" {
		t.Errorf("DiskPressure reason %q message %q", c.Reason, c.Message)
	}
	h.eventually("the unused image removed", func() bool { return !hasImage(ctx, h, "unused") })
	if !hasImage(ctx, h, "registry.local/app") {
		t.Error("the image of the running pod was removed")
	}

	late := newPod("late", "app")
	late.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	h.createPod(late)
	p := h.waitPod("late", "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "Evicted" || p.Status.Message != "The node was low on resource: [DiskPressure]. " {
		t.Errorf("new pod under disk pressure: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if p, _ := h.getPod("web"); p.Status.Phase != v1.PodRunning {
		t.Errorf("web is %s after image GC relieved the pressure, want Running", p.Status.Phase)
	}
}
