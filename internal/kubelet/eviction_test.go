package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/cri/fake"
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
