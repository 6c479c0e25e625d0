package plugins

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/scheduler/framework"
)

// ErrReasonUnschedulable is shown for cordoned nodes.
const ErrReasonUnschedulable = "node(s) were unschedulable"

// NodeUnschedulable rejects cordoned nodes (spec.unschedulable) unless the pod tolerates
// the node.kubernetes.io/unschedulable:NoSchedule taint.
type NodeUnschedulable struct{}

var (
	_ framework.FilterPlugin      = (*NodeUnschedulable)(nil)
	_ framework.EnqueueExtensions = (*NodeUnschedulable)(nil)
)

// Name implements framework.Plugin.
func (*NodeUnschedulable) Name() string { return NodeUnschedulableName }

// EventsToRegister: a node is added or uncordoned.
func (*NodeUnschedulable) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{{
		Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint},
		QueueingHintFn: func(_ *v1.Pod, _, newObj interface{}) bool {
			n, ok := newObj.(*v1.Node)
			return !ok || !n.Spec.Unschedulable
		},
	}}
}

// Filter implements framework.FilterPlugin.
func (*NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if !ni.Unschedulable() {
		return nil
	}
	taint := v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	if tolerates(pod.Spec.Tolerations, &taint) {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnschedulable)
}
