package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// The container's seccomp profile wins over its pod's; without either a container runs
// unconfined (upstream's kubelet without --seccomp-default); a Localhost profile is a
// file in the kubelet's seccomp directory.
func TestSeccompProfile(t *testing.T) {
	runtimeDefault := &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
	unconfined := &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}
	local := &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("audit.json")}
	for _, tc := range []struct {
		name     string
		pod, ctr *v1.SeccompProfile
		want     runtimeapi.SecurityProfile_ProfileType
		ref      string
	}{
		{name: "none", want: runtimeapi.SecurityProfile_Unconfined},
		{name: "pod", pod: runtimeDefault, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "container over pod", pod: runtimeDefault, ctr: unconfined, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "container", ctr: runtimeDefault, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "localhost", pod: local, want: runtimeapi.SecurityProfile_Localhost, ref: "/var/lib/kubelet/seccomp/audit.json"},
	} {
		var psc *v1.PodSecurityContext
		if tc.pod != nil {
			psc = &v1.PodSecurityContext{SeccompProfile: tc.pod}
		}
		var csc *v1.SecurityContext
		if tc.ctr != nil {
			csc = &v1.SecurityContext{SeccompProfile: tc.ctr}
		}
		got, err := seccompProfile("/var/lib/kubelet/seccomp", psc, csc)
		if err != nil || got.ProfileType != tc.want || got.LocalhostRef != tc.ref {
			t.Errorf("%s: profile %v, %v; want %v %q", tc.name, got, err, tc.want, tc.ref)
		}
	}
	if _, err := seccompProfile("/d", nil, &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}); err == nil {
		t.Error("a Localhost profile without its file was accepted")
	}

	// The kubelet puts them in the CRI configs: the sandbox gets the pod's.
	kl := &Kubelet{opts: Options{RootDir: "/var/lib/kubelet"}}
	pod := newPod("p", "app")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: runtimeDefault}
	cfg, err := kl.sandboxConfig(pod, 0)
	if err != nil || cfg.Linux.SecurityContext.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("sandbox seccomp %v, %v; want RuntimeDefault", cfg.GetLinux().GetSecurityContext().GetSeccomp(), err)
	}

	// So does its supplemental groups policy, and each container's.
	pod.Spec.SecurityContext.SupplementalGroupsPolicy = ptr.To(v1.SupplementalGroupsPolicyStrict)
	cfg, _ = kl.sandboxConfig(pod, 0)
	csc := containerSecurityContext(pod, &pod.Spec.Containers[0])
	if cfg.Linux.SecurityContext.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict ||
		csc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
		t.Errorf("supplemental groups policy: sandbox %v, container %v; want Strict", cfg.Linux.SecurityContext.SupplementalGroupsPolicy, csc.SupplementalGroupsPolicy)
	}
}
