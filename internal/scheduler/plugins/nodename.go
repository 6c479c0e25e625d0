package plugins

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/scheduler/framework"
)

// ErrReasonNodeName is shown when spec.nodeName names another node.
const ErrReasonNodeName = "node(s) didn't match the requested node name"

// NodeName keeps a pod that already names a node (spec.nodeName set by the user at
// creation but not bound) on that node only.
type NodeName struct{}

var (
	_ framework.FilterPlugin      = (*NodeName)(nil)
	_ framework.EnqueueExtensions = (*NodeName)(nil)
)

// Name implements framework.Plugin.
func (*NodeName) Name() string { return NodeNameName }

// EventsToRegister: a node with the wanted name may appear.
func (*NodeName) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}}}
}

// Filter implements framework.FilterPlugin.
func (*NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != ni.Node().Name {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeName)
	}
	return nil
}
