package plugins

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/podfit"
	"mizzen/internal/scheduler/framework"
)

// ErrReasonNodePorts is shown when a wanted host port is taken.
const ErrReasonNodePorts = "node(s) didn't have free ports for the requested pod ports"

// NodePorts rejects nodes where a requested hostPort is already in use.
type NodePorts struct{}

var (
	_ framework.PreFilterPlugin   = (*NodePorts)(nil)
	_ framework.FilterPlugin      = (*NodePorts)(nil)
	_ framework.EnqueueExtensions = (*NodePorts)(nil)
)

// Name implements framework.Plugin.
func (*NodePorts) Name() string { return NodePortsName }

// EventsToRegister: a pod is deleted (freeing ports) or a node is added.
func (*NodePorts) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}},
	}
}

type wantPorts []v1.ContainerPort

func (w wantPorts) Clone() framework.StateData { return w }

const nodePortsStateKey framework.StateKey = "PreFilter" + NodePortsName

func hostPorts(pod *v1.Pod) wantPorts { return podfit.HostPorts(pod) }

// PreFilter collects the pod's host ports; pods without any skip the filter.
func (*NodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	ports := hostPorts(pod)
	if len(ports) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(nodePortsStateKey, ports)
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*NodePorts) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (*NodePorts) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	var ports wantPorts
	if d, ok := state.Read(nodePortsStateKey); ok {
		ports = d.(wantPorts)
	} else {
		ports = hostPorts(pod)
	}
	for _, p := range ports {
		if ni.UsedPorts.CheckConflict(p.HostIP, string(p.Protocol), p.HostPort) {
			return framework.NewStatus(framework.Unschedulable, ErrReasonNodePorts)
		}
	}
	return nil
}
