package framework

import v1 "k8s.io/api/core/v1"

// EventResource is the kind of object a cluster event is about.
type EventResource string

// Resources whose changes can make pods schedulable.
const (
	Pod                   EventResource = "Pod"
	AssignedPod           EventResource = "AssignedPod"
	Node                  EventResource = "Node"
	PersistentVolume      EventResource = "PersistentVolume"
	PersistentVolumeClaim EventResource = "PersistentVolumeClaim"
	StorageClass          EventResource = "StorageClass"
	Namespace             EventResource = "Namespace"
	WildCard              EventResource = "*"
)

// ActionType is a bit set of what happened to the object.
type ActionType int64

// Actions, finer-grained for updates so a pod waits for a change that can matter.
const (
	Add ActionType = 1 << iota
	Delete
	UpdateNodeAllocatable
	UpdateNodeLabel
	UpdateNodeTaint
	UpdateNodeCondition
	UpdateNodeAnnotation
	UpdatePodLabel
	UpdatePodScaleDown
	UpdatePodTolerations
	UpdatePodSchedulingGatesEliminated
	UpdateOther

	All    ActionType = 1<<iota - 1
	Update            = UpdateNodeAllocatable | UpdateNodeLabel | UpdateNodeTaint | UpdateNodeCondition | UpdateNodeAnnotation | UpdatePodLabel | UpdatePodScaleDown | UpdatePodTolerations | UpdatePodSchedulingGatesEliminated | UpdateOther
)

// ClusterEvent is a change to the cluster.
type ClusterEvent struct {
	Resource   EventResource
	ActionType ActionType
	Label      string
}

// Match reports whether the registered event covers the observed one.
func (registered ClusterEvent) Match(observed ClusterEvent) bool {
	if registered.Resource == WildCard && registered.ActionType == All {
		return true
	}
	resOK := registered.Resource == observed.Resource || registered.Resource == WildCard
	if registered.Resource == Pod && observed.Resource == AssignedPod {
		resOK = true
	}
	return resOK && registered.ActionType&observed.ActionType != 0
}

// QueueingHintFn decides whether one observed event can make the rejected pod schedulable.
// It returns true to requeue. A nil function always requeues.
type QueueingHintFn func(pod *v1.Pod, oldObj, newObj interface{}) bool

// ClusterEventWithHint pairs an event with an optional hint.
type ClusterEventWithHint struct {
	Event          ClusterEvent
	QueueingHintFn QueueingHintFn
}

// Well-known events used by the scheduler itself.
var (
	// EventUnschedulableTimeout fires when a pod has waited too long in the pool.
	EventUnschedulableTimeout = ClusterEvent{Resource: WildCard, ActionType: All, Label: "UnschedulableTimeout"}
	// EventForceActivate moves everything (used after leader election starts).
	EventForceActivate = ClusterEvent{Resource: WildCard, ActionType: All, Label: "ForceActivate"}
)

// NodeUpdateActions compares two versions of a node.
func NodeUpdateActions(oldNode, newNode *v1.Node) ActionType {
	var a ActionType
	if !equalResourceList(oldNode.Status.Allocatable, newNode.Status.Allocatable) {
		a |= UpdateNodeAllocatable
	}
	if !equalStringMap(oldNode.Labels, newNode.Labels) {
		a |= UpdateNodeLabel
	}
	if !equalTaints(oldNode.Spec.Taints, newNode.Spec.Taints) || oldNode.Spec.Unschedulable != newNode.Spec.Unschedulable {
		a |= UpdateNodeTaint
	}
	if !equalConditions(oldNode.Status.Conditions, newNode.Status.Conditions) {
		a |= UpdateNodeCondition
	}
	if !equalStringMap(oldNode.Annotations, newNode.Annotations) {
		a |= UpdateNodeAnnotation
	}
	if len(oldNode.Status.Images) != len(newNode.Status.Images) {
		a |= UpdateOther
	}
	return a
}

func equalResourceList(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func equalStringMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

func equalTaints(a, b []v1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value || a[i].Effect != b[i].Effect {
			return false
		}
	}
	return true
}

func equalConditions(a, b []v1.NodeCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status {
			return false
		}
	}
	return true
}
