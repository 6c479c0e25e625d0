package kubelet

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A container that asks to run as non-root does not start when it would run as root:
// its runAsUser is 0, or without one its image's user is root, missing or a name. It
// waits with CreateContainerConfigError and a Failed event says why (upstream's e2e
// "When creating a container with runAsNonRoot"); a numeric non-root user, the
// container's or the image's, runs.
func TestRunAsNonRoot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		imageUser string
		pod, ctr  *v1.SecurityContext // pod's runAsNonRoot/runAsUser as a container's for brevity
		refused   string              // the start of the error, "" when it runs
	}{
		{name: "image-root", imageUser: "", pod: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			refused: "container has runAsNonRoot and image will run as root"},
		{name: "image-uid-zero", imageUser: "0:0", ctr: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			refused: "container has runAsNonRoot and image will run as root"},
		{name: "image-name", imageUser: "app", ctr: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			refused: "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root"},
		{name: "run-as-root", imageUser: "1234", ctr: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			refused: "container's runAsUser breaks non-root policy"},
		{name: "pod-user-root", imageUser: "1234", pod: &v1.SecurityContext{RunAsUser: ptr.To[int64](0)}, ctr: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			refused: "container's runAsUser breaks non-root policy"},
		{name: "image-uid", imageUser: "1234:1234", ctr: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}},
		{name: "explicit-uid", imageUser: "", ctr: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}},
		{name: "container-allows-root", imageUser: "", pod: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, ctr: &v1.SecurityContext{RunAsNonRoot: ptr.To(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			image := "example.com/" + tc.name + ":1"
			h.rt.PreloadImages(image)
			h.rt.SetImageUser(image, tc.imageUser)
			h.start()
			pod := newPod("p", "app")
			pod.Spec.Containers[0].Image = image
			if tc.pod != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: tc.pod.RunAsNonRoot, RunAsUser: tc.pod.RunAsUser}
			}
			pod.Spec.Containers[0].SecurityContext = tc.ctr
			h.createPod(pod)
			if tc.refused == "" {
				h.waitPod("p", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
				return
			}
			p := h.waitPod("p", "CreateContainerConfigError", func(p *v1.Pod) bool {
				cs := containerStatus(p, "app")
				return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError"
			})
			if msg := containerStatus(p, "app").State.Waiting.Message; !strings.HasPrefix(msg, tc.refused) || !strings.Contains(msg, `(pod: "p_default(uid-p)", container: app)`) {
				t.Errorf("waiting message %q, want %q… naming the pod and container", msg, tc.refused)
			}
			if msg := h.waitEvent("p", "Failed"); !strings.HasPrefix(msg, "Error: "+tc.refused) {
				t.Errorf("Failed event %q, want %q", msg, "Error: "+tc.refused)
			}
			if n := h.rt.Calls("CreateContainer"); n != 0 {
				t.Errorf("CreateContainer called %d times for a refused container", n)
			}
		})
	}
}
