// Package eviction decides which pods the kubelet evicts, as upstream's eviction
// manager does, in two independent loops:
//
//   - Monitor: local ephemeral-storage limits (local storage capacity isolation): an
//     emptyDir past its sizeLimit, a pod past the sum of its containers'
//     ephemeral-storage limits, a container (writable layer plus logs) past its own.
//   - Pressure: node-pressure eviction. Thresholds on memory.available,
//     nodefs/imagefs available and inodesFree, and pid.available (ParseThresholds
//     reads upstream's --eviction-* flags) drive the MemoryPressure, DiskPressure and
//     PIDPressure node conditions, refuse new pods under pressure (Admit), and evict
//     one pod per period, ranked as upstream, after unused images are removed for disk
//     pressure. A Measurer supplies the numbers: Host reads the real machine; tests
//     and hollow nodes (which run no Pressure at all) never touch it.
//
// Both only decide: the kubelet kills the pod and writes its Failed status.
package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Reason is the status reason and event reason of an evicted pod, as upstream's.
const Reason = "Evicted"

// GracePeriodSeconds is how long an evicted pod's containers get to stop: upstream
// kills pods over a local storage limit with this short override, whatever their spec.
const GracePeriodSeconds = 1

// Usage is one pod's measured local storage use, in bytes.
type Usage struct {
	// EmptyDirs is by volume name.
	EmptyDirs map[string]int64
	// Containers is by container name: the writable layer plus the container's logs.
	Containers map[string]int64
}

// Check returns the eviction message of the first limit the pod's usage exceeds, in
// upstream's order (emptyDir, then the pod's total, then each container), or "" when
// the pod is within its limits.
func Check(pod *v1.Pod, u Usage) string {
	if msg := checkEmptyDirs(pod, u); msg != "" {
		return msg
	}
	if msg := checkPodTotal(pod, u); msg != "" {
		return msg
	}
	return checkContainers(pod, u)
}

// HasLimits reports whether any local storage limit applies to the pod, that is
// whether measuring it can lead to an eviction.
func HasLimits(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if sizeLimit(&pod.Spec.Volumes[i]) != nil {
			return true
		}
	}
	_, ok := podLimit(pod)
	return ok
}

// NeedsContainerUsage reports whether the pod's containers' usage matters: only a
// container or pod limit looks at it.
func NeedsContainerUsage(pod *v1.Pod) bool {
	_, ok := podLimit(pod)
	return ok
}

func sizeLimit(vol *v1.Volume) *resource.Quantity {
	if vol.EmptyDir == nil || vol.EmptyDir.SizeLimit == nil || vol.EmptyDir.SizeLimit.Sign() <= 0 {
		return nil
	}
	return vol.EmptyDir.SizeLimit
}

func exceeds(used int64, limit resource.Quantity) bool {
	return resource.NewQuantity(used, resource.BinarySI).Cmp(limit) > 0
}

func checkEmptyDirs(pod *v1.Pod, u Usage) string {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		limit := sizeLimit(vol)
		used, measured := u.EmptyDirs[vol.Name]
		if limit != nil && measured && exceeds(used, *limit) {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", vol.Name, limit.String())
		}
	}
	return ""
}

// checkPodTotal compares the pod's total (its containers and its disk-backed
// emptyDirs) with the pod's limit.
func checkPodTotal(pod *v1.Pod, u Usage) string {
	limit, ok := podLimit(pod)
	if !ok {
		return ""
	}
	var total int64
	for _, used := range u.Containers {
		total += used
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.EmptyDir != nil && vol.EmptyDir.Medium == v1.StorageMediumDefault {
			total += u.EmptyDirs[vol.Name]
		}
	}
	if exceeds(total, limit) {
		return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String())
	}
	return ""
}

func checkContainers(pod *v1.Pod, u Usage) string {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		limit, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if !ok || limit.IsZero() {
			continue
		}
		if used, measured := u.Containers[c.Name]; measured && exceeds(used, limit) {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, limit.String())
		}
	}
	return ""
}

// podLimit is the pod's ephemeral-storage limit as upstream computes a pod's limits:
// the sum over its containers and sidecars, or an init container's own if larger, plus
// the pod overhead. ok is false when no container sets one.
func podLimit(pod *v1.Pod) (resource.Quantity, bool) {
	var sum resource.Quantity
	found := false
	add := func(c *v1.Container) {
		if q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
			sum.Add(q)
			found = true
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	// Sidecars (init containers that keep running) count with the containers; a
	// plain init container runs alone, beside only the sidecars started before it.
	var sidecars resource.Quantity
	initMax := resource.Quantity{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
			if ok {
				sidecars.Add(q)
			}
			continue
		}
		if ok {
			found = true
			alone := sidecars.DeepCopy()
			alone.Add(q)
			if alone.Cmp(initMax) > 0 {
				initMax = alone
			}
		}
	}
	if !found {
		return resource.Quantity{}, false
	}
	if initMax.Cmp(sum) > 0 {
		sum = initMax
	}
	if q, ok := pod.Spec.Overhead[v1.ResourceEphemeralStorage]; ok {
		sum.Add(q)
	}
	return sum, true
}
