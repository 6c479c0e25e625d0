package kubelet

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/cri/fake"
)

func imageVolumePod() *v1.Pod {
	pod := newPod("iv", "app")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		Image: &v1.ImageVolumeSource{Reference: "registry.local/data:1.0", PullPolicy: v1.PullAlways}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "data", MountPath: "/volume"},
		{Name: "data", MountPath: "/sub", SubPath: "etc"},
	}
	return pod
}

func TestImageVolumeIsPulledAndMountedByTheRuntime(t *testing.T) {
	h := newHarness(t)
	h.rt = fake.New(fake.Options{Clock: h.clock, RuntimeName: "containerd", RuntimeVersion: "v2.1.4", RecordCalls: true})
	h.start()
	h.createPod(imageVolumePod())
	h.waitPod("iv", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	// The volume's pull is an event about the pod, as upstream's.
	h.eventually("the image volume's Pulling event", func() bool {
		evs, _ := h.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.Reason == "Pulling" && e.Message == `Pulling image "registry.local/data:1.0"` && e.InvolvedObject.FieldPath == "" {
				return true
			}
		}
		return false
	})
	list, err := h.rt.Client().ListContainers(context.Background(), nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("containers %v, %v", list, err)
	}
	st, err := h.rt.Client().ContainerStatus(context.Background(), list[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	var images []*runtimeapi.Mount
	for _, m := range st.Status.Mounts {
		if m.Image != nil {
			images = append(images, m)
		}
	}
	if len(images) != 2 {
		t.Fatalf("image mounts %v", st.Status.Mounts)
	}
	for _, m := range images {
		if m.HostPath != "" || !m.Readonly || m.Image.UserSpecifiedImage != "registry.local/data:1.0" || m.Image.Image == "" {
			t.Errorf("image mount %v", m)
		}
		want := map[string]string{"/volume": "", "/sub": "etc"}[m.ContainerPath]
		if m.ImageSubPath != want {
			t.Errorf("mount at %s has image subPath %q, want %q", m.ContainerPath, m.ImageSubPath, want)
		}
	}
}

func TestImageVolumeOnARuntimeThatCannotMountImages(t *testing.T) {
	h := newHarness(t) // containerd 1.6.20, which ignores CRI Mount.image
	h.start()
	h.createPod(imageVolumePod())
	p := h.waitPod("iv", "a waiting reason", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == reasonConfigError
	})
	msg := containerStatus(p, "app").State.Waiting.Message
	if !strings.Contains(msg, `image volume "data"`) || !strings.Contains(msg, "containerd 2.1 or later") {
		t.Errorf("waiting message %q", msg)
	}
	if ev := h.waitEvent("iv", "Failed"); ev != "Error: "+msg {
		t.Errorf("Failed event %q", ev)
	}
	if list, _ := h.rt.Client().ListContainers(context.Background(), nil); len(list) != 0 {
		t.Errorf("a container was created without its image volume: %v", list)
	}
}

func TestImageVolumeSupport(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		supported     bool
	}{
		{"containerd", "1.6.20~ds1", false},
		{"containerd", "v2.0.5", false},
		{"containerd", "v2.1.0", true},
		{"containerd", "2.4.2", true},
		{"containerd", "v3.0.0", true},
		{"cri-o", "1.31.0", true},
		{"fake", "0.1.0", true},
	} {
		if got := imageVolumeSupport(tc.name, tc.version) == ""; got != tc.supported {
			t.Errorf("%s %s: supported %v, want %v", tc.name, tc.version, got, tc.supported)
		}
	}
}
