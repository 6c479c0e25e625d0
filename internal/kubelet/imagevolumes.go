package kubelet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/kubelet/volume"
)

// imageVolumeSupport says why the runtime cannot mount image volumes (CRI Mount.image),
// or "" when it can. containerd mounts them from 2.1 on; older ones ignore the field
// and would start the container without its volume, so the kubelet does not start it.
// Other runtimes are trusted to refuse what they cannot do.
func imageVolumeSupport(runtimeName, runtimeVersion string) string {
	if runtimeName != "containerd" {
		return ""
	}
	major, minor, ok := majorMinor(runtimeVersion)
	if !ok || major > 2 || (major == 2 && minor >= 1) {
		return ""
	}
	return fmt.Sprintf("the container runtime (containerd %s) cannot mount image volumes; containerd 2.1 or later can", runtimeVersion)
}

// majorMinor reads the leading "vMAJOR.MINOR" of a version such as "v2.1.4" or
// Debian's "1.6.20~ds1".
func majorMinor(version string) (major, minor int, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major, minor, err1 == nil && err2 == nil
}

// imageVolumes pulls, per their pull policies and with the pod's pull secrets, the
// images of the image volumes the container mounts, and returns the pod's volumes with
// those pulled images to mount. A pull that fails, or a runtime that cannot mount
// images, leaves the container waiting with the reason and an event saying why.
func (p *podSync) imageVolumes(ctx context.Context, c *v1.Container) (map[string]volume.Mounted, error) {
	vols := p.volumes
	cloned := false
	pulled := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		mv, ok := p.volumes[vm.Name]
		if !ok || mv.Image == "" || pulled[vm.Name] {
			continue
		}
		pulled[vm.Name] = true
		if why := p.kl.imageVolumesUnsupported; why != "" {
			msg := fmt.Sprintf("image volume %q: %s", vm.Name, why)
			p.w.state.setWaiting(c.Name, reasonConfigError, msg)
			p.kl.recorder.Eventf(containerRef(p.pod, c.Name), v1.EventTypeWarning, "Failed", "Error: %s", msg)
			return nil, errors.New(msg)
		}
		ref, err := p.kl.ensureImageFor(ctx, p.pod, imagePull{image: mv.Image, policy: mv.ImagePullPolicy,
			event: containerRef(p.pod, ""), container: c.Name, key: c.Name + "/volume/" + vm.Name}, p.sandboxConfig, p.w.state)
		if err != nil {
			return nil, err
		}
		if !cloned {
			vols, cloned = maps.Clone(p.volumes), true
		}
		mv.ImageRef = ref
		vols[vm.Name] = mv
	}
	return vols, nil
}
