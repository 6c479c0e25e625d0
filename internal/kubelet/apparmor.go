package kubelet

import (
	"bytes"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostEnforcesAppArmor reports whether the kernel has AppArmor enabled, as runc reads it.
func hostEnforcesAppArmor() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && bytes.HasPrefix(b, []byte("Y"))
}

// appArmorProfile is the AppArmor profile a container asks for: its own, else the
// deprecated per-container annotation (static pods may still carry it), else the pod's;
// nil leaves it to the runtime's default.
func appArmorProfile(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case v == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case v == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix)
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		return psc.AppArmorProfile
	}
	return nil
}

// admitAppArmor refuses a pod that asks for an AppArmor profile other than Unconfined
// on a host that cannot enforce one, or names an empty Localhost profile, as upstream's
// kubelet admission does: it would otherwise run without the confinement it asked for.
func admitAppArmor(pod *v1.Pod, hostEnforces bool) (reason, message string) {
	for _, c := range podContainers(pod) {
		p := appArmorProfile(pod, c)
		switch {
		case p == nil || p.Type == v1.AppArmorProfileTypeUnconfined:
		case !hostEnforces:
			return "AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host"
		case p.Type == v1.AppArmorProfileTypeLocalhost && (p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == ""):
			return "AppArmor", "Cannot enforce AppArmor: invalid empty AppArmor profile name"
		}
	}
	return "", ""
}

// appArmorForRuntime is the profile as the CRI takes it, in the field and in the
// deprecated string older runtimes (containerd 1.6) read.
func appArmorForRuntime(p *v1.AppArmorProfile) (*runtimeapi.SecurityProfile, string) {
	switch {
	case p == nil:
		return nil, ""
	case p.Type == v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, v1.DeprecatedAppArmorBetaProfileRuntimeDefault
	case p.Type == v1.AppArmorProfileTypeLocalhost && p.LocalhostProfile != nil:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			v1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, v1.DeprecatedAppArmorBetaProfileNameUnconfined
	}
}
