package kubelet

import (
	"cmp"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// admit decides whether a pod new to this kubelet fits the node, as upstream's admission
// does for pods that bypass the scheduler (spec.nodeName set directly, or a stale
// scheduling decision). Pods are admitted in creation order: a pod is measured against
// the non-terminal pods on the node created before it, so a newer pod never displaces an
// older one. It returns the rejection reason ("OutOfpods", "OutOfcpu", "OutOfmemory",
// "NodePorts" for a host port another pod holds) and message, or "" when the pod fits.
// A pod that has started is never re-checked.
func (kl *Kubelet) admit(pod *v1.Pod) (string, string) {
	if pod.Status.StartTime != nil || pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
		return "", ""
	}
	alloc := kl.nodeAllocatable()
	var usedPods int64
	used := map[v1.ResourceName]int64{}
	var usedPorts []v1.ContainerPort
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
		usedPorts = append(usedPorts, hostPorts(other)...)
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
	for _, want := range hostPorts(pod) {
		if slices.ContainsFunc(usedPorts, func(u v1.ContainerPort) bool { return hostPortsConflict(u, want) }) {
			return "NodePorts", "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
		}
	}
	return "", ""
}

// hostPorts are the ports a pod's containers take on the node.
func hostPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// hostPortsConflict: the same port and protocol on the same address, or on every
// address (an empty hostIP or 0.0.0.0) against any, as the scheduler's NodePorts sees it.
func hostPortsConflict(a, b v1.ContainerPort) bool {
	protocol := func(p v1.ContainerPort) v1.Protocol { return cmp.Or(p.Protocol, v1.ProtocolTCP) }
	ip := func(p v1.ContainerPort) string { return cmp.Or(p.HostIP, "0.0.0.0") }
	if a.HostPort != b.HostPort || protocol(a) != protocol(b) {
		return false
	}
	return ip(a) == ip(b) || ip(a) == "0.0.0.0" || ip(b) == "0.0.0.0"
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
