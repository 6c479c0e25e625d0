package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// On a host without AppArmor a pod asking for a profile (its own, a container's or the
// deprecated annotation) is refused at admission with upstream's reason and message,
// rather than run unconfined; Unconfined, or no profile, runs. Where the host enforces
// it, the pod runs.
func TestAppArmorAdmission(t *testing.T) {
	for _, enforced := range []bool{false, true} {
		h := newHarness(t)
		opts := h.options()
		opts.AppArmor = ptr.To(enforced)
		h.startWith(opts)

		asks := newPod("asks", "app")
		asks.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		annotated := newPod("annotated", "app")
		annotated.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "localhost/mine"}
		unconfined := newPod("unconfined", "app")
		unconfined.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}
		for _, p := range []*v1.Pod{asks, annotated, unconfined} {
			h.createPod(p)
		}
		h.waitPod("unconfined", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
		for _, name := range []string{"asks", "annotated"} {
			if enforced {
				h.waitPod(name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
				continue
			}
			p := h.waitPod(name, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if p.Status.Reason != "AppArmor" || p.Status.Message != "Cannot enforce AppArmor: AppArmor is not enabled on the host" {
				t.Errorf("%s: reason %q message %q", name, p.Status.Reason, p.Status.Message)
			}
		}
		h.stop()
	}
}

// The profile reaches the runtime in the CRI field and in the older string form.
func TestAppArmorForRuntime(t *testing.T) {
	for _, tc := range []struct {
		in   *v1.AppArmorProfile
		want runtimeapi.SecurityProfile_ProfileType
		ref  string
		old  string
	}{
		{in: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}, want: runtimeapi.SecurityProfile_RuntimeDefault, old: "runtime/default"},
		{in: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}, want: runtimeapi.SecurityProfile_Unconfined, old: "unconfined"},
		{in: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("mine")}, want: runtimeapi.SecurityProfile_Localhost, ref: "mine", old: "localhost/mine"},
	} {
		got, old := appArmorForRuntime(tc.in)
		if got.GetProfileType() != tc.want || got.GetLocalhostRef() != tc.ref || old != tc.old {
			t.Errorf("%v: %v %q, want %v %q %q", tc.in, got, old, tc.want, tc.ref, tc.old)
		}
	}
	if got, old := appArmorForRuntime(nil); got != nil || old != "" {
		t.Errorf("no profile: %v %q, want none (the runtime's default)", got, old)
	}
}
