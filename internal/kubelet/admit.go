package kubelet

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/podfit"
)

// admit decides whether a pod new to this kubelet fits the node, as upstream's admission
// does for pods that bypass the scheduler (spec.nodeName set directly, or a stale
// scheduling decision). Pods are admitted in creation order: a pod is measured against
// the non-terminal pods on the node created before it, so a newer pod never displaces an
// older one. It returns the rejection reason ("OutOfpods", "OutOfcpu", "OutOfmemory",
// "NodePorts" for a host port another pod holds, "AppArmor" for a profile the host
// cannot enforce, "PodOSNotSupported" for a pod of another OS, "SysctlForbidden" for
// a sysctl the node does not allow) and message, or "" when the pod fits.
// A pod that has started is never re-checked.
func (kl *Kubelet) admit(pod *v1.Pod) (string, string) {
	if pod.Status.StartTime != nil || pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
		return "", ""
	}
	// A pod for another OS: upstream's checks, on the pod's kubernetes.io/os label and
	// its spec.os (every mizzen node is Linux).
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != "linux" {
		return "PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	}
	if pod.Spec.OS != nil && pod.Spec.OS.Name != v1.Linux {
		return "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SupplementalGroupsPolicy != nil &&
		*sc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict && !kl.strictSupplementalGroups.Load() {
		// It would run with the image's groups too, which it asked not to.
		return "SupplementalGroupsPolicyNotSupported", "SupplementalGroupsPolicy=Strict is not supported in this node"
	}
	if reason, msg := kl.sysctls.admit(pod); reason != "" {
		return reason, msg
	}
	if reason, msg := admitAppArmor(pod, kl.appArmor); reason != "" {
		return reason, msg
	}
	alloc := kl.nodeAllocatable()
	var usedPods int64
	used := map[v1.ResourceName]int64{}
	usedPorts := podfit.HostPortInfo{}
	for _, obj := range kl.podInformer.GetStore().List() {
		other := obj.(*v1.Pod)
		if other.UID == pod.UID || other.Spec.NodeName != kl.opts.NodeName ||
			other.Status.Phase == v1.PodSucceeded || other.Status.Phase == v1.PodFailed || !createdBefore(other, pod) {
			continue
		}
		usedPods++
		for name, q := range podRequests(other) {
			used[name] += q
		}
		for _, p := range podfit.HostPorts(other) {
			usedPorts.Add(p.HostIP, string(p.Protocol), p.HostPort)
		}
	}
	maxPods := alloc[v1.ResourcePods]
	if usedPods+1 > maxPods.Value() {
		return "OutOfpods", fmt.Sprintf("Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", usedPods, maxPods.Value())
	}
	for name, want := range podRequests(pod) {
		capacity, ok := alloc[name]
		if !ok || want == 0 {
			continue
		}
		limit := capacity.Value()
		if name == v1.ResourceCPU {
			limit = capacity.MilliValue()
		}
		if used[name]+want > limit {
			return "OutOf" + string(name), fmt.Sprintf("Pod was rejected: Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				name, want, used[name], limit)
		}
	}
	for _, p := range podfit.HostPorts(pod) {
		if usedPorts.CheckConflict(p.HostIP, string(p.Protocol), p.HostPort) {
			return "NodePorts", "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
		}
	}
	return "", ""
}

// createdBefore orders pods by creation time, then name, for a stable admission order.
func createdBefore(a, b *v1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// podRequests sums a pod's cpu (millicores) and memory (bytes) requests: the larger of
// the containers' sum and any single init container, plus the pod overhead.
func podRequests(pod *v1.Pod) map[v1.ResourceName]int64 {
	get := func(l v1.ResourceList, name v1.ResourceName) int64 {
		q, ok := l[name]
		if !ok {
			return 0
		}
		if name == v1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	out := map[v1.ResourceName]int64{}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		var sum, initMax int64
		for _, c := range pod.Spec.Containers {
			sum += get(c.Resources.Requests, name)
		}
		for _, c := range pod.Spec.InitContainers {
			initMax = max(initMax, get(c.Resources.Requests, name))
		}
		out[name] = max(sum, initMax) + get(pod.Spec.Overhead, name)
	}
	return out
}
