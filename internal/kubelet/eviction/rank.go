package eviction

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rank orders pods for eviction under the signal's pressure, the first to go first,
// as upstream's eviction manager does. For memory and disk: pods using more than they
// request first (a pod that could not be measured counts as one), then lower
// priority, then larger usage above requests. For PIDs: lower priority, then more
// processes. The sort is stable, so equal pods keep their order.
func rank(sig Signal, pods []*v1.Pod, stats map[types.UID]PodStats) {
	res := sig.resource()
	usage := func(p *v1.Pod) (int64, bool) {
		s, ok := stats[p.UID]
		if !ok {
			return 0, false
		}
		return podUsage(res, s), true
	}
	if res == resourcePIDs {
		slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
			if c := comparePriority(a, b); c != 0 {
				return c
			}
			ua, _ := usage(a)
			ub, _ := usage(b)
			return compareInt(ub, ua)
		})
		return
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		ua, okA := usage(a)
		ub, okB := usage(b)
		if okA != okB {
			if !okA {
				return -1
			}
			return 1
		}
		ra, rb := podRequest(a, res), podRequest(b, res)
		exceedsA, exceedsB := ua > ra, ub > rb
		if exceedsA != exceedsB {
			if exceedsA {
				return -1
			}
			return 1
		}
		if c := comparePriority(a, b); c != 0 {
			return c
		}
		return compareInt(ub-rb, ua-ra)
	})
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// comparePriority puts the lower priority first.
func comparePriority(a, b *v1.Pod) int {
	return compareInt(int64(priority(a)), int64(priority(b)))
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// podUsage is the pod's use of the resource: the containers' memory working sets;
// their writable layers, logs and the pod's local volumes for ephemeral storage (one
// filesystem holds them all here); inodes likewise; processes for PIDs.
func podUsage(res v1.ResourceName, s PodStats) int64 {
	var total int64
	switch res {
	case v1.ResourceMemory:
		for _, c := range s.Containers {
			total += c.MemoryWorkingSet
		}
	case v1.ResourceEphemeralStorage:
		total = s.VolumeBytes
		for _, c := range s.Containers {
			total += c.RootfsBytes + c.LogsBytes
		}
	case resourceInodes:
		total = s.VolumeInodes
		for _, c := range s.Containers {
			total += c.RootfsInodes + c.LogsInodes
		}
	case resourcePIDs:
		total = s.Processes
	}
	return total
}

// containerUsage is one container's use of the resource, for eviction messages; ok is
// false for resources upstream names no container usage for.
func containerUsage(res v1.ResourceName, c ContainerStats) (int64, bool) {
	switch res {
	case v1.ResourceMemory:
		return c.MemoryWorkingSet, true
	case v1.ResourceEphemeralStorage:
		return c.RootfsBytes + c.LogsBytes, true
	}
	return 0, false
}

// podRequest is the pod's request of the resource as upstream sums it: its containers
// and sidecars, or a plain init container (beside the sidecars started before it) if
// larger, plus the pod overhead. Inodes and PIDs are never requested.
func podRequest(pod *v1.Pod, res v1.ResourceName) int64 {
	if res != v1.ResourceMemory && res != v1.ResourceEphemeralStorage {
		return 0
	}
	get := func(c *v1.Container) int64 {
		q, ok := c.Resources.Requests[res]
		if !ok {
			return 0
		}
		return q.Value()
	}
	var sum, sidecars, initMax int64
	for i := range pod.Spec.Containers {
		sum += get(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum += get(c)
			sidecars += get(c)
			continue
		}
		initMax = max(initMax, sidecars+get(c))
	}
	total := max(sum, initMax)
	if q, ok := pod.Spec.Overhead[res]; ok {
		total += q.Value()
	}
	return total
}
