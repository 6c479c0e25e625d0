package kubelet

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// checkRunAsNonRoot refuses to create a container that asks to run as a non-root user
// (runAsNonRoot, the container's or else the pod's) when it would run as root: its
// runAsUser is 0 or, without one, its image's user is root, missing or a name the
// kubelet cannot tell is not root. The error is the container's
// CreateContainerConfigError, in upstream's words.
func (kl *Kubelet) checkRunAsNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) error {
	nonRoot, user := effectiveNonRootAndUser(pod, c)
	if nonRoot == nil || !*nonRoot {
		return nil
	}
	where := fmt.Sprintf("(pod: %q, container: %s)", formatPod(pod), c.Name)
	if user != nil {
		if *user == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy %s", where)
		}
		return nil
	}
	status, err := kl.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false)
	if err != nil {
		return fmt.Errorf("reading the user of image %q: %w", c.Image, err)
	}
	img := status.GetImage()
	switch {
	case img.GetUid() != nil:
		uid := img.GetUid().GetValue()
		if uid == 0 {
			return fmt.Errorf("container has runAsNonRoot and image will run as root %s", where)
		}
		if uid < 0 || uid > math.MaxInt32 {
			return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)) %s", uid, math.MaxInt32, where)
		}
		return nil
	case img.GetUsername() != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root %s", img.GetUsername(), where)
	default:
		// An image that names no user runs as root.
		return fmt.Errorf("container has runAsNonRoot and image will run as root %s", where)
	}
}

// effectiveNonRootAndUser are the container's runAsNonRoot and runAsUser, each falling
// back to the pod's.
func effectiveNonRootAndUser(pod *v1.Pod, c *v1.Container) (nonRoot *bool, user *int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot, user = psc.RunAsNonRoot, psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			user = csc.RunAsUser
		}
	}
	return nonRoot, user
}
