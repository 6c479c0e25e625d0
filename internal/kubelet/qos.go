package kubelet

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CPU and OOM constants of upstream's cgroup and QoS policy.
const (
	minShares        = 2
	sharesPerCPU     = 1024
	quotaPeriod      = 100000 // 100ms in microseconds
	minQuota         = 1000
	guaranteedOOMAdj = -997
	bestEffortOOMAdj = 1000
	// Pods at or above this priority (system-node-critical) get the guaranteed score.
	systemCriticalPriority = 2 * 1000000000
)

// qosClass computes the pod's QoS class from its containers' cpu and memory requests
// and limits (requests default to limits), unless the apiserver already recorded it.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	tracked := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	requested, guaranteed := false, true
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, r := range tracked {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq && !req.IsZero() || hasLim && !lim.IsZero() {
				requested = true
			}
			if !hasLim || lim.IsZero() {
				guaranteed = false
				continue
			}
			if hasReq && req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !requested:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	default:
		return v1.PodQOSBurstable
	}
}

// oomScoreAdj is upstream's policy: guaranteed and node-critical pods -997, best effort
// 1000, burstable 1000 - 1000*memoryRequest/memoryCapacity kept within (3, 999).
func oomScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int64 {
	if pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority {
		return guaranteedOOMAdj
	}
	switch qosClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMAdj
	case v1.PodQOSBestEffort:
		return bestEffortOOMAdj
	}
	if memoryCapacity <= 0 {
		return bestEffortOOMAdj - 1
	}
	req := c.Resources.Requests.Memory().Value()
	if req == 0 {
		req = c.Resources.Limits.Memory().Value()
	}
	adj := 1000 - (1000*req)/memoryCapacity
	if adj < 1000+guaranteedOOMAdj {
		return 1000 + guaranteedOOMAdj
	}
	if adj == bestEffortOOMAdj {
		return adj - 1
	}
	return adj
}

// milliCPUToShares converts a cpu request to cgroup v1 cpu.shares.
func milliCPUToShares(milli int64) int64 {
	if milli == 0 {
		return minShares
	}
	return max(milli*sharesPerCPU/1000, minShares)
}

// milliCPUToQuota converts a cpu limit to a CFS quota over quotaPeriod.
func milliCPUToQuota(milli int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*quotaPeriod/1000, minQuota)
}

// linuxResources maps the container's resources to CRI cgroup settings.
func (kl *Kubelet) linuxResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	cpuReq := c.Resources.Requests.Cpu()
	if cpuReq.IsZero() {
		cpuReq = c.Resources.Limits.Cpu() // requests default to limits
	}
	r := &runtimeapi.LinuxContainerResources{
		CpuShares:   milliCPUToShares(cpuReq.MilliValue()),
		OomScoreAdj: oomScoreAdj(pod, c, kl.opts.Machine.MemoryBytes),
	}
	if lim := c.Resources.Limits.Cpu(); !lim.IsZero() {
		r.CpuPeriod = quotaPeriod
		r.CpuQuota = milliCPUToQuota(lim.MilliValue())
	}
	if lim := c.Resources.Limits.Memory(); !lim.IsZero() {
		r.MemoryLimitInBytes = lim.Value()
	}
	return r
}
