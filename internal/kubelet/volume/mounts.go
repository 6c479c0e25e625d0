package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerMounts turns a container's volumeMounts into CRI mounts over the volumes
// SetUp returned. vars are the container's environment, for subPathExpr. A subPath
// is resolved on the host (symlinks included) and must stay inside its volume; a
// missing one is created as a directory in writable volumes, as upstream does.
func ContainerMounts(c *v1.Container, vols map[string]Mounted, vars map[string]string) ([]*runtimeapi.Mount, error) {
	out := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts))
	for _, vm := range c.VolumeMounts {
		vol, ok := vols[vm.Name]
		if !ok || vol.Block {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, vars)
		}
		if vol.Image != "" {
			m, err := imageMount(vm, vol, sub)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			continue
		}
		hostPath := vol.Path
		if sub != "" {
			p, err := subPathOf(vol, sub)
			if err != nil {
				return nil, err
			}
			hostPath = p
		}
		out = append(out, &runtimeapi.Mount{
			ContainerPath:  vm.MountPath,
			HostPath:       hostPath,
			Readonly:       vm.ReadOnly || vol.ReadOnly,
			SelinuxRelabel: false,
			Propagation:    propagation(vm.MountPropagation),
		})
	}
	return out, nil
}

// imageMount is the CRI mount of an image volume: the runtime mounts the image (the
// one the kubelet pulled, ImageRef) read-only, or only its subPath, as upstream's kubelet
// asks it to.
func imageMount(vm v1.VolumeMount, vol Mounted, sub string) (*runtimeapi.Mount, error) {
	if sub != "" && (filepath.IsAbs(sub) || strings.HasPrefix(filepath.Clean(sub), "..")) {
		return nil, fmt.Errorf("invalid subpath %q: must be a relative path inside the volume", sub)
	}
	ref := vol.ImageRef
	if ref == "" {
		ref = vol.Image
	}
	return &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		Image:         &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: vol.Image},
		ImageSubPath:  sub,
		Readonly:      true,
		Propagation:   propagation(vm.MountPropagation),
	}, nil
}

func subPathOf(vol Mounted, sub string) (string, error) {
	if filepath.IsAbs(sub) || strings.HasPrefix(filepath.Clean(sub), "..") {
		return "", fmt.Errorf("invalid subpath %q: must be a relative path inside the volume", sub)
	}
	full := filepath.Join(vol.Path, sub)
	if _, err := os.Lstat(full); os.IsNotExist(err) {
		if !vol.Writable {
			return "", fmt.Errorf("subPath %q does not exist in the volume", sub)
		}
		if err := os.MkdirAll(full, 0o750); err != nil {
			return "", err
		}
	}
	root, err := filepath.EvalSymlinks(vol.Path)
	if err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", err
	}
	if resolved != root && !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
		return "", fmt.Errorf("subpath %q resolves outside of its volume", sub)
	}
	return resolved, nil
}

func propagation(p *v1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// expand replaces $(NAME) with the variable's value; unknown names stay as written.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "$(")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], ')')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		name := s[i+2 : i+j]
		b.WriteString(s[:i])
		if v, ok := vars[name]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
}
