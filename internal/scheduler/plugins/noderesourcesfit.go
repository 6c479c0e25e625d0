package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"mizzen/internal/scheduler/framework"
)

// Scoring strategies of NodeResourcesFit.
const (
	LeastAllocated           = "LeastAllocated"
	MostAllocated            = "MostAllocated"
	RequestedToCapacityRatio = "RequestedToCapacityRatio"
)

// ResourceSpec names a resource and its weight in scoring.
type ResourceSpec struct {
	Name   string `json:"name"`
	Weight int64  `json:"weight,omitempty"`
}

// UtilizationShapePoint is one point of the RequestedToCapacityRatio curve: utilization
// in percent (0-100) maps to a score (0-10).
type UtilizationShapePoint struct {
	Utilization int32 `json:"utilization"`
	Score       int32 `json:"score"`
}

// ScoringStrategy configures NodeResourcesFit's Score.
type ScoringStrategy struct {
	Type                     string         `json:"type,omitempty"`
	Resources                []ResourceSpec `json:"resources,omitempty"`
	RequestedToCapacityRatio *struct {
		Shape []UtilizationShapePoint `json:"shape,omitempty"`
	} `json:"requestedToCapacityRatio,omitempty"`
}

// NodeResourcesFitArgs is the plugin's configuration.
type NodeResourcesFitArgs struct {
	IgnoredResources      []string         `json:"ignoredResources,omitempty"`
	IgnoredResourceGroups []string         `json:"ignoredResourceGroups,omitempty"`
	ScoringStrategy       *ScoringStrategy `json:"scoringStrategy,omitempty"`
}

// NodeResourcesFit rejects nodes without room for the pod's requests (cpu, memory,
// ephemeral storage, extended resources, pod count) and scores by allocation.
type NodeResourcesFit struct {
	ignored      map[string]bool
	ignoredGroup map[string]bool
	strategy     string
	resources    []ResourceSpec
	shape        []UtilizationShapePoint
}

var (
	_ framework.PreFilterPlugin   = (*NodeResourcesFit)(nil)
	_ framework.FilterPlugin      = (*NodeResourcesFit)(nil)
	_ framework.PreScorePlugin    = (*NodeResourcesFit)(nil)
	_ framework.ScorePlugin       = (*NodeResourcesFit)(nil)
	_ framework.EnqueueExtensions = (*NodeResourcesFit)(nil)
)

var defaultScoringResources = []ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}

// NewNodeResourcesFit is the plugin factory.
func NewNodeResourcesFit(raw json.RawMessage, _ framework.Handle) (framework.Plugin, error) {
	var args NodeResourcesFitArgs
	if err := decodeArgs(raw, NodeResourcesFitName, &args); err != nil {
		return nil, err
	}
	pl := &NodeResourcesFit{ignored: map[string]bool{}, ignoredGroup: map[string]bool{}, strategy: LeastAllocated, resources: defaultScoringResources}
	for _, r := range args.IgnoredResources {
		pl.ignored[r] = true
	}
	for _, g := range args.IgnoredResourceGroups {
		pl.ignoredGroup[g] = true
	}
	if s := args.ScoringStrategy; s != nil {
		if s.Type != "" {
			pl.strategy = s.Type
		}
		if len(s.Resources) > 0 {
			pl.resources = s.Resources
		}
		for i := range pl.resources {
			if pl.resources[i].Weight == 0 {
				pl.resources[i].Weight = 1
			}
		}
		if s.RequestedToCapacityRatio != nil {
			pl.shape = s.RequestedToCapacityRatio.Shape
		}
	}
	switch pl.strategy {
	case LeastAllocated, MostAllocated:
	case RequestedToCapacityRatio:
		if len(pl.shape) == 0 {
			return nil, fmt.Errorf("NodeResourcesFitArgs: scoringStrategy.requestedToCapacityRatio.shape: Required value")
		}
	default:
		return nil, fmt.Errorf("NodeResourcesFitArgs: scoringStrategy.type: Unsupported value: %q", pl.strategy)
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*NodeResourcesFit) Name() string { return NodeResourcesFitName }

// EventsToRegister: resources are freed (pod deleted or scaled down) or added (node
// added or its allocatable grew).
func (*NodeResourcesFit) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete | framework.UpdatePodScaleDown}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeAllocatable}},
	}
}

type fitState struct {
	framework.Resource
}

func (s *fitState) Clone() framework.StateData { return s }

const fitStateKey framework.StateKey = "PreFilter" + NodeResourcesFitName

// PreFilter computes the pod's effective requests once.
func (*NodeResourcesFit) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	state.Write(fitStateKey, &fitState{framework.NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))})
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*NodeResourcesFit) PreFilterExtensions() framework.PreFilterExtensions { return nil }

func (pl *NodeResourcesFit) isIgnored(name v1.ResourceName) bool {
	if pl.ignored[string(name)] {
		return true
	}
	if group, _, ok := strings.Cut(string(name), "/"); ok && pl.ignoredGroup[group] {
		return true
	}
	return false
}

// Filter implements framework.FilterPlugin.
func (pl *NodeResourcesFit) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	var req *framework.Resource
	if d, ok := state.Read(fitStateKey); ok {
		req = &d.(*fitState).Resource
	} else {
		r := framework.NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
		req = &r
	}
	if reasons := pl.insufficient(req, ni); len(reasons) > 0 {
		return framework.NewStatus(framework.Unschedulable, reasons...)
	}
	return nil
}

func (pl *NodeResourcesFit) insufficient(req *framework.Resource, ni *framework.NodeInfo) []string {
	var reasons []string
	if len(ni.Pods)+1 > ni.Allocatable.AllowedPodNumber {
		reasons = append(reasons, "Too many pods")
	}
	if req.MilliCPU == 0 && req.Memory == 0 && req.EphemeralStorage == 0 && len(req.ScalarResources) == 0 {
		return reasons
	}
	if req.MilliCPU > 0 && req.MilliCPU > ni.Allocatable.MilliCPU-ni.Requested.MilliCPU {
		reasons = append(reasons, "Insufficient cpu")
	}
	if req.Memory > 0 && req.Memory > ni.Allocatable.Memory-ni.Requested.Memory {
		reasons = append(reasons, "Insufficient memory")
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > ni.Allocatable.EphemeralStorage-ni.Requested.EphemeralStorage {
		reasons = append(reasons, "Insufficient ephemeral-storage")
	}
	for name, want := range req.ScalarResources {
		if want == 0 || pl.isIgnored(name) {
			continue
		}
		if want > ni.Allocatable.ScalarResources[name]-ni.Requested.ScalarResources[name] {
			reasons = append(reasons, fmt.Sprintf("Insufficient %s", name))
		}
	}
	return reasons
}

type fitScoreState struct {
	nonZero framework.Resource
}

func (s *fitScoreState) Clone() framework.StateData { return s }

const fitScoreStateKey framework.StateKey = "PreScore" + NodeResourcesFitName

// PreScore computes the pod's requests with defaults for unset cpu/memory.
func (*NodeResourcesFit) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(fitScoreStateKey, &fitScoreState{nonZero: framework.PodInfoFor(state, pod).NonZeroRequests})
	return nil
}

func podScoringRequests(state *framework.CycleState, pod *v1.Pod) *framework.Resource {
	if d, ok := state.Read(fitScoreStateKey); ok {
		return &d.(*fitScoreState).nonZero
	}
	r := framework.PodInfoFor(state, pod).NonZeroRequests
	return &r
}

// requestedAndAllocatable returns what the node would have requested with the pod, and
// its allocatable, for one resource. cpu and memory use non-zero defaults as upstream.
func requestedAndAllocatable(ni *framework.NodeInfo, podReq *framework.Resource, name v1.ResourceName) (int64, int64) {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory:
		return ni.NonZeroRequested.Get(name) + podReq.Get(name), ni.Allocatable.Get(name)
	default:
		return ni.Requested.Get(name) + podReq.Get(name), ni.Allocatable.Get(name)
	}
}

// Score implements framework.ScorePlugin with the configured strategy.
func (pl *NodeResourcesFit) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	podReq := podScoringRequests(state, pod)
	var total, weights int64
	for _, r := range pl.resources {
		name := v1.ResourceName(r.Name)
		requested, allocatable := requestedAndAllocatable(ni, podReq, name)
		if allocatable == 0 {
			// A node without the resource is not scored on it (as upstream, for extended ones).
			if framework.IsScalarResourceName(name) {
				continue
			}
		}
		var s int64
		switch pl.strategy {
		case LeastAllocated:
			s = leastAllocated(requested, allocatable)
		case MostAllocated:
			s = mostAllocated(requested, allocatable)
		case RequestedToCapacityRatio:
			s = pl.ratioScore(requested, allocatable)
		}
		total += s * r.Weight
		weights += r.Weight
	}
	if weights == 0 {
		return 0, nil
	}
	return total / weights, nil
}

func leastAllocated(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * framework.MaxNodeScore / capacity
}

func mostAllocated(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	if requested > capacity {
		requested = capacity
	}
	return requested * framework.MaxNodeScore / capacity
}

// ratioScore evaluates the piecewise-linear shape at the utilization; shape scores are
// 0-10 and scaled to 0-100.
func (pl *NodeResourcesFit) ratioScore(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	util := requested * 100 / capacity
	if util > 100 {
		util = 100
	}
	shape := pl.shape
	scale := framework.MaxNodeScore / 10
	if util <= int64(shape[0].Utilization) {
		return int64(shape[0].Score) * scale
	}
	for i := 1; i < len(shape); i++ {
		p0, p1 := shape[i-1], shape[i]
		if util <= int64(p1.Utilization) {
			du := int64(p1.Utilization - p0.Utilization)
			if du == 0 {
				return int64(p1.Score) * scale
			}
			return (int64(p0.Score)*du + int64(p1.Score-p0.Score)*(util-int64(p0.Utilization))) * scale / du
		}
	}
	return int64(shape[len(shape)-1].Score) * scale
}

// ScoreExtensions implements framework.ScorePlugin.
func (*NodeResourcesFit) ScoreExtensions() framework.ScoreExtensions { return nil }
