package framework

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"mizzen/internal/podfit"
)

// ImageStateSummary describes one image on a node and how widely it is spread.
type ImageStateSummary struct {
	Size     int64
	NumNodes int
}

// NodeInfo is the scheduler's aggregated view of one node and the pods on it.
type NodeInfo struct {
	// The fields every filter and score reads come first, next to each other: with
	// hundreds of nodes evaluated per pod, each cache line touched per node is a
	// memory miss.
	node *v1.Node
	// name, labels, unschedulable and taints copy what the hot filters and scores read
	// of the node, so they need not touch the Node object elsewhere in memory.
	name   string
	labels map[string]string
	// hostname is the node's kubernetes.io/hostname label (hasHostname: present), the
	// topology key of most inter-pod (anti-)affinity, read by Label without the map.
	hostname         string
	hasHostname      bool
	unschedulable    bool
	taints           []v1.Taint
	Pods             []*PodInfo
	Requested        Resource
	Allocatable      Resource
	NonZeroRequested Resource
	ImageStates      map[string]*ImageStateSummary

	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo
	UsedPorts                    podfit.HostPortInfo
	// PVCRefCounts counts pods using each "namespace/claim".
	PVCRefCounts map[string]int
	// Generation increases on every change, so snapshots copy only changed nodes.
	Generation int64
}

// NewNodeInfo builds a NodeInfo holding the given pods (node set separately).
func NewNodeInfo(pods ...*v1.Pod) *NodeInfo {
	ni := &NodeInfo{UsedPorts: podfit.HostPortInfo{}, ImageStates: map[string]*ImageStateSummary{}, PVCRefCounts: map[string]int{}}
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}

// Node returns the node, nil if only pods are known so far.
func (n *NodeInfo) Node() *v1.Node {
	if n == nil {
		return nil
	}
	return n.node
}

// SetNode sets the node and its allocatable resources.
func (n *NodeInfo) SetNode(node *v1.Node) {
	n.node = node
	n.name, n.labels, n.unschedulable, n.taints = node.Name, node.Labels, node.Spec.Unschedulable, node.Spec.Taints
	n.hostname, n.hasHostname = node.Labels[v1.LabelHostname]
	n.Allocatable = NewResource(node.Status.Allocatable)
}

// RemoveNode forgets the node object, keeping pods (they may still be deleted later).
func (n *NodeInfo) RemoveNode() {
	n.node = nil
	n.name, n.labels, n.unschedulable, n.taints = "", nil, false, nil
	n.hostname, n.hasHostname = "", false
}

// Name is the node's name ("" while the node is unknown).
func (n *NodeInfo) Name() string { return n.name }

// Labels are the node's labels (shared with the Node object: do not modify).
func (n *NodeInfo) Labels() map[string]string { return n.labels }

// Label returns the value of one of the node's labels.
func (n *NodeInfo) Label(key string) (string, bool) {
	if key == v1.LabelHostname {
		return n.hostname, n.hasHostname
	}
	v, ok := n.labels[key]
	return v, ok
}

// Unschedulable is the node's spec.unschedulable.
func (n *NodeInfo) Unschedulable() bool { return n.unschedulable }

// Taints are the node's spec.taints (shared with the Node object: do not modify).
func (n *NodeInfo) Taints() []v1.Taint { return n.taints }

// AddPod adds a pod to the node's accounting.
func (n *NodeInfo) AddPod(pod *v1.Pod) { n.AddPodInfo(NewPodInfo(pod)) }

// AddPodInfo adds a pre-computed pod.
func (n *NodeInfo) AddPodInfo(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	if pi.HasAffinity() {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
	}
	if len(pi.RequiredAntiAffinityTerms) > 0 {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
	}
	n.update(pi, 1)
}

// RemovePod removes the pod with the pod's UID; it reports whether it was found.
func (n *NodeInfo) RemovePod(pod *v1.Pod) bool {
	uid := PodUID(pod)
	n.PodsWithAffinity = removeFrom(n.PodsWithAffinity, uid)
	n.PodsWithRequiredAntiAffinity = removeFrom(n.PodsWithRequiredAntiAffinity, uid)
	for i, pi := range n.Pods {
		if pi.UID == uid {
			last := len(n.Pods) - 1
			n.Pods[i] = n.Pods[last]
			n.Pods[last] = nil
			n.Pods = n.Pods[:last]
			n.update(pi, -1)
			return true
		}
	}
	return false
}

func removeFrom(list []*PodInfo, uid types.UID) []*PodInfo {
	for i, pi := range list {
		if pi.UID == uid {
			last := len(list) - 1
			list[i] = list[last]
			list[last] = nil
			return list[:last]
		}
	}
	return list
}

func (n *NodeInfo) update(pi *PodInfo, sign int64) {
	n.Requested.AddResource(&pi.Requests, sign)
	n.NonZeroRequested.AddResource(&pi.NonZeroRequests, sign)
	pod := pi.Pod
	for i := 0; pi.hostPorts && i < len(pod.Spec.Containers); i++ {
		for _, p := range pod.Spec.Containers[i].Ports {
			if sign > 0 {
				n.UsedPorts.Add(p.HostIP, string(p.Protocol), p.HostPort)
			} else {
				n.UsedPorts.Remove(p.HostIP, string(p.Protocol), p.HostPort)
			}
		}
	}
	for i := 0; pi.pvcs && i < len(pod.Spec.Volumes); i++ {
		vol := &pod.Spec.Volumes[i]
		if vol.PersistentVolumeClaim != nil {
			key := pod.Namespace + "/" + vol.PersistentVolumeClaim.ClaimName
			n.PVCRefCounts[key] += int(sign)
			if n.PVCRefCounts[key] <= 0 {
				delete(n.PVCRefCounts, key)
			}
		}
	}
}

// Clone copies the NodeInfo so a snapshot is isolated from later cache changes. Pod
// infos are shared: they are replaced, never mutated, once added.
func (n *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{
		node:                         n.node,
		name:                         n.name,
		labels:                       n.labels,
		hostname:                     n.hostname,
		hasHostname:                  n.hasHostname,
		unschedulable:                n.unschedulable,
		taints:                       n.taints,
		Pods:                         append([]*PodInfo(nil), n.Pods...),
		PodsWithAffinity:             append([]*PodInfo(nil), n.PodsWithAffinity...),
		PodsWithRequiredAntiAffinity: append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...),
		UsedPorts:                    make(podfit.HostPortInfo, len(n.UsedPorts)),
		Requested:                    n.Requested.Clone(),
		NonZeroRequested:             n.NonZeroRequested.Clone(),
		Allocatable:                  n.Allocatable.Clone(),
		ImageStates:                  n.ImageStates,
		PVCRefCounts:                 make(map[string]int, len(n.PVCRefCounts)),
		Generation:                   n.Generation,
	}
	for ip, ports := range n.UsedPorts {
		m := make(map[podfit.ProtocolPort]struct{}, len(ports))
		for k := range ports {
			m[k] = struct{}{}
		}
		c.UsedPorts[ip] = m
	}
	for k, v := range n.PVCRefCounts {
		c.PVCRefCounts[k] = v
	}
	return c
}

// ChangedPods lists the pods of a node's new version that its old version lacks, and
// the other way round. Pod infos are shared between a node's versions, so a pointer
// names a pod version: a pod that changed is removed in its old version and added in
// its new one.
func ChangedPods(old, new []*PodInfo) (added, removed []*PodInfo) {
	if len(old)*len(new) <= 1024 {
		for _, p := range old {
			if !slices.Contains(new, p) {
				removed = append(removed, p)
			}
		}
		for _, p := range new {
			if !slices.Contains(old, p) {
				added = append(added, p)
			}
		}
		return added, removed
	}
	in := make(map[*PodInfo]bool, len(old))
	for _, p := range old {
		in[p] = true
	}
	for _, p := range new {
		if in[p] {
			delete(in, p)
		} else {
			added = append(added, p)
		}
	}
	for _, p := range old {
		if in[p] {
			removed = append(removed, p)
		}
	}
	return added, removed
}
