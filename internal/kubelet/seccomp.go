package kubelet

import (
	"errors"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// seccompDir is where Localhost seccomp profiles live, under the kubelet's root
// directory, as upstream's kubelet keeps them.
func (kl *Kubelet) seccompDir() string { return filepath.Join(kl.opts.RootDir, "seccomp") }

// seccompProfile is the seccomp profile a container runs under, or a sandbox when c is
// nil: the container's own, else its pod's, else none (Unconfined), as upstream's kubelet
// without --seccomp-default. A Localhost profile names a file under dir.
func seccompProfile(dir string, pod *v1.PodSecurityContext, c *v1.SecurityContext) (*runtimeapi.SecurityProfile, error) {
	var p *v1.SeccompProfile
	if pod != nil {
		p = pod.SeccompProfile
	}
	if c != nil && c.SeccompProfile != nil {
		p = c.SeccompProfile
	}
	if p == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(dir, *p.LocalhostProfile)}, nil
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
}
